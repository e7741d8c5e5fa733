package dev.rollcall.recovery;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.smallrye.mutiny.Uni;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.logging.Handler;
import java.util.logging.Level;
import java.util.logging.LogRecord;
import java.util.logging.Logger;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/**
 * Every scheduled job (the reaper, the orphaned-lock look, the session check, sweeps, retention,
 * the stranded-epoch check) runs its pass through {@link Housekeeping#survive}: a failed pass is a
 * warning, never a failure of the schedule, and the next interval tries again.
 */
@Tag("unit")
class HousekeepingSurviveTest {

  private final List<LogRecord> logged = new ArrayList<>();
  private final Handler capture =
      new Handler() {
        @Override
        public void publish(LogRecord r) {
          logged.add(r);
        }

        @Override
        public void flush() {}

        @Override
        public void close() {}
      };
  private final Logger log = Logger.getLogger(Housekeeping.class.getName());

  @BeforeEach
  void listen() {
    log.addHandler(capture);
  }

  @AfterEach
  void stopListening() {
    log.removeHandler(capture);
  }

  @Test
  void aFailedPassIsAWarningNotAFailure() {
    Uni<Void> pass =
        Housekeeping.survive(
            Uni.createFrom().failure(new IllegalStateException("a failure this test made")),
            "the look for orphaned queue locks");

    assertNull(pass.await().indefinitely());
    assertEquals(1, logged.size(), "one warning for one failed pass");
    LogRecord warning = logged.get(0);
    assertEquals(Level.WARNING, warning.getLevel());
    String text = String.format(warning.getMessage(), warning.getParameters());
    assertTrue(
        text.contains("the look for orphaned queue locks failed, retrying next pass")
            && text.contains("a failure this test made"),
        text);
  }

  @Test
  void eachPassRunsOnceAndAPassThatWorksSaysNothing() {
    AtomicInteger runs = new AtomicInteger();
    Uni<Void> pass =
        Housekeeping.survive(
            Uni.createFrom().item(() -> runs.incrementAndGet()), "the look for orphaned locks");

    assertNull(pass.await().indefinitely());
    assertEquals(1, runs.get());
    assertEquals(List.of(), logged);
  }
}
