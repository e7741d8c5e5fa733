package dev.rollcall.registry;

import static org.junit.jupiter.api.Assertions.assertEquals;

import dev.rollcall.testing.Api.Instance;
import dev.rollcall.testing.ApiTestBase;
import dev.rollcall.testing.Db;
import dev.rollcall.testing.ServiceTest;
import dev.rollcall.testing.SourceTables;
import java.util.List;
import java.util.UUID;
import org.junit.jupiter.api.Test;

/**
 * A token whose instance retention has deleted is an unknown token, on every call, whether or not
 * the service replica still has it in its token cache.
 */
@ServiceTest
class DeletedInstanceTest extends ApiTestBase {

  @Test
  void everyCallOfADeletedInstanceIsRefusedAsAnUnknownToken() {
    Instance i = api.register(SourceTables.SMALL, UUID.randomUUID().toString(), "deleted");
    // The replica has seen the token: later calls skip its lookup.
    api.heartbeat(i).expect(200);
    // What retention does to an instance that ended long ago, and whose takeover is gone too.
    Db.update(
        "UPDATE rollcall.instances SET state = 'left', ended_at = now() WHERE id = ?", i.id());
    assertEquals(1, Db.update("DELETE FROM rollcall.instances WHERE id = ?", i.id()));

    api.heartbeat(i).expect(401);
    api.heartbeat(i, List.of("run-1")).expect(401);
    api.claim(i, 10).expect(401);
    api.leave(i).expect(401);
    api.exitingLeave(i, List.of()).expect(401);
  }

  @Test
  void anInstanceThatLeftIsGoneNotUnknown() {
    Instance i = api.register(SourceTables.SMALL, UUID.randomUUID().toString(), "left");
    api.heartbeat(i).expect(200);
    api.leave(i).expect(204);

    api.heartbeat(i).expect(410);
    api.claim(i, 10).expect(410);
    api.exitingLeave(i, List.of()).expect(410);
  }
}
