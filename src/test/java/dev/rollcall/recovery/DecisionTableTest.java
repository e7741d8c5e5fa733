package dev.rollcall.recovery;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.rollcall.recovery.DecisionTable.Decision;
import dev.rollcall.recovery.DecisionTable.Signals;
import dev.rollcall.recovery.Verdict.Disposition;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.UUID;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * The classifier's decision table is the verdicts table of docs/recovery-model.md: each row's proof
 * decides that row's verdict and reason, and a row wins over every row below it.
 */
@Tag("unit")
class DecisionTableTest {

  /** One row of the verdicts table. */
  record Row(String order, String proof, Disposition disposition, Reason reason) {
    @Override
    public String toString() {
      return "row " + order + " (" + reason.wire() + ")";
    }
  }

  /** The facts that make each row's proof hold, by the row's order in the table. */
  private static final Map<String, Set<String>> PROOF =
      Map.ofEntries(
          Map.entry("1", Set.of("owned")),
          Map.entry("2", Set.of("recentlyActive")),
          Map.entry("3", Set.of("stranded")),
          Map.entry("4", Set.of("liveQueuedJob")),
          Map.entry("5", Set.of("parkedOnHook")),
          Map.entry("6", Set.of("unchangedSinceRedrive")),
          Map.entry("7", Set.of("pending")),
          Map.entry("8", Set.of("openStep")),
          Map.entry("9", Set.of("dueWait")),
          Map.entry("10", Set.of()),
          Map.entry("—", Set.of("unclassified")));

  /**
   * Later rows that cannot hold with a row's proof (the table's "unless row 6", "no step pending or
   * running and no wait due", and rows that need the engine's state, which an unclassified page
   * lacks).
   */
  private static final Map<String, Set<String>> EXCLUDES =
      Map.of(
          "3", Set.of("6", "—"),
          "4", Set.of("—"),
          "5", Set.of("8", "9", "—"),
          "8", Set.of("—"),
          "9", Set.of("—"),
          "10", Set.of("—"));

  private static final List<String> ORDER =
      List.of("1", "2", "3", "4", "5", "6", "7", "8", "9", "10", "—");

  static List<Row> readmeRows() throws IOException {
    List<String> lines = Files.readAllLines(Path.of("docs", "recovery-model.md"));
    int start = lines.indexOf("## Verdicts: what a pass does with each run");
    assertTrue(start >= 0, "the verdicts section of docs/recovery-model.md");
    Pattern row = Pattern.compile("^\\| (\\d+|—) \\| (.*) \\| (.*?) \\| `([a-z-]+)`.*\\|$");
    List<Row> rows = new ArrayList<>();
    for (String line : lines.subList(start, lines.size())) {
      if (line.startsWith("## ") && !rows.isEmpty()) {
        break;
      }
      Matcher m = row.matcher(line);
      if (m.matches()) {
        rows.add(
            new Row(m.group(1), m.group(2), disposition(m.group(3)), Reason.fromWire(m.group(4))));
      }
    }
    return rows;
  }

  private static Disposition disposition(String verdict) {
    if (verdict.startsWith("defer")) {
      return Disposition.DEFER;
    }
    if (verdict.startsWith("skip")) {
      return Disposition.SKIP;
    }
    assertTrue(verdict.startsWith("re-drive"), "a verdict the test knows: " + verdict);
    return Disposition.HAND_OUT;
  }

  static Signals signals(Set<String> facts) {
    Set<String> known =
        Set.of(
            "owned",
            "recentlyActive",
            "stranded",
            "liveQueuedJob",
            "parkedOnHook",
            "unchangedSinceRedrive",
            "pending",
            "unclassified",
            "openStep",
            "dueWait");
    assertTrue(known.containsAll(facts), "known facts: " + facts);
    return new Signals(
        facts.contains("owned"),
        facts.contains("recentlyActive"),
        facts.contains("stranded"),
        facts.contains("liveQueuedJob"),
        facts.contains("parkedOnHook"),
        facts.contains("unchangedSinceRedrive"),
        facts.contains("pending"),
        !facts.contains("unclassified"),
        facts.contains("openStep"),
        facts.contains("dueWait"));
  }

  static Stream<Row> rows() throws IOException {
    return readmeRows().stream();
  }

