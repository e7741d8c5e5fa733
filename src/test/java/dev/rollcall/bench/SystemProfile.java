package dev.rollcall.bench;

import java.io.File;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.concurrent.TimeUnit;

/**
 * Where the machine's CPU went during one benchmark scenario, by process: with {@code
 * -Dbench.perf=DIR}, a system-wide {@code perf record} of each measured window into {@code
 * DIR/<nn>-<scenario>.data}, beside a snapshot taken just before it of every thread ({@code
 * <scenario>.ps}: thread id, process id, command line) and of every TCP connection with its owner
 * ({@code <scenario>.ss}). The snapshot names each PostgreSQL backend's client: a backend's command
 * line gives its client's port, and the connection with that port its process (the service, a
 * replica process). {@code node bench/perf-owners.mjs DIR} sums the samples by owner.
 *
 * <p>Needs {@code perf}, {@code ps} and {@code ss} on the PATH and permission to record every CPU
 * (root, or {@code kernel.perf_event_paranoid} ≤ 0); without them the profile says so once and the
 * benchmark runs on. The recording starts a second before the window it covers, so that its own
 * start-up is not in it; the benchmark's timings start after that second.
 */
final class SystemProfile {

  /** Samples per second and CPU; perf-owners.mjs reads it back from each recording's header. */
  static final int FREQUENCY = 499;

  private final Path dir;
  private int recordings;

  private SystemProfile(Path dir) {
    this.dir = dir;
  }

  /** The profile asked for by {@code bench.perf} (unset: off). */
  static SystemProfile of() {
    String property = System.getProperty("bench.perf");
    if (property == null || property.isBlank()) {
      return new SystemProfile(null);
    }
    Path dir = Path.of(property);
    try {
      Files.createDirectories(dir);
      Process probe =
          new ProcessBuilder("perf", "record", "-a", "-o", "/dev/null", "true")
              .redirectErrorStream(true)
              .start();
      String said = new String(probe.getInputStream().readAllBytes()).trim();
      if (!probe.waitFor(30, TimeUnit.SECONDS) || probe.exitValue() != 0) {
        System.out.println(
            "bench.perf: perf cannot record every CPU here; no system profile ("
                + said.lines().findFirst().orElse("")
                + ")");
        return new SystemProfile(null);
      }
    } catch (IOException e) {
      System.out.println("bench.perf: perf is not on the PATH; no system profile (" + e + ")");
      return new SystemProfile(null);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      return new SystemProfile(null);
    }
    return new SystemProfile(dir);
  }

  /** One recording; {@link #stop} ends it. Does nothing when the profile is off. */
  Recording start(String scenario) throws IOException, InterruptedException {
    if (dir == null) {
      return new Recording(null);
    }
    // Numbered in the order recorded: the same scenario at another size gets its own file.
    String name =
        String.format("%02d-%s", ++recordings, scenario.replaceAll("[^A-Za-z0-9=]+", "-"));
    String base = dir.resolve(name).toString();
    Process snapshot =
        new ProcessBuilder(
                "sh", "-c", "ps -eLo lwp,pid,args > \"$1.ps\" && ss -tnp > \"$1.ss\"", "sh", base)
            .redirectErrorStream(true)
            .start();
    if (snapshot.waitFor() != 0) {
      throw new IOException(
          "bench.perf: the snapshot of threads and connections failed: "
              + new String(snapshot.getInputStream().readAllBytes()));
    }
    Process perf =
        new ProcessBuilder(
                "perf", "record", "-a", "-g", "-F", String.valueOf(FREQUENCY), "-o", base + ".data")
            .redirectErrorStream(true)
            .redirectOutput(new File(base + ".log"))
            .start();
    // perf prints nothing once it records; a second is ample for it to open its buffers.
    Thread.sleep(1_000);
    if (!perf.isAlive()) {
      throw new IOException(
          "bench.perf: perf record ended at once; see "
              + base
              + ".log (exit "
              + perf.exitValue()
              + ")");
    }
    System.out.printf("bench.perf: recording %s into %s.data%n", scenario, base);
    return new Recording(perf);
  }

  /** A running {@code perf record}. */
  static final class Recording {
    private final Process perf;

    private Recording(Process perf) {
      this.perf = perf;
    }

    /**
     * Ends the recording (perf writes its file on SIGTERM) and waits for the file; once ended, does
     * nothing.
     */
    void stop() throws InterruptedException {
      if (perf != null) {
        perf.destroy();
        perf.waitFor(60, TimeUnit.SECONDS);
      }
    }
  }
}
