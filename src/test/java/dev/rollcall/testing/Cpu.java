package dev.rollcall.testing;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;

/**
 * CPU time used by the processes of a benchmark, from /proc (Linux; at the usual 100 clock ticks a
 * second), in milliseconds. Each is a counter: a benchmark reports the difference between two
 * reads. -1 (or 0 for a sum) when unknown.
 */
public final class Cpu {

  private Cpu() {}

  /** User and system time of one process so far. */
  public static long of(long pid) {
    long[] t = times("/proc/" + pid + "/stat");
    return t == null ? -1 : (t[0] + t[1]) * 10;
  }

  /**
   * The PostgreSQL server's processes on this machine: the live ones, and the backends that exited
   * (their time is added to the postmaster's waited-for children). The embedded server is started
   * by pg_ctl, which detaches it from this JVM.
   */
  public static long postgres() {
    return ProcessHandle.allProcesses()
        .filter(p -> p.info().command().map(c -> c.endsWith("/postgres")).orElse(false))
        .mapToLong(
            p -> {
              long[] t = times("/proc/" + p.pid() + "/stat");
              return t == null ? 0 : (t[0] + t[1] + t[2] + t[3]) * 10;
            })
        .sum();
  }

  /** One thread's name (its trailing number dropped) and its user and system time so far. */
  public record ThreadTime(String name, long millis) {}

  /**
   * The live threads of one process by thread id, each with its name and CPU so far: where a JVM's
   * CPU went (the JIT's "C2 CompilerThre", the collector's "VM Thread", the event loops). Compare
   * two reads with {@link #usedByName}.
   */
  public static java.util.Map<Long, ThreadTime> threads(long pid) {
    java.util.Map<Long, ThreadTime> threads = new java.util.HashMap<>();
    try (var tasks = Files.list(Path.of("/proc/" + pid + "/task"))) {
      tasks.forEach(
          task -> {
            try {
              String stat = Files.readString(task.resolve("stat"));
              String name =
                  stat.substring(stat.indexOf('(') + 1, stat.lastIndexOf(')'))
                      .replaceAll("[0-9]+$", "")
                      .trim();
              long[] t = parse(stat);
              threads.put(
                  Long.parseLong(task.getFileName().toString()),
                  new ThreadTime(name, (t[0] + t[1]) * 10));
            } catch (IOException | RuntimeException gone) {
              // the thread ended meanwhile
            }
          });
    } catch (IOException | RuntimeException e) {
      return java.util.Map.of();
    }
    return threads;
  }

  /**
   * CPU used between two {@link #threads} reads, summed by thread name, the most first. A thread
   * counts from its first read (or from its start, when it began in between); a thread that ended
   * in between is missing (the JVM stops compiler threads it no longer needs), so each figure is at
   * least what that name used.
   */
  public static java.util.Map<String, Long> usedByName(
      java.util.Map<Long, ThreadTime> before, java.util.Map<Long, ThreadTime> after) {
    java.util.Map<String, Long> byName = new java.util.HashMap<>();
    after.forEach(
        (tid, t) -> {
          ThreadTime was = before.get(tid);
          long from = was != null && was.name().equals(t.name()) ? was.millis() : 0;
          byName.merge(t.name(), t.millis() - from, Long::sum);
        });
    java.util.Map<String, Long> sorted = new java.util.LinkedHashMap<>();
    byName.entrySet().stream()
        .sorted(java.util.Map.Entry.<String, Long>comparingByValue().reversed())
        .forEach(e -> sorted.put(e.getKey(), e.getValue()));
    return sorted;
  }

  /** This JVM (a benchmark's driver). */
  public static long self() {
    return ((com.sun.management.OperatingSystemMXBean)
                java.lang.management.ManagementFactory.getOperatingSystemMXBean())
            .getProcessCpuTime()
        / 1_000_000;
  }

  /** utime, stime, cutime, cstime in clock ticks, or null when the file cannot be read. */
  private static long[] times(String statFile) {
    try {
      return parse(Files.readString(Path.of(statFile)));
    } catch (IOException | RuntimeException e) {
      return null;
    }
  }

  /** utime, stime, cutime, cstime in clock ticks, from the text of a stat file. */
  private static long[] parse(String stat) {
    // Fields after the command name, which is in parentheses and may hold spaces.
    String[] f = stat.substring(stat.lastIndexOf(')') + 2).split(" ");
    return new long[] {
      Long.parseLong(f[11]), Long.parseLong(f[12]), Long.parseLong(f[13]), Long.parseLong(f[14])
    };
  }
}
