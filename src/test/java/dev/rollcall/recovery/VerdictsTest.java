package dev.rollcall.recovery;

import static org.junit.jupiter.api.Assertions.assertEquals;

import dev.rollcall.recovery.Verdict.Disposition;
import java.util.List;
import java.util.Set;
import java.util.UUID;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

@Tag("unit")
class VerdictsTest {

  @Test
  void aReCheckSkipsOnlyTheHandOutsAnotherEpochMadeAndKeepsEveryOtherVerdict() {
    List<Verdict> found =
        List.of(
            Verdict.handOut("wrun_taken", "wf", Reason.UNCLASSIFIED, null),
            Verdict.handOut("wrun_free", "wf", Reason.UNCLASSIFIED, null),
            Verdict.skip("wrun_owned", "wf", Reason.OWNED_BY_LIVE_INSTANCE),
            Verdict.skip("wrun_done", null, Reason.TERMINAL));

    List<Verdict> out =
        Verdicts.singleHandOut(found, Set.of(), Set.of("wrun_taken", "wrun_owned", "wrun_done"));

    assertEquals(
        List.of(
            Verdict.skip("wrun_taken", "wf", Reason.HANDED_OUT_ELSEWHERE),
            found.get(1),
            found.get(2),
            found.get(3)),
        out);
    assertEquals(Disposition.HAND_OUT, out.get(1).disposition());
  }

  @Test
  void aHandOutAnotherTransactionIsDecidingIsDeferredWithTheMessageItWasToBeReDrivenWith() {
    UUID dead = UUID.randomUUID();
    List<Verdict> found =
        List.of(
            Verdict.handOut("wrun_contended", "wf", Reason.OWNER_DEAD, dead)
                .withMessageId("msg_owner"),
            Verdict.handOut("wrun_free", "wf", Reason.OWNER_DEAD, dead),
            Verdict.skip("wrun_done", null, Reason.TERMINAL));

    List<Verdict> out =
        Verdicts.singleHandOut(found, Set.of("wrun_contended", "wrun_done"), Set.of());

    assertEquals(
        new Verdict(
            "wrun_contended",
            "wf",
            Reason.HAND_OUT_UNDER_WAY,
            Disposition.DEFER,
            null,
            "msg_owner"),
        out.get(0));
    assertEquals(found.subList(1, 3), out.subList(1, 3));
  }
}
