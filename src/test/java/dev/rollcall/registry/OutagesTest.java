package dev.rollcall.registry;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.rollcall.recovery.Reaper;
import dev.rollcall.testing.Api.Instance;
import dev.rollcall.testing.ApiTestBase;
import dev.rollcall.testing.Db;
import dev.rollcall.testing.ServiceTest;
import dev.rollcall.testing.SourceTables;
import dev.rollcall.testing.TimeTravel;
import jakarta.inject.Inject;
import java.time.Duration;
import java.util.List;
import java.util.UUID;
import org.junit.jupiter.api.Test;

/**
 * A lease that ran out while no service replica was running is no evidence of death: the first beat
 * back renews it; a lease that ran out while the service ran is a death as before.
 */
@ServiceTest
class OutagesTest extends ApiTestBase {

  @Inject Outages outages;
  @Inject Reaper reaper;

  @Test
  void aLeaseThatRanOutWhileNoReplicaRanIsRenewedAndItsInstanceStaysLive() {
    Instance live = beating("live");
    // Rollcall was away for a minute: nobody could answer the instance's heartbeats.
    lastSeenAMinuteAgo();
    TimeTravel.leaseExpired(live);

    Outages.Beat beat = outages.beat().await().indefinitely();

    assertTrue(beat.gapMs() >= 60_000, "gap " + beat.gapMs());
    assertTrue(beat.renewed() >= 1, "renewed " + beat.renewed());
    reaper.runOnce().await().indefinitely();
    assertEquals(List.of("live"), state(live));
    api.heartbeat(live).expect(200);
    // The next beat finds no gap: nothing more is renewed.
    assertEquals(0, outages.beat().await().indefinitely().renewed());
    api.leave(live).expect(204);
  }

  @Test
  void theReapersTickBeatsBeforeItJudgesALeaseSoAReplicaComingBackReapsNoLiveInstance() {
    Instance live = beating("back");
    lastSeenAMinuteAgo();
    TimeTravel.leaseExpired(live);

    // The first scheduled pass of a replica that comes back: its beat renews the lease that ran
    // out unanswered before the pass reads leases. (A pass before the beat declared it dead.)
    Reaper.Pass pass = reaper.tick().await().indefinitely();

    assertEquals(0, pass.reaped());
    assertEquals(List.of("live"), state(live));
    api.heartbeat(live).expect(200);
    api.leave(live).expect(204);
  }

  @Test
  void aShortDatabaseOutageGivesTheLeasesThatWereValidAWholeTtlFromTheReturn() {
    Instance live = beating("short");
    // The database was away for 5 s (no replica could beat): shorter than a lease, but the
    // instance's lease has a second left, and its next heartbeat may come seconds from now.
    Db.update(
        "INSERT INTO rollcall.coordinator_beat (beat_at) VALUES (now() - interval '5 seconds')"
            + " ON CONFLICT (one) DO UPDATE SET beat_at = excluded.beat_at");
    Db.update(
        "UPDATE rollcall.instances SET lease_expires_at = now() + interval '1 second'"
            + " WHERE id = ?",
        live.id());

    Outages.Beat beat = outages.beat().await().indefinitely();

    assertTrue(beat.renewed() >= 1, "renewed " + beat.renewed() + ", gap " + beat.gapMs());
    long leftMs =
        Db.number(
            "SELECT (extract(epoch FROM lease_expires_at - now()) * 1000)::bigint"
                + " FROM rollcall.instances WHERE id = ?",
            live.id());
    assertTrue(leftMs > 9_000, "a whole 10 s TTL from the return, left " + leftMs + " ms");
    api.leave(live).expect(204);
  }

  @Test
  void aLeaseThatRanOutBeforeTheOutageIsStillADeath() {
    Instance dead = beating("dead");
    // It stopped beating two minutes ago; Rollcall was last seen one minute ago.
    Db.update(
        "UPDATE rollcall.instances SET last_heartbeat_at = now() - interval '130 seconds'"
            + " WHERE id = ?",
        dead.id());
    TimeTravel.leaseExpired(dead, Duration.ofMinutes(2));
    lastSeenAMinuteAgo();

    reaper.tick().await().indefinitely();

    assertEquals(List.of("dead"), state(dead));
  }

  @Test
  void aLeaseThatRanOutWhileTheServiceRanIsADeath() {
    Instance victim = beating("victim");
    outages.beat().await().indefinitely();
    TimeTravel.leaseExpired(victim);

    assertEquals(0, outages.beat().await().indefinitely().renewed());
    reaper.runOnce().await().indefinitely();
    assertEquals(List.of("dead"), state(victim));
  }

  /** A registered instance of a deploy of its own that has reported a run. */
  Instance beating(String name) {
    Instance instance = api.register(SourceTables.SMALL, UUID.randomUUID().toString(), name);
    api.heartbeat(instance, List.of("wrun_" + name)).expect(200);
    return instance;
  }

  /** The last beat of any service replica, a minute ago. */
  static void lastSeenAMinuteAgo() {
    Db.update(
        "INSERT INTO rollcall.coordinator_beat (beat_at) VALUES (now() - interval '1 minute')"
            + " ON CONFLICT (one) DO UPDATE SET beat_at = excluded.beat_at");
  }

  static List<String> state(Instance instance) {
    return Db.column("SELECT state FROM rollcall.instances WHERE id = ?", instance.id());
  }
}