  @Test
  void theReadmeTableHasTheRowsThisTestKnowsInItsOrder() throws IOException {
    assertEquals(ORDER, readmeRows().stream().map(Row::order).toList());
    assertEquals(PROOF.keySet(), Set.copyOf(ORDER));
  }

  @Test
  void anUnclassifiedRunIsStillDecidedByRows1267() {
    for (String order : List.of("1", "2", "6", "7")) {
      Set<String> facts = new HashSet<>(PROOF.get(order));
      facts.add("unclassified");
      assertEquals(
          DecisionTable.firstLook(signals(PROOF.get(order))),
          DecisionTable.firstLook(signals(facts)),
          "row " + order);
    }
  }

  @ParameterizedTest
  @MethodSource("rows")
  void eachRowsProofAloneDecidesThatRowsVerdict(Row row) {
    Decision d = DecisionTable.firstLook(signals(PROOF.get(row.order())));
    assertEquals(row.disposition(), d.disposition(), row + ": " + row.proof());
    assertEquals(row.reason(), d.reason(), row + ": " + row.proof());
  }

  @ParameterizedTest
  @MethodSource("rows")
  void eachRowWinsOverEveryRowBelowIt(Row row) {
    Set<String> facts = new HashSet<>(PROOF.get(row.order()));
    for (String later : ORDER.subList(ORDER.indexOf(row.order()) + 1, ORDER.size())) {
      if (!EXCLUDES.getOrDefault(row.order(), Set.of()).contains(later)) {
        facts.addAll(PROOF.get(later));
      }
    }
    Decision d = DecisionTable.firstLook(signals(facts));
    assertEquals(row.reason(), d.reason(), row + " with the proofs of later rows " + facts);
    assertEquals(row.disposition(), d.disposition(), row + " with " + facts);
  }

  @Test
  void aStrandedRunASweepReDroveUnchangedIsSkippedNotReDrivenAgain() {
    Decision d = DecisionTable.firstLook(signals(Set.of("stranded", "unchangedSinceRedrive")));
    assertEquals(Reason.UNCHANGED_SINCE_REDRIVE, d.reason());
    assertEquals(Disposition.SKIP, d.disposition());
  }

  @Test
  void aHookIsNoProofWhileAStepIsOpenOrAWaitIsDue() {
    assertEquals(
        Reason.INTERRUPTED_STEP,
        DecisionTable.firstLook(signals(Set.of("parkedOnHook", "openStep"))).reason());
    assertEquals(
        Reason.DUE_WAIT,
        DecisionTable.firstLook(signals(Set.of("parkedOnHook", "dueWait"))).reason());
  }

  @Test
  void anInterruptedStepIsReDrivenWithItsOwnersMessageAndNothingElseIs() {
    Verdict stranded =
        DecisionTable.firstLook(signals(Set.of("stranded")))
            .verdict("run_1", "wf", null, "msg_owner");
    assertEquals("msg_owner", stranded.messageId());
    for (String order : ORDER) {
      if (!order.equals("3")) {
        Verdict v =
            DecisionTable.firstLook(signals(PROOF.get(order)))
                .verdict("run_1", "wf", null, "msg_owner");
        assertNull(v.messageId(), "row " + order);
        assertEquals("run_1", v.runId());
        assertEquals("wf", v.workflowName());
      }
    }
  }

  @Test
  void theRecheckSkipsFinishedOwnedAndActiveRunsForGoodAndSettlesTheOthersByRows3To10() {
    assertEquals(skip(Reason.TERMINAL), kind(DecisionTable.recheck(true, null)));
    assertEquals(
        skip(Reason.OWNED_BY_LIVE_INSTANCE),
        kind(DecisionTable.recheck(false, signals(Set.of("owned", "pending")))));
    assertEquals(
        skip(Reason.RECENTLY_ACTIVE),
        kind(DecisionTable.recheck(false, signals(Set.of("recentlyActive", "pending")))));
    for (String order : ORDER.subList(2, ORDER.size())) {
      Signals s = signals(PROOF.get(order));
      assertEquals(DecisionTable.firstLook(s), DecisionTable.recheck(false, s), "row " + order);
    }
  }

