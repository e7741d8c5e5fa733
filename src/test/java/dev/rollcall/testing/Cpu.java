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

  /**
   * User and system time of one process's live threads so far, summed by thread name with its
   * trailing number dropped ("C2 CompilerThre", "vert.x-eventloop-thread-", "VM Thread"): where a
   * JVM's CPU went (the JIT, the collector, the event loops). Threads that have exited are not in
   * it.
   */
  public static java.util.Map<String, Long> byThread(long pid) {
    java.util.Map<String, Long> sum = new java.util.TreeMap<>();
    try (var tasks = Files.list(Path.of("/proc/" + pid + "/task"))) {
      tasks.forEach(
          task -> {
            try {
              String stat = Files.readString(task.resolve("stat"));
              String name =
                  stat.substring(stat.indexOf('(') + 1, stat.lastIndexOf(')'))
                      .replaceAll("[0-9]+$", "");
              long[] t = times(task.resolve("stat").toString());
              if (t != null) {
                sum.merge(name, (t[0] + t[1]) * 10, Long::sum);
              }
            } catch (IOException | RuntimeException gone) {
              // the thread ended meanwhile
            }
          });
    } catch (IOException | RuntimeException e) {
      return java.util.Map.of();
    }
    return sum;
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
      String stat = Files.readString(Path.of(statFile));
      // Fields after the command name, which is in parentheses and may hold spaces.
      String[] f = stat.substring(stat.lastIndexOf(')') + 2).split(" ");
      return new long[] {
        Long.parseLong(f[11]), Long.parseLong(f[12]), Long.parseLong(f[13]), Long.parseLong(f[14])
      };
    } catch (IOException | RuntimeException e) {
      return null;
    }
  }
}
