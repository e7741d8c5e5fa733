package dev.rollcall.recovery;

import static org.junit.jupiter.api.Assertions.assertEquals;

import dev.rollcall.testing.ClaimerSwarm;
import dev.rollcall.testing.Db;
import java.util.List;

/** The invariants of one finished boot epoch with no lease expiries, shared by several tests. */
public final class EpochInvariants {

  private EpochInvariants() {}

  /** One epoch, every active run handed out exactly once, union of completed batches = source. */
  public static void check(String deploy, String namespace, ClaimerSwarm.Outcome out) {
    assertEquals(List.of(), out.duplicates(), "runs handed out twice");
    assertEquals(1, out.epochs().size(), "epochs seen by claimers");
    long epoch = out.epochs().iterator().next();
    assertEquals(
        1,
        Db.number(
            "SELECT count(*) FROM rollcall.epochs WHERE namespace = ? AND kind = 'boot'"
                + " AND deployment_id = ?",
            namespace,
            deploy));
    assertEquals(Db.activeRuns(namespace), out.handedOut());
    assertEquals(
        Db.activeRuns(namespace),
        Db.set(
            "SELECT r.run_id FROM rollcall.batch_runs r JOIN rollcall.batches b"
                + " ON b.id = r.batch_id WHERE b.epoch_id = ? AND b.state = 'completed'",
            epoch),
        "the union of completed batches is the active set");
    assertEquals(1.0, handOutsPerRun(epoch), "hand-outs per run");
    assertEquals(
        "closed", Db.column("SELECT state FROM rollcall.epochs WHERE id = ?", epoch).get(0));
  }

  /** Ledger hand-outs divided by distinct runs handed out. */
  public static double handOutsPerRun(long epoch) {
    long handOuts = Db.number("SELECT count(*) FROM rollcall.ledger WHERE epoch_id = ?", epoch);
    long runs =
        Db.number("SELECT count(DISTINCT run_id) FROM rollcall.ledger WHERE epoch_id = ?", epoch);
    return (double) handOuts / runs;
  }
}
