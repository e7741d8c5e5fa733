package dev.rollcall.upgrade;

import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.rollcall.testing.Api;
import dev.rollcall.testing.Api.Instance;
import dev.rollcall.testing.Api.Reply;
import dev.rollcall.testing.Poll;
import dev.rollcall.testing.SourceTables;
import java.net.URI;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Random;
import java.util.UUID;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.TimeUnit;

/**
 * Simulated application instances of one namespace, behind one address (the balancer): each
 * registers, then heartbeats on its own timer (with its in-flight runs, if it has any) until it is
 * silenced (its lease runs out), leaves, or the fleet closes. Every request goes through {@link
 * Requests}, as a client's would.
 */
final class Fleet implements AutoCloseable {

  /** A member: its registration, its name and the runs it reports in flight. */
  record Member(Instance instance, String name, List<String> inFlight) {}

  private final Api api;
  private final String namespace;
  private final Requests requests;
  private final long periodMs;
  private final ScheduledExecutorService beats;
  private final Map<UUID, ScheduledFuture<?>> timers = new ConcurrentHashMap<>();
  private final Map<UUID, Optional<Member>> replacedBy = new ConcurrentHashMap<>();
  private final Random offsets = new Random(57);

  Fleet(URI address, String namespace, Requests requests, long periodMs, int threads) {
    this.api = new Api(address);
    this.namespace = namespace;
    this.requests = requests;
    this.periodMs = periodMs;
    this.beats = Executors.newScheduledThreadPool(threads);
  }

  /** Registers a member and starts its heartbeats; null if its registration failed (counted). */
  Member join(String deploy, String name, List<String> inFlight) {
    ObjectNode body =
        Api.JSON
            .createObjectNode()
            .put("namespace", namespace)
            .put("deploymentId", deploy)
            .put("name", name);
    Reply r =
        requests.send(
            "register",
            () -> api.post("instances", SourceTables.secret(namespace), body),
            s -> s == 201);
    if (r == null || r.status() != 201) {
      return null;
    }
    Member m =
        new Member(
            new Instance(UUID.fromString(r.text("instanceId")), r.text("token"), namespace, deploy),
            name,
            List.copyOf(inFlight));
    if (!m.inFlight().isEmpty()) {
      // Its runs are in flight from its first beat on, before any pass can look at them.
      beat(m);
    }
    long first;
    synchronized (offsets) {
      first = offsets.nextInt((int) periodMs);
    }
    timers.put(
        m.instance().id(),
        beats.scheduleAtFixedRate(() -> beat(m), first, periodMs, TimeUnit.MILLISECONDS));
    return m;
  }

  private void beat(Member m) {
    try {
      Reply r =
          requests.send(
              "heartbeat",
              () ->
                  m.inFlight().isEmpty()
                      ? api.heartbeat(m.instance())
                      : api.heartbeat(m.instance(), m.inFlight()),
              s -> s == 200);
      if (r != null && r.status() == 410) {
        // Declared dead (counted as an error): the client is fenced, and registers again.
        rejoin(m);
      }
    } catch (RuntimeException e) {
      // An exception thrown out of a periodic task would end its beats: count it and go on.
      requests.unexpected("heartbeat", e);
    }
  }

  /**
   * A member told it is no longer live: its heartbeats stop, and it registers again as a new
   * instance, as the client does; the new member, or null if that registration failed.
   */
  Member rejoin(Member m) {
    UUID id = m.instance().id();
    ScheduledFuture<?> timer = timers.remove(id);
    if (timer == null) {
      // Its heartbeat and its claim were both told: the other one registers it again.
      long deadline = System.nanoTime() + TimeUnit.MINUTES.toNanos(2);
      while (!replacedBy.containsKey(id) && System.nanoTime() < deadline) {
        Poll.sleep(100);
      }
      return replacedBy.getOrDefault(id, Optional.empty()).orElse(null);
    }
    timer.cancel(false);
    Member again = join(m.instance().deploymentId(), m.name(), m.inFlight());
    replacedBy.put(id, Optional.ofNullable(again));
    return again;
  }

  /** Stops a member's heartbeats without a word, as a killed process stops: its lease runs out. */
  void silence(Member m) {
    ScheduledFuture<?> timer = timers.remove(m.instance().id());
    if (timer != null) {
      timer.cancel(false);
    }
  }

  /** A graceful leave that still holds its in-flight runs: they are taken over at once. */
  void leave(Member m) {
    silence(m);
    requests.send("leave", () -> api.leave(m.instance(), m.inFlight()), s -> s == 204);
  }

  int beating() {
    return timers.size();
  }

  @Override
  public void close() throws InterruptedException {
    timers.values().forEach(t -> t.cancel(false));
    timers.clear();
    beats.shutdown();
    beats.awaitTermination(60, TimeUnit.SECONDS);
  }
}
