package dev.rollcall.recovery;

import dev.rollcall.database.Database;
import dev.rollcall.database.Databases;
import io.smallrye.mutiny.Uni;
import io.vertx.mutiny.sqlclient.SqlClient;
import io.vertx.mutiny.sqlclient.Tuple;
import java.util.ArrayList;
import java.util.List;
import java.util.function.Function;
import org.jboss.logging.Logger;

/**
 * The periodic jobs' two rules: single flight across service replicas (retention, the orphaned-lock
 * look: a replica runs the job only after winning its {@code rollcall.housekeeping} row's lease),
 * and a pass that fails is logged and tried again at the next interval ({@link #survive}).
 */
final class Housekeeping {

  private static final Logger LOG = Logger.getLogger(Housekeeping.class);

  private Housekeeping() {}

  /**
   * A scheduled pass that never dies of a failure: logged as a warning, and the next pass tries
   * again. The failure decides nothing.
   */
  static Uni<Void> survive(Uni<?> pass, String what) {
    return pass.onFailure()
        .invoke(e -> LOG.warnf("%s failed, retrying next pass: %s", what, e.toString()))
        .onFailure()
        .recoverWithNull()
        .replaceWithVoid();
  }

  /**
   * A scheduled pass in every migrated database at once, each surviving its own failure ({@link
   * #survive}): one database that does not answer holds up no other's pass beyond this one.
   */
  static Uni<Void> inEach(Databases databases, Function<Database, Uni<?>> pass, String what) {
    List<Uni<Void>> passes = new ArrayList<>();
    for (Database db : databases.serving()) {
      passes.add(survive(pass.apply(db), what + " in " + db));
    }
    return passes.isEmpty()
        ? Uni.createFrom().voidItem()
        : Uni.join().all(passes).andCollectFailures().replaceWithVoid();
  }

  /**
   * Takes the job's turn for {@code leaseMs} if no replica holds it; true when this call won it.
   * Races: replicas that try at once all run this update; the others wait for the winner's row
   * lock, then re-read the row it committed, whose lease now runs past their own {@code now()}:
   * they update nothing. One clock: the lease is decided by the database's {@code now()} here.
   */
  static Uni<Boolean> takeTurn(SqlClient client, String job, long leaseMs) {
    return client
        .preparedQuery(
            "UPDATE rollcall.housekeeping SET lease_until = now() + $2::bigint * interval"
                + " '1 millisecond' WHERE job = $1 AND lease_until <= now() RETURNING job")
        .execute(Tuple.of(job, leaseMs))
        .map(won -> won.size() > 0);
  }
}
