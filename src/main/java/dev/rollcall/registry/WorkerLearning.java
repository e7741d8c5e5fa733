package dev.rollcall.registry;

import dev.rollcall.database.Databases;
import dev.rollcall.queue.QueueLocks;
import dev.rollcall.source.RunSources;
import io.smallrye.mutiny.Uni;
import jakarta.enterprise.context.ApplicationScoped;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.UUID;
import org.jboss.logging.Logger;

/**
 * What registrations and heartbeats learn of an instance's queue workers from the messages it
 * reports in flight: a message is looked up until its job is found locked (a job may be locked
 * after its message was first reported), then no more for that instance ({@link FoundMessages}):
 * its worker is known, and a later lock of the job by another worker is another instance's to
 * report.
 */
@ApplicationScoped
public class WorkerLearning {

  private static final Logger LOG = Logger.getLogger(WorkerLearning.class);

  private final Databases databases;
  private final RunSources sources;
  private final FoundMessages found = new FoundMessages(FoundMessages.DEFAULT_CAPACITY);

  WorkerLearning(Databases databases, RunSources sources) {
    this.databases = databases;
    this.sources = sources;
  }

  /** The messages of an in-flight set, each once, in a list the caller may change. */
  static List<QueueLocks.Reported> reported(UUID instanceId, Optional<List<InFlight>> inFlight) {
    List<InFlight> set = inFlight.orElse(List.of());
    List<QueueLocks.Reported> out = new ArrayList<>(set.size());
    // A loop rather than a stream: this runs for every heartbeat of a flush. A client's set is
    // short, and a message seen already is found by scanning what is kept; a long set (up to
    // Ownership.MAX_IN_FLIGHT) uses a hash set so that it costs linear time, not quadratic.
    Set<String> seen = set.size() > 16 ? new HashSet<>() : null;
    for (InFlight e : set) {
      String m = e.messageId();
      if (m != null && (seen != null ? seen.add(m) : !containsMessage(out, m))) {
        out.add(new QueueLocks.Reported(instanceId, m));
      }
    }
    return out;
  }

  private static boolean containsMessage(List<QueueLocks.Reported> kept, String messageId) {
    for (QueueLocks.Reported r : kept) {
      if (r.messageId().equals(messageId)) {
        return true;
      }
    }
    return false;
  }

  /** The reported messages whose job was not found locked yet, in a list the caller may change. */
  List<QueueLocks.Reported> unknown(UUID instanceId, Optional<List<InFlight>> inFlight) {
    List<QueueLocks.Reported> unknown = reported(instanceId, inFlight);
    unknown.removeIf(found::contains);
    return unknown;
  }

  /** One learning statement per namespace, run at once. */
  Uni<Void> learn(Map<String, List<QueueLocks.Reported>> byNamespace) {
    List<Uni<Void>> learning = new ArrayList<>();
    byNamespace.forEach((ns, reported) -> learning.add(learn(ns, reported)));
    return learning.isEmpty()
        ? Uni.createFrom().voidItem()
        : Uni.join().all(learning).andFailFast().replaceWithVoid();
  }

  /**
   * One learning statement for namespace {@code namespace}. A failure (no queue schema yet, say) is
   * logged and costs only this learning: the next beats learn again, and a takeover learns from the
   * stored messages.
   */
  Uni<Void> learn(String namespace, List<QueueLocks.Reported> reported) {
    if (reported.isEmpty() || !sources.has(namespace)) {
      return Uni.createFrom().voidItem();
    }
    return sources
        .get(namespace)
        .queue()
        .map(
            queue ->
                Uni.createFrom()
                    .deferred(() -> queue.learnWorkers(databases.of(namespace).pool(), reported))
                    .invoke(
                        learned -> {
                          found.addAll(learned.found());
                          if (learned.workers() > 0) {
                            LOG.debugf(
                                "namespace %s: %d queue workers learned from %d reported messages",
                                namespace, learned.workers(), reported.size());
                          }
                        })
                    .onFailure()
                    .invoke(
                        e ->
                            LOG.warnf(
                                "could not learn the queue workers of %d reported messages in"
                                    + " namespace %s: %s",
                                reported.size(), namespace, e.toString()))
                    .onFailure()
                    .recoverWithNull()
                    .replaceWithVoid())
        .orElse(Uni.createFrom().voidItem());
  }
}
