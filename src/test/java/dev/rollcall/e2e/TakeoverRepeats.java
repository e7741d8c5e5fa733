package dev.rollcall.e2e;

import dev.rollcall.e2e.EndToEndIT.Journal;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;

/**
 * The steps a replica's takeover made run again, from the example app's journal: a body the replica
 * began before it was declared dead, and a peer began again at or after that death. Until the death
 * the replica's workers hold their jobs' locks, so a peer that ran one of its steps before then did
 * it through a job of its own: a concurrent replay of the run, which the engine serialises within
 * one process only (a fan-out's step completions queue its workflow message several times at once;
 * replicas that replay it together may each run a pending step inline, attempts 1, 2 and 3 within
 * milliseconds, every replica live). Those are the engine's own and not counted here.
 */
final class TakeoverRepeats {

  private TakeoverRepeats() {}

  /** Step ids, sorted: begun on {@code replica} before {@code diedAt}, on a peer from then on. */
  static Set<String> of(List<Journal> journal, String replica, long diedAt) {
    Set<String> beforeDeath = new HashSet<>();
    Map<String, Boolean> peerAfter = new HashMap<>();
    for (Journal j : journal) {
      if (!j.event().equals("step-start")) {
        continue;
      }
      String step = j.e().path("stepId").asText();
      if (j.replica().equals(replica)) {
        if (j.t() < diedAt) {
          beforeDeath.add(step);
        }
      } else if (j.t() >= diedAt) {
        peerAfter.put(step, true);
      }
    }
    Set<String> out = new TreeSet<>();
    for (String step : beforeDeath) {
      if (peerAfter.containsKey(step)) {
        out.add(step);
      }
    }
    return out;
  }
}
