package dev.rollcall.recovery;

import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.rollcall.testing.Api.Batch;
import dev.rollcall.testing.Api.Instance;
import dev.rollcall.testing.ApiTestBase;
import dev.rollcall.testing.Db;
import dev.rollcall.testing.ServiceTest;
import dev.rollcall.testing.SourceTables;
import java.sql.Connection;
import java.sql.Statement;
import java.util.ArrayList;
import java.util.List;
import java.util.UUID;
import org.junit.jupiter.api.Test;
import org.postgresql.PGConnection;
import org.postgresql.PGNotification;

/**
 * A "work" notice says whose work it is: a boot epoch's batch released by a leaving claimer names
 * the epoch's kind and deploy, so that the service wakes a waiting claim of that deploy, the only
 * ones that can take it ({@link Wakeups#wakeFor}).
 */
@ServiceTest
class WorkNoticeTest extends ApiTestBase {

  private static final ObjectMapper JSON = new ObjectMapper();

  @Test
  void aReleasedBootBatchNamesItsDeployInItsWorkNotice() throws Exception {
    String deploy = "work-notice-" + UUID.randomUUID();
    Instance leaver = api.register(SourceTables.SMALL, deploy, "leaver");
    Batch batch = api.claimBatch(leaver, 5);
    assertTrue(batch.runIds().size() > 0);
    try (Connection listener = Db.database().connect()) {
      try (Statement st = listener.createStatement()) {
        st.execute("LISTEN rollcall_recovery");
      }
      PGConnection pg = listener.unwrap(PGConnection.class);
      // A graceful leave cuts the leases of its batches short: they are claimable at once.
      api.leave(leaver).expect(204);
      List<JsonNode> notices = new ArrayList<>();
      long deadline = System.nanoTime() + 5_000_000_000L;
      boolean found = false;
      while (!found && System.nanoTime() < deadline) {
        PGNotification[] got = pg.getNotifications(500);
        if (got == null) {
          continue;
        }
        for (PGNotification n : got) {
          JsonNode notice = JSON.readTree(n.getParameter());
          notices.add(notice);
          found |=
              "work".equals(notice.path("event").asText())
                  && "boot".equals(notice.path("kind").asText())
                  && deploy.equals(notice.path("deploymentId").asText());
        }
      }
      assertTrue(found, "a work notice naming the boot epoch's deploy: " + notices);
    }
  }
}
