package dev.rollcall.recovery;

import dev.rollcall.database.Database;
import dev.rollcall.database.Databases;
import dev.rollcall.metrics.RecoveryMetrics;
import io.quarkus.runtime.ShutdownEvent;
import io.quarkus.runtime.StartupEvent;
import io.smallrye.mutiny.Uni;
import io.vertx.core.json.JsonObject;
import io.vertx.mutiny.core.Vertx;
import jakarta.enterprise.context.ApplicationScoped;
import jakarta.enterprise.event.Observes;
import java.time.Duration;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import org.jboss.logging.Logger;

/**
 * Wakes claims that wait ({@code waitMs}) when the database says something changed: every service
 * replica listens on the channel {@code rollcall_recovery}, to which triggers notify when a batch
 * becomes claimable ("work") or an epoch closes ("closed"). A "work" notice wakes the oldest
 * waiting claim of the namespace that may take the work: of the epoch's deploy for a boot epoch's
 * batch, which only that deploy's instances serve; of any deploy for a takeover's or a sweep's. A
 * claim that was woken and got a batch wakes the next one, since more may be left; one that was
 * woken and then failed or lost its caller passes the wake on ({@link Hold}). A "closed" notice of
 * a boot epoch wakes every waiting claim of that deploy ({@link #wakeFor}), all stamped with the
 * same moment, so that those of one deploy can share one look that began after it ({@link
 * ClaimService}). Whatever the notification says, a woken claim decides from the database alone, as
 * any claim does: by its own look, or by a look of its deploy that began after it was woken.
 *
 * <p>Each database has its listening connection ({@link NoticeListener}), taken from its pool and
 * kept. When it is lost, every waiting claim of that database's namespaces is woken (a notice may
 * have been missed) and the listener reconnects.
 */
@ApplicationScoped
public class Wakeups {

  private static final Logger LOG = Logger.getLogger(Wakeups.class);

  static final String CHANNEL = "rollcall_recovery";

  private final Databases databases;
  private final Vertx vertx;
  private final RecoveryMetrics metrics;
  private final Map<String, ArrayDeque<Waiter>> waiting = new HashMap<>();

  /** Namespaces whose held claims are gauged (guarded by this). */
  private final Set<String> gauged = new HashSet<>();

  /** One listener per database: each notifies of its own namespaces' passes. */
  private final Map<String, NoticeListener> listeners = new LinkedHashMap<>();

  private volatile boolean stopped;

  Wakeups(Databases databases, Vertx vertx, RecoveryMetrics metrics) {
    this.databases = databases;
    this.vertx = vertx;
    this.metrics = metrics;
  }

  /** A claim waiting for a notice; {@code woken} completes with true when a notice woke it. */
  public static final class Waiter {
    private final String namespace;
    private final String deploymentId;
    private final CompletableFuture<Boolean> woken = new CompletableFuture<>();

    /** Set once, under the lock of {@link Wakeups}: forgetting twice must not pass a wake twice. */
    private boolean forgotten;

    /**
     * When a notice that woke every waiting claim of the deploy (an epoch closed) woke it, by the
     * service's monotonic clock; 0 otherwise. Set before any of those claims is woken.
     */
    private volatile long wokenTogether;

    private Waiter(String namespace, String deploymentId) {
      this.namespace = namespace;
      this.deploymentId = deploymentId;
    }

    /**
     * Completes with true when woken by a notice, with false after {@code timeout}. The timeout
     * cancels a copy, never {@code woken} itself: a cancelled {@code woken} could no longer be
     * woken (the notice would be lost) and would throw from {@link #wasWoken()}.
     */
    public Uni<Boolean> await(Duration timeout) {
      return Uni.createFrom()
          .completionStage(woken::copy)
          .ifNoItem()
          .after(timeout)
          .recoverWithItem(false);
    }

    /** True when a notice woke it. */
    public boolean wasWoken() {
      return woken.getNow(false);
    }

    /** When a notice woke it with every waiting claim of its deploy; 0 when none did. */
    long wokenTogether() {
      return wokenTogether;
    }
  }

  void onStart(@Observes StartupEvent start) {
    for (Database db : databases.all()) {
      NoticeListener listener =
          new NoticeListener(
              db, vertx, this::notice, () -> db.namespaces().forEach(this::wakeAll), () -> stopped);
      listeners.put(db.name(), listener);
      listener.listen();
    }
  }

  void onStop(@Observes ShutdownEvent stop) {
    stopped = true;
    listeners.values().forEach(NoticeListener::close);
  }

  /** Completes once this replica listens in every database (tests and benchmarks wait for it). */
  public CompletableFuture<Void> listening() {
    return CompletableFuture.allOf(
        listeners.values().stream()
            .map(NoticeListener::listening)
            .toArray(CompletableFuture[]::new));
  }

