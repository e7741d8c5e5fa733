package dev.rollcall.metrics;

import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.rollcall.testing.Api;
import dev.rollcall.testing.Api.Batch;
import dev.rollcall.testing.Api.Instance;
import dev.rollcall.testing.ApiTestBase;
import dev.rollcall.testing.ServiceTest;
import dev.rollcall.testing.SourceTables;
import io.quarkus.test.common.http.TestHTTPResource;
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
}
