package dev.rollcall.testing;

import static org.junit.jupiter.api.Assertions.assertEquals;

import dev.rollcall.testing.Api.Instance;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * Each service test starts from an empty rollcall schema: whichever of these runs second would see
 * the first one's instance, epoch and batch otherwise.
 */
@ServiceTest
class CleanSchemaTest extends ApiTestBase {

  private void startsEmptyAndLeavesRowsBehind(String deploy) {
    assertEquals(
        List.of("0", "0", "0", "2"),
        Db.column(
            "SELECT count(*) FROM rollcall.instances UNION ALL"
                + " SELECT count(*) FROM rollcall.epochs UNION ALL"
                + " SELECT count(*) FROM rollcall.batches UNION ALL"
                + " SELECT count(*) FROM rollcall.housekeeping"),
        "instances, epochs, batches, housekeeping at the start of a test");
    Instance i = api.register(SourceTables.SMALL, deploy, "leaves-rows");
    api.claimBatch(i, 5);
  }

  @Test
  void aTestThatLeavesAnInstanceAndAnEpochBehind() {
    startsEmptyAndLeavesRowsBehind("clean-a");
  }

  @Test
  void anotherTestThatLeavesAnInstanceAndAnEpochBehind() {
    startsEmptyAndLeavesRowsBehind("clean-b");
  }
}
