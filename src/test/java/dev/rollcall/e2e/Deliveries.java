package dev.rollcall.e2e;

import dev.rollcall.e2e.EndToEndIT.Journal;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/** The flow deliveries of the replicas' journals, and the runs two replicas replayed at once. */
final class Deliveries {

  private Deliveries() {}

  /** One flow delivery of a run's message in one replica, from its start to its end. */
  record Span(String replica, String messageId, long from, long to) {

    boolean overlaps(Span other) {
      return from < other.to && other.from < to;
    }

    /**
     * This delivery sent {@code later}'s message itself (a {@code queued} line of its replica
     * between its start and its end): it handed its run on.
     */
    boolean handedTo(Span later, Map<String, Journal> queued) {
      Journal q = queued.get(later.messageId());
      return q != null && q.replica().equals(replica) && q.t() >= from && q.t() <= to;
    }
  }

  /**
   * The messages the replicas' runtimes sent (the {@code queued} lines server.mjs writes), by
   * message id, each with the line that names its replica and time. Recovery's jobs are not among
   * them: Rollcall's client and the engine's boot re-enqueue add theirs to the queue directly.
   *
   * <p>A process may end after the queue took its message and before it wrote the {@code queued}
   * line. It wrote a {@code sending} line before each send, though: a replica that ended with more
   * {@code sending} than {@code queued} lines for a run sent the run's messages, delivered
   * somewhere and never journaled, whose ids (ULIDs) were made between the first of those sends
   * (since its sends and queued lines last balanced) and the replica's end ({@code endedAt}, or its
   * {@code exit} line).
   */
  static Map<String, Journal> sentByRuntime(List<Journal> journal, Map<String, Long> endedAt) {
    Map<String, Journal> out = new HashMap<>();
    // replica + run → sends not yet matched by a queued line, and the first send since the two
    // last balanced (sends finish in any order: which line matched which send is unknown)
    Map<String, Integer> open = new HashMap<>();
    Map<String, Journal> since = new HashMap<>();
    Map<String, Long> ended = ends(journal, endedAt);
    for (Journal j : journal) {
      String messageId = j.e().path("messageId").asText();
      String key = j.replica() + " " + j.runId();
      if (j.event().equals("sending")) {
        if (open.getOrDefault(key, 0) == 0) {
          since.put(key, j);
        }
        open.merge(key, 1, Integer::sum);
      } else if (j.event().equals("queued") && !messageId.isEmpty()) {
        out.put(messageId, j);
        open.computeIfPresent(key, (k, n) -> n > 1 ? n - 1 : null);
      }
    }
    for (String key : open.keySet()) {
      Journal send = since.get(key);
      long until = ended.getOrDefault(send.replica(), Long.MAX_VALUE);
      for (Journal j : journal) {
        String messageId = j.e().path("messageId").asText();
        if (j.event().equals("flow-start")
            && j.runId().equals(send.runId())
            && !out.containsKey(messageId)) {
          long made = ulidMillis(messageId);
          if (made >= send.t() && made <= until) {
            out.put(messageId, send);
          }
        }
      }
    }
    return out;
  }

  /** When each replica ended: {@code endedAt}, or its {@code exit} line if that came first. */
  private static Map<String, Long> ends(List<Journal> journal, Map<String, Long> endedAt) {
    // A process that logged its exit ran no code after that line, whenever the OS reaped it.
    Map<String, Long> ended = new HashMap<>(endedAt);
    for (Journal j : journal) {
      if (j.event().equals("exit")) {
        ended.merge(j.replica(), j.t(), Math::min);
      }
    }
    return ended;
  }

  private static final String CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ";

  /**
   * The millisecond an engine message id ({@code msg_} and a ULID) was made, from the ULID's first
   * ten characters; -1 for anything else.
   */
  static long ulidMillis(String messageId) {
    if (!messageId.startsWith("msg_") || messageId.length() < 14) {
      return -1;
    }
    long ms = 0;
    for (char c : messageId.substring(4, 14).toCharArray()) {
      int digit = CROCKFORD.indexOf(Character.toUpperCase(c));
      if (digit < 0) {
        return -1;
      }
      ms = ms * 32 + digit;
    }
    return ms;
  }

  /** Two different messages, each sent by a replica's runtime (its own concurrency). */
  static boolean bothSentByTheRuntime(Span a, Span b, Map<String, Journal> queued) {
    return !a.messageId().isEmpty()
        && !b.messageId().isEmpty()
        && !a.messageId().equals(b.messageId())
        && queued.containsKey(a.messageId())
        && queued.containsKey(b.messageId());
  }

  /**
   * Runs among {@code runs} whose flow deliveries overlapped in time in two different replicas. A
   * delivery still open ends when its replica ended ({@code endedAt}, or its {@code exit} line,
   * whichever came first), else {@code now}. Two deliveries overlap harmlessly when one sent the
   * other's message: the runtime hands a run on by sending its successor's message as its last act,
   * and a peer may start it a few milliseconds before the sender has returned. They overlap
   * harmlessly too when both carry messages the runtime itself sent, each its own: the 5.0 runtime
   * sends one message per step of a {@code Promise.all} and their deliveries run side by side by
   * design. What recovery must never cause stays flagged: a delivery of a message the runtime did
   * not send (a recovery job) beside another of its run, and one message delivered by two replicas
   * at once (a queue lock released under a live process).
   */
  static List<String> replayedAtOnce(
      List<Journal> journal, Collection<String> runs, Map<String, Long> endedAt, long now) {
    Map<String, Long> ended = ends(journal, endedAt);
    Map<String, List<Span>> byRun = new HashMap<>();
    Map<String, Long> opened = new HashMap<>();
    Map<String, Journal> queued = sentByRuntime(journal, endedAt);
    for (Journal j : journal) {
      if (!runs.contains(j.runId())) {
        continue;
      }
      String messageId = j.e().path("messageId").asText();
      String key = j.replica() + " " + j.runId() + " " + messageId;
      if (j.event().equals("flow-start")) {
        opened.put(key, j.t());
      } else if (j.event().equals("flow-end") && opened.containsKey(key)) {
        byRun
            .computeIfAbsent(j.runId(), r -> new ArrayList<>())
            .add(new Span(j.replica(), messageId, opened.remove(key), j.t()));
      }
    }
    opened.forEach(
        (key, from) -> {
          String[] k = key.split(" ");
          long to = ended.getOrDefault(k[0], now);
          byRun.computeIfAbsent(k[1], r -> new ArrayList<>()).add(new Span(k[0], k[2], from, to));
        });
    List<String> out = new ArrayList<>();
    byRun.forEach(
        (runId, spans) -> {
          for (Span a : spans) {
            for (Span b : spans) {
              if (!a.replica().equals(b.replica())
                  && a.overlaps(b)
                  && !a.handedTo(b, queued)
                  && !b.handedTo(a, queued)
                  && !bothSentByTheRuntime(a, b, queued)) {
                out.add(runId);
                return;
              }
            }
          }
        });
    return out.stream().sorted().toList();
  }
}
