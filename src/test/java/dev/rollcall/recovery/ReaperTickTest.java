package dev.rollcall.recovery;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.rollcall.testing.Api.Instance;
import dev.rollcall.testing.ApiTestBase;
import dev.rollcall.testing.Db;
import dev.rollcall.testing.Poll;
import dev.rollcall.testing.ServiceTest;
import dev.rollcall.testing.SourceTables;
import dev.rollcall.testing.TimeTravel;
import io.vertx.mutiny.sqlclient.Pool;
import jakarta.inject.Inject;
import java.time.Duration;
import java.util.List;
import java.util.UUID;
import org.junit.jupiter.api.Test;

/**
 * The reaper's tick runs a job only when the look after its beat finds work for it ({@link
 * ReaperTick}): a lease that ran out is found by the look and reaped by the pass the tick starts,
 * and a namespace with a boot pass open is found as such, where the job that closes stranded passes
 * then runs.
 */
@ServiceTest
class ReaperTickTest extends ApiTestBase {

  @Inject ReaperTick tick;
  @Inject Epochs epochs;
  @Inject Pool pool;

  @Test
  void aLeaseThatRanOutIsFoundByTheLookAndReapedByTheTick() {
    Instance victim = api.register(SourceTables.SMALL, UUID.randomUUID().toString(), "tick-victim");
    api.heartbeat(victim, List.of("wrun_tick")).expect(200);
    TimeTravel.leaseExpired(victim);

    ReaperTick.Look look = tick.tick().await().indefinitely();

    assertTrue(look.expired(), "the look found the lease that ran out: " + look);
    Poll.until(
        "the instance reaped by the pass the tick started",
        Duration.ofSeconds(30),
        () ->
            Db.column("SELECT state FROM rollcall.instances WHERE id = ?", victim.id())
                .equals(List.of("dead")));
    assertEquals(
        List.of("lease-expired"),
        Db.column("SELECT end_reason FROM rollcall.instances WHERE id = ?", victim.id()));
  }

  @Test
  void aNamespaceWithAnOpenBootPassIsFoundByTheLook() {
    String deploy = "tick-" + UUID.randomUUID();
    Instance booting = api.register(SourceTables.SMALL, deploy, "tick-boot");
    long epoch =
        Db.number(
            "INSERT INTO rollcall.epochs (namespace, kind, deployment_id, snapshot_max_id,"
                + " snapshot_at) VALUES (?, 'boot', ?, NULL, now()) RETURNING id",
            SourceTables.SMALL,
            deploy);

    assertTrue(tick.tick().await().indefinitely().openBoot());
    pool.withTransaction(conn -> epochs.close(conn, epoch, "stranded")).await().indefinitely();
    api.leave(booting).expect(204);
  }
}