  /**
   * Registers a waiting claim. Register before the claim looks at the database, so that a notice
   * sent after that look cannot be missed; {@link #forget} it when it no longer waits.
   */
  public Waiter register(String namespace, String deploymentId) {
    Waiter w = new Waiter(namespace, deploymentId);
    boolean first;
    synchronized (this) {
      waiting.computeIfAbsent(namespace, n -> new ArrayDeque<>()).add(w);
      first = gauged.add(namespace);
    }
    if (first && metrics != null) {
      metrics.heldClaims(namespace, this::waiting);
    }
    return w;
  }

  /**
   * A waiter that no longer waits. One a "work" notice woke without need passes it on to the next.
   */
  public void forget(Waiter w, boolean used) {
    synchronized (this) {
      if (w.forgotten) {
        return;
      }
      w.forgotten = true;
      ArrayDeque<Waiter> queue = waiting.get(w.namespace);
      if (queue != null) {
        queue.remove(w);
        if (queue.isEmpty()) {
          waiting.remove(w.namespace);
        }
      }
    }
    if (w.wasWoken() && !used) {
      passOn(w.namespace, w.deploymentId);
    }
  }

  /** Claims of the namespace waiting now. */
  synchronized int waiting(String namespace) {
    ArrayDeque<Waiter> queue = waiting.get(namespace);
    return queue == null ? 0 : queue.size();
  }

  /** A held claim's place in the waiting room, across its looks. */
  public Hold hold(String namespace, String deploymentId) {
    return new Hold(namespace, deploymentId);
  }

  /**
   * One held claim's place in the waiting room, across its looks: a waiter registered before each
   * look, forgotten when the look answers or the nap ends. A claim that was woken and then fails,
   * or whose caller hangs up (Quarkus REST cancels a request's {@code Uni} when its connection
   * closes), passes the wake on: a notice must not die with a claim no one waits for any more, and
   * a waiter must not stay queued for a claim that no longer runs, where it would take the next
   * notice (a killed replica's held claim took a takeover's wake from its live peer this way).
   */
  public final class Hold {
    private final String namespace;
    private final String deploymentId;
    private Waiter waiter;

    /** The look under way follows a nap that a notice ended. */
    private boolean woken;

    /** The look under way follows a nap that a deploy-wide notice ended, then; else 0. */
    private long wokenTogether;

    private boolean ended;

    private Hold(String namespace, String deploymentId) {
      this.namespace = namespace;
      this.deploymentId = deploymentId;
    }

    /**
     * Registers the waiter of the next look, before it looks, so that a notice sent after the look
     * is not missed; null once the claim has ended (its caller hung up).
     */
    public Waiter look() {
      synchronized (this) {
        if (ended) {
          return null;
        }
        waiter = register(namespace, deploymentId);
        return waiter;
      }
    }

    /** The look's nap ended, {@code byNotice} when a notice ended it. */
    public void napped(boolean byNotice) {
      Waiter w;
      synchronized (this) {
        w = waiter;
        waiter = null;
        woken = byNotice;
        wokenTogether = byNotice && w != null ? w.wokenTogether() : 0;
      }
      if (w != null) {
        // A notice that came just after the nap's timeout is passed on, not lost.
        forget(w, byNotice);
      }
    }

    /**
     * When a notice that woke every waiting claim of the deploy ended the nap before the look under
     * way, by the service's monotonic clock; 0 when the look follows no such notice.
     */
    public synchronized long wokenTogether() {
      return wokenTogether;
    }

    /**
     * The claim answers. Woken for work and got some ({@code gotBatch}): more may be left, so the
     * next waiting claim is woken too; of this deploy when the batch was of its deploy's own pass
     * ({@code bootBatch}), which no other deploy can serve.
     */
    public void answered(boolean gotBatch, boolean bootBatch) {
      end(true, gotBatch, bootBatch);
    }

    /**
     * The claim failed or its caller hung up: its waiter is forgotten, and a wake it had not used
     * goes to the next waiting claim.
     */
    public void abandoned() {
      end(false, false, false);
    }

    private void end(boolean answered, boolean gotBatch, boolean bootBatch) {
      Waiter w;
      boolean passOn;
      synchronized (this) {
        if (ended) {
          return;
        }
        ended = true;
        w = waiter;
        waiter = null;
        passOn = answered ? gotBatch && (woken || (w != null && w.wasWoken())) : woken;
      }
      if (w != null) {
        forget(w, false);
      }
      if (!passOn) {
        return;
      }
      if (!answered) {
        passOn(namespace, deploymentId);
      } else if (bootBatch) {
        wakeOne(namespace, deploymentId);
      } else {
        wakeOne(namespace);
      }
    }
  }

  /** Wakes the oldest waiting claim of the namespace. */
  public void wakeOne(String namespace) {
    wake(namespace, null, true);
  }

  /** Wakes the oldest waiting claim of the namespace whose instance belongs to the deploy. */
  void wakeOne(String namespace, String deploymentId) {
    wake(namespace, deploymentId, false);
  }

