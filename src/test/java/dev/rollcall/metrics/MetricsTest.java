package dev.rollcall.metrics;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.rollcall.database.Databases;
import dev.rollcall.testing.Api;
import dev.rollcall.testing.Api.Batch;
import dev.rollcall.testing.Api.Instance;
import dev.rollcall.testing.ApiTestBase;
import dev.rollcall.testing.RollcallTestResource;
import dev.rollcall.testing.ServiceTest;
import dev.rollcall.testing.SourceTables;
import dev.rollcall.testing.TestDatabase;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import io.quarkus.test.common.http.TestHTTPResource;
import io.vertx.mutiny.core.Vertx;
import io.vertx.mutiny.pgclient.PgBuilder;
import io.vertx.mutiny.sqlclient.Pool;
import io.vertx.pgclient.PgConnectOptions;
import jakarta.inject.Inject;
import java.net.URI;
import java.util.List;
import java.util.UUID;
import org.junit.jupiter.api.Test;

/** Prometheus metrics on the management interface, after real recovery traffic. */
@ServiceTest
class MetricsTest extends ApiTestBase {

  @TestHTTPResource(value = "/", management = true)
  URI management;

  @Inject StateGauges gauges;
  @Inject Vertx vertx;
  @Inject dev.rollcall.database.Databases databases;

  @Test
  void recoveryIsVisibleInPrometheusMetrics() {
    Instance a = api.register(SourceTables.SMALL, UUID.randomUUID().toString(), "a");
    api.heartbeat(a).expect(200);
    Batch first = api.claimBatch(a, 5);
    Batch second = api.claimBatch(a, 5);
    api.complete(a, first, List.of()).expect(200);
    api.complete(a, second.id(), second.fence() + 1, List.of()).expect(409);
    gauges.refresh().await().indefinitely();

    String metrics = new Api(management).send("GET", "metrics", null, null).expect(200).raw();

    for (String expected :
        List.of(
            "rollcall_runs_total{namespace=\"small\",reason=\"pending\",verdict=\"handed-out\"}",
            "rollcall_batches_total{event=\"leased\",namespace=\"small\"}",
            "rollcall_batches_total{event=\"refused\",namespace=\"small\"}",
            "rollcall_claim_seconds_bucket{namespace=\"small\"",
            "rollcall_heartbeat_seconds_count{namespace=\"small\"}",
            "rollcall_epochs{kind=\"boot\",namespace=\"small\",state=\"open\"}",
            "rollcall_instances_live{namespace=\"small\"}")) {
      assertTrue(metrics.contains(expected), "missing " + expected);
    }
    api.complete(a, second, List.of()).expect(200);
  }

  @Test
  void aFailedRefreshWithdrawsTheGaugesInsteadOfPublishingOldValuesAndIsCounted() {
    api.register(SourceTables.SMALL, UUID.randomUUID().toString(), "gauged");
    TestDatabase db = RollcallTestResource.database();
    Pool own =
        PgBuilder.pool()
            .connectingTo(
                PgConnectOptions.fromUri(db.reactiveUrl())
                    .setUser(db.user())
                    .setPassword(db.password()))
            .using(vertx)
            .build();
    SimpleMeterRegistry registry = new SimpleMeterRegistry();
    StateGauges fresh =
        new StateGauges(Databases.single(own, databases.primary().namespaces()), registry);
    fresh.refresh().await().indefinitely();
    assertTrue(
        registry.get("rollcall.instances.live").tag("namespace", "small").gauge().value() >= 1);

    own.close().await().indefinitely();
    assertThrows(RuntimeException.class, () -> fresh.refresh().await().indefinitely());

    // The last values are gone, not published as if they were current; the failure is counted.
    assertNull(registry.find("rollcall.instances.live").gauge());
    assertNull(registry.find("rollcall.epochs").gauge());
    assertEquals(1.0, registry.get("rollcall.state.gauge.failures").counter().count());
  }
}
