package dev.rollcall.upgrade;

import dev.rollcall.testing.Api.Reply;
import dev.rollcall.testing.Poll;
import java.io.UncheckedIOException;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.LongAdder;
import java.util.function.IntPredicate;
import java.util.function.Supplier;

/**
 * The requests of simulated clients, sent as the Node client sends them: a request that a replica
 * could not answer (connection refused or reset, a 5xx) is sent again after a pause, as a new
 * connection through the balancer; what the client is then told is counted by kind. An error is an
 * answer the client sees that is not the one expected, or a request still failing after {@link
 * #ATTEMPTS} attempts.
 */
final class Requests {

  static final int ATTEMPTS = 20;
  static final long PAUSE_MS = 250;

  /** The client-visible errors printed as they happen (all are counted). */
  static final int SHOWN = 10;

  private final LongAdder sent = new LongAdder();
  private final LongAdder requests = new LongAdder();
  private final Map<String, LongAdder> retried = new ConcurrentHashMap<>();
  private final Map<String, LongAdder> errors = new ConcurrentHashMap<>();

  /**
   * Sends {@code call} until a replica answers it, at most {@link #ATTEMPTS} times; the answer, or
   * null when none came. An answer other than 5xx that {@code expected} refuses is an error.
   */
  Reply send(String what, Supplier<Reply> call, IntPredicate expected) {
    requests.increment();
    String last = "";
    for (int attempt = 1; attempt <= ATTEMPTS; attempt++) {
      sent.increment();
      Reply r;
      try {
        r = call.get();
      } catch (UncheckedIOException e) {
        last = what + " " + e.getCause().getClass().getSimpleName();
        count(retried, last);
        Poll.sleep(PAUSE_MS);
        continue;
      }
      if (r.status() >= 500) {
        last = what + " " + r.status();
        count(retried, last);
        Poll.sleep(PAUSE_MS);
        continue;
      }
      if (!expected.test(r.status())) {
        count(errors, what + " " + r.status());
        if (errors() <= SHOWN) {
          System.out.printf("  client-visible error: %s -> %s%n", what, r.raw());
        }
      }
      return r;
    }
    count(errors, "gave up after " + ATTEMPTS + " attempts: " + last);
    return null;
  }

  /** A request that ended in an exception of the client's own: an error. */
  void unexpected(String what, RuntimeException e) {
    count(errors, what + " " + e.getClass().getSimpleName());
    if (errors() <= SHOWN) {
      System.out.printf("  client-visible error: %s -> %s%n", what, e);
    }
  }

  private static void count(Map<String, LongAdder> by, String kind) {
    by.computeIfAbsent(kind, k -> new LongAdder()).increment();
  }

  long requests() {
    return requests.sum();
  }

  long sent() {
    return sent.sum();
  }

  long errors() {
    return errors.values().stream().mapToLong(LongAdder::sum).sum();
  }

  Map<String, Long> errorsByKind() {
    return sorted(errors);
  }

  Map<String, Long> retriedByKind() {
    return sorted(retried);
  }

  private static Map<String, Long> sorted(Map<String, LongAdder> by) {
    Map<String, Long> out = new TreeMap<>();
    by.forEach((k, v) -> out.put(k, v.sum()));
    return out;
  }
}