  /**
   * Passes on a wake a claim of the deploy did not use: to the oldest waiting claim of the same
   * deploy, which can take whatever the wake was for, else to the oldest of the namespace.
   */
  private void passOn(String namespace, String deploymentId) {
    wake(namespace, deploymentId, true);
  }

  /**
   * Wakes the oldest waiting claim of the namespace whose instance belongs to {@code deploymentId}
   * (any when null); when there is none, the oldest of any deploy if {@code orAny}.
   */
  private void wake(String namespace, String deploymentId, boolean orAny) {
    Waiter w = null;
    synchronized (this) {
      ArrayDeque<Waiter> queue = waiting.get(namespace);
      if (queue == null) {
        return;
      }
      if (deploymentId != null) {
        for (Iterator<Waiter> it = queue.iterator(); it.hasNext(); ) {
          Waiter candidate = it.next();
          if (deploymentId.equals(candidate.deploymentId)) {
            it.remove();
            w = candidate;
            break;
          }
        }
      }
      if (w == null && (deploymentId == null || orAny)) {
        w = queue.poll();
      }
      if (queue.isEmpty()) {
        waiting.remove(namespace);
      }
    }
    if (w != null) {
      w.woken.complete(true);
    }
  }

  /** Wakes every waiting claim of the namespace (every namespace when null). */
  private void wakeAll(String namespace) {
    wakeDeploy(namespace, null);
  }

  /**
   * Wakes every waiting claim of the namespace (every namespace when null) whose instance belongs
   * to {@code deploymentId} (to any deploy when null).
   */
  private void wakeDeploy(String namespace, String deploymentId) {
    List<Waiter> woken = new ArrayList<>();
    // One moment for all of them, stamped before the first is woken (a woken claim may look at
    // once, on this thread): a look that any of them starts begins after every one's stamp.
    long now = System.nanoTime();
    synchronized (this) {
      for (Iterator<Map.Entry<String, ArrayDeque<Waiter>>> it = waiting.entrySet().iterator();
          it.hasNext(); ) {
        Map.Entry<String, ArrayDeque<Waiter>> e = it.next();
        if (namespace != null && !e.getKey().equals(namespace)) {
          continue;
        }
        e.getValue()
            .removeIf(
                w -> {
                  boolean wake = deploymentId == null || deploymentId.equals(w.deploymentId);
                  if (wake) {
                    w.wokenTogether = now;
                    woken.add(w);
                  }
                  return wake;
                });
        if (e.getValue().isEmpty()) {
          it.remove();
        }
      }
    }
    woken.forEach(w -> w.woken.complete(true));
  }

  /** Whom a notice wakes. */
  enum Wake {
    /** The oldest waiting claim of the namespace. */
    ONE,
    /** The oldest waiting claim of the namespace's deploy that the notice names. */
    ONE_OF_DEPLOY,
    /** Every waiting claim of the namespace's deploy that the notice names. */
    DEPLOY,
    /** Every waiting claim of the namespace. */
    ALL,
    /** No one. */
    NONE
  }

  /**
   * Whom a notice wakes. "work": the oldest waiting claim that may take it, of the notice's deploy
   * when it is a boot epoch's (which only its own deploy serves). "closed" of a boot epoch: its
   * deploy's waiting claims, which wait only for that epoch (a claim's only {@code wait} answer
   * comes from its deploy's boot epoch; an idle claim waits for work). "closed" of a takeover or a
   * sweep: no one, since closing can only take work away (every graceful leave opens a takeover and
   * closes it at once when it has nothing to hand out; waking every waiting claim of the namespace
   * for each of them made a fleet's claims look again once per leaving replica). A "closed" notice
   * that does not say its kind wakes every waiting claim of the namespace.
   */
  static Wake wakeFor(JsonObject notice) {
    String kind = notice.getString("kind");
    if (!"closed".equals(notice.getString("event"))) {
      return "boot".equals(kind) && notice.getString("deploymentId") != null
          ? Wake.ONE_OF_DEPLOY
          : Wake.ONE;
    }
    if (kind == null) {
      return Wake.ALL;
    }
    if (!"boot".equals(kind)) {
      return Wake.NONE;
    }
    return notice.getString("deploymentId") == null ? Wake.ALL : Wake.DEPLOY;
  }

  void notice(String payload) {
    JsonObject notice;
    try {
      notice = new JsonObject(payload);
    } catch (RuntimeException e) {
      LOG.warnf("ignoring a malformed notice on %s: %s", CHANNEL, payload);
      return;
    }
    String namespace = notice.getString("namespace");
    switch (wakeFor(notice)) {
      case ONE -> wakeOne(namespace);
      case ONE_OF_DEPLOY -> wakeOne(namespace, notice.getString("deploymentId"));
      case DEPLOY -> wakeDeploy(namespace, notice.getString("deploymentId"));
      case ALL -> wakeAll(namespace);
      case NONE -> {}
    }
  }
}