  @Test
  void aTakeoverHandsOutOwnerDeadUnlessFinishedOwnedWokenOrParked() {
    UUID dead = UUID.randomUUID();
    assertEquals(skip(Reason.TERMINAL), kind(DecisionTable.takeover(true, null)));
    // A live peer's report may be a heartbeat old: deferred, for the re-check.
    assertEquals(
        new Decision(Disposition.DEFER, Reason.OWNED_BY_LIVE_INSTANCE, false),
        kind(DecisionTable.takeover(false, signals(Set.of("owned", "stranded")))));
    // A queued job (the dead owner's own message, released) is trusted, and looked at again.
    assertEquals(
        new Decision(Disposition.DEFER, Reason.HAS_QUEUED_JOB, false),
        kind(DecisionTable.takeover(false, signals(Set.of("liveQueuedJob", "parkedOnHook")))));
    assertEquals(
        skip(Reason.PARKED_ON_HOOK),
        kind(DecisionTable.takeover(false, signals(Set.of("parkedOnHook")))));
    // Recent activity is the dead owner's own; a hook with an open step is no proof.
    for (Set<String> facts :
        List.of(
            Set.of("recentlyActive"),
            Set.of("pending"),
            Set.of("unchangedSinceRedrive"),
            Set.of("parkedOnHook", "openStep"),
            Set.of("dueWait"),
            Set.<String>of())) {
      Verdict v = DecisionTable.takeover(false, signals(facts)).verdict("r", "w", dead, "msg");
      assertEquals(Reason.OWNER_DEAD, v.reason(), facts.toString());
      assertEquals(Disposition.HAND_OUT, v.disposition(), facts.toString());
      assertEquals(dead, v.deadInstanceId());
      assertNull(v.messageId(), facts.toString());
    }
    // Its own message's job is gone: a queued job only re-arms the backstop.
    Verdict stranded =
        DecisionTable.takeover(false, signals(Set.of("stranded", "liveQueuedJob")))
            .verdict("r", "w", dead, "msg_owner");
    assertEquals(Reason.OWNER_DEAD, stranded.reason());
    assertEquals("msg_owner", stranded.messageId());
    assertEquals(dead, stranded.deadInstanceId());
  }

  @Test
  void aTakeoversRecheckDefersAgainWhileALiveInstanceReportsTheRunElseSettlesAsTheTakeover() {
    UUID dead = UUID.randomUUID();
    assertEquals(
        new Decision(Disposition.DEFER, Reason.OWNED_BY_LIVE_INSTANCE, false),
        kind(DecisionTable.takeoverRecheck(false, signals(Set.of("owned", "stranded")), false)));
    assertEquals(skip(Reason.TERMINAL), kind(DecisionTable.takeoverRecheck(true, null, true)));
    // A queued job: waited for within the re-check window, after it the run's wake path.
    assertEquals(
        new Decision(Disposition.DEFER, Reason.HAS_QUEUED_JOB, false),
        kind(DecisionTable.takeoverRecheck(false, signals(Set.of("liveQueuedJob")), true)));
    assertEquals(
        skip(Reason.HAS_QUEUED_JOB),
        kind(DecisionTable.takeoverRecheck(false, signals(Set.of("liveQueuedJob")), false)));
    for (String order : ORDER) {
      Set<String> facts = PROOF.get(order);
      if (facts.contains("owned")) {
        continue;
      }
      Signals s = signals(facts);
      assertEquals(
          DecisionTable.takeover(false, s).verdict("r", "w", dead, "msg"),
          DecisionTable.takeoverRecheck(false, s, true).verdict("r", "w", dead, "msg"),
          "row " + order);
    }
  }

  @Test
  void aParkedRunIsOnlyParkedWithNothingElsePending() {
    assertTrue(signals(Set.of("parkedOnHook")).parked());
    assertFalse(signals(Set.of("parkedOnHook", "openStep")).parked());
    assertFalse(signals(Set.of("parkedOnHook", "dueWait")).parked());
    assertFalse(signals(Set.of()).parked());
  }

  private static Decision skip(Reason reason) {
    return new Decision(Disposition.SKIP, reason, false);
  }

  private static Decision kind(Decision d) {
    return new Decision(d.disposition(), d.reason(), false);
  }
}
