package dev.rollcall.recovery;

import static org.junit.jupiter.api.Assertions.assertEquals;

import dev.rollcall.recovery.Verdict.Disposition;
import java.util.List;
import java.util.UUID;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/**
 * After a takeover's mends: which verdicts change (live-owned runs the dead instance owed a
 * re-drive are deferred, the others re-driven at once).
 */
@Tag("unit")
class TornRunsWakeTest {

  private static final UUID DEAD = UUID.randomUUID();

  @Test
  void aRunWhoseStepADeadStepMessageOwnedIsReDrivenWithThatMessageOnceNoLiveInstanceReportsIt() {
    List<Verdict> after =
        TornRuns.redriveOwners(
            List.of(
                Verdict.skip("owned", "wf", Reason.OWNED_BY_LIVE_INSTANCE),
                Verdict.skip("queued", "wf", Reason.HAS_QUEUED_JOB),
                Verdict.skip("done", "wf", Reason.TERMINAL),
                Verdict.skip("other", "wf", Reason.OWNED_BY_LIVE_INSTANCE)),
            java.util.Map.of("owned", "msg_a", "queued", "msg_b", "done", "msg_c"),
            DEAD);

    // A live instance reports it: deferred, the owner message kept for its re-drive.
    assertEquals(Disposition.DEFER, after.get(0).disposition());
    assertEquals(Reason.OWNED_BY_LIVE_INSTANCE, after.get(0).reason());
    assertEquals("msg_a", after.get(0).messageId());
    // None does: re-driven with it now, whatever the queue holds.
    assertEquals("msg_b", after.get(1).messageId());
    assertEquals(Disposition.HAND_OUT, after.get(1).disposition());
    assertEquals(Reason.OWNER_DEAD, after.get(1).reason());
    assertEquals(DEAD, after.get(1).deadInstanceId());
    assertEquals(Verdict.skip("done", "wf", Reason.TERMINAL), after.get(2));
    assertEquals(Verdict.skip("other", "wf", Reason.OWNED_BY_LIVE_INSTANCE), after.get(3));
  }
}
