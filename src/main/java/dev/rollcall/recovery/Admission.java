package dev.rollcall.recovery;

import io.smallrye.mutiny.Uni;
import java.util.function.Predicate;
import java.util.function.Supplier;

/**
 * The part {@link Gate} and {@link Lanes} share: work that starts when admitted and, whatever its
 * outcome, leaves before its caller hears of it, so the next work can start.
 */
final class Admission {

  private Admission() {}

  /**
   * Runs the work once {@code enter} admits it: {@code enter} either admits it now (true) or keeps
   * the start it is given to run later (false), when a {@code leave} hands its place on. {@code
   * leave} runs once the work ends, before its outcome is passed on.
   */
  static <T> Uni<T> run(
      Supplier<Uni<? extends T>> work, Predicate<Runnable> enter, Runnable leave) {
    return Uni.createFrom()
        .emitter(
            emitter -> {
              Runnable start =
                  () ->
                      Uni.createFrom()
                          .<T>deferred(work)
                          .onTermination()
                          .invoke(leave)
                          .subscribe()
                          .with(emitter::complete, emitter::fail);
              if (enter.test(start)) {
                start.run();
              }
            });
  }
}
