package dev.rollcall.testing;

import java.time.Duration;
import java.util.Optional;
import java.util.function.BooleanSupplier;
import java.util.function.Supplier;

/**
 * Polling with a deadline: a test waiting for the service or the database either sees what it waits
 * for in time or fails saying what never happened.
 */
public final class Poll {

  private static final Duration EVERY = Duration.ofMillis(50);

  private Poll() {}

  /** Waits until {@code done} holds; fails with "{@code what} within {@code within}" if not. */
  public static void until(String what, Duration within, BooleanSupplier done) {
    value(what, within, () -> done.getAsBoolean() ? Optional.of(true) : Optional.empty());
  }

  /** Polls until {@code look} finds a value and returns it; fails with a message if not in time. */
  public static <T> T value(String what, Duration within, Supplier<Optional<T>> look) {
    long deadline = System.nanoTime() + within.toNanos();
    while (true) {
      Optional<T> found = look.get();
      if (found.isPresent()) {
        return found.get();
      }
      if (System.nanoTime() - deadline > 0) {
        throw new AssertionError("not within " + within.toMillis() + " ms: " + what);
      }
      sleep(EVERY.toMillis());
    }
  }

  /** Sleeps, turning an interrupt into a failure (the interrupt flag is kept). */
  public static void sleep(long ms) {
    try {
      Thread.sleep(ms);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new IllegalStateException("interrupted while polling", e);
    }
  }
}
