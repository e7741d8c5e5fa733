package dev.rollcall.recovery;

import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.rollcall.testing.ApiTestBase;
import dev.rollcall.testing.ClaimerSwarm;
import dev.rollcall.testing.ClaimerSwarm.Claimer;
import dev.rollcall.testing.ServiceTest;
import dev.rollcall.testing.SourceTables;
import java.util.ArrayList;
import java.util.List;
import java.util.UUID;
import org.jboss.logging.Logger;
import org.junit.jupiter.api.Test;

@ServiceTest
class ConcurrentClaimTest extends ApiTestBase {

  private static final Logger LOG = Logger.getLogger(ConcurrentClaimTest.class);

  static final int CLAIMERS = 32;

  @Test
  void thirtyTwoConcurrentClaimersShareOneEpochAndHandOutEveryRunExactlyOnce() throws Exception {
    String deploy = UUID.randomUUID().toString();
    List<Claimer> claimers = new ArrayList<>();
    for (int i = 0; i < CLAIMERS; i++) {
      claimers.add(new Claimer(api, api.register(SourceTables.LARGE, deploy, "claimer-" + i)));
    }

    ClaimerSwarm.Outcome out = ClaimerSwarm.run(claimers, 97);

    EpochInvariants.check(deploy, SourceTables.LARGE, out);
    assertTrue(out.claimersWithWork() > 1, "work was spread: " + out.claimersWithWork());
    LOG.infof(
        "%d claimers, %d runs: hand-outs per run %.2f, %d claimers got batches, %d ms",
        CLAIMERS,
        out.handedOut().size(),
        EpochInvariants.handOutsPerRun(out.epochs().iterator().next()),
        out.claimersWithWork(),
        out.wallMillis());
  }
}
