package dev.rollcall.recovery;

import static org.junit.jupiter.api.Assertions.assertEquals;

import dev.rollcall.recovery.Verdict.Disposition;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.UUID;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/**
 * After a takeover's mends: which verdicts change (live-owned runs the dead instance owed a
 * re-drive are deferred, and so are runs whose owner message a queued job can still deliver; the
 * others are re-driven with that message at once).
 */
@Tag("unit")
class TornRunsWakeTest {

  private static final UUID DEAD = UUID.randomUUID();

  @Test
  void aRunWhoseStepADeadStepMessageOwnedIsReDrivenWithThatMessageOnceNoJobOfItCanRun() {
    List<Verdict> after =
        TornRuns.redriveOwners(
            List.of(
                Verdict.skip("owned", "wf", Reason.OWNED_BY_LIVE_INSTANCE),
                Verdict.handOut("gone", "wf", Reason.OWNER_DEAD, DEAD),
                Verdict.skip("done", "wf", Reason.TERMINAL),
                Verdict.skip("other", "wf", Reason.OWNED_BY_LIVE_INSTANCE)),
            Map.of("owned", "msg_a", "gone", "msg_b", "done", "msg_c"),
            Set.of(),
            DEAD);

    // A live instance reports it: deferred, the owner message kept for its re-drive.
    assertEquals(Disposition.DEFER, after.get(0).disposition());
    assertEquals(Reason.OWNED_BY_LIVE_INSTANCE, after.get(0).reason());
    assertEquals("msg_a", after.get(0).messageId());
    // None does, and no job of its message can run: re-driven with it now.
    assertEquals("msg_b", after.get(1).messageId());
    assertEquals(Disposition.HAND_OUT, after.get(1).disposition());
    assertEquals(Reason.OWNER_DEAD, after.get(1).reason());
    assertEquals(DEAD, after.get(1).deadInstanceId());
    assertEquals(Verdict.skip("done", "wf", Reason.TERMINAL), after.get(2));
    assertEquals(Verdict.skip("other", "wf", Reason.OWNED_BY_LIVE_INSTANCE), after.get(3));
  }

  @Test
  void whileAJobOfTheOwnerMessageCanRunThatJobIsTheReDriveAndNoneIsHandedOutBesideIt() {
    List<Verdict> after =
        TornRuns.redriveOwners(
            List.of(
                Verdict.handOut("released", "wf", Reason.OWNER_DEAD, DEAD),
                Verdict.defer("waiting", "wf", Reason.HAS_QUEUED_JOB),
                Verdict.skip("sleeping", "wf", Reason.HAS_QUEUED_JOB),
                Verdict.skip("owned", "wf", Reason.OWNED_BY_LIVE_INSTANCE)),
            Map.of("released", "msg_a", "waiting", "msg_b", "sleeping", "msg_c", "owned", "msg_d"),
            Set.of("msg_a", "msg_b", "msg_c", "msg_d"),
            DEAD);

    assertEquals(
        List.of(
            Verdict.defer("released", "wf", Reason.HAS_QUEUED_JOB).withMessageId("msg_a"),
            Verdict.defer("waiting", "wf", Reason.HAS_QUEUED_JOB).withMessageId("msg_b"),
            Verdict.skip("sleeping", "wf", Reason.HAS_QUEUED_JOB),
            Verdict.defer("owned", "wf", Reason.OWNED_BY_LIVE_INSTANCE).withMessageId("msg_d")),
        after);
  }
}
