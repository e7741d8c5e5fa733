package dev.rollcall.recovery;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.rollcall.testing.Api;
import dev.rollcall.testing.Api.Batch;
import dev.rollcall.testing.Api.Instance;
import dev.rollcall.testing.Db;
import dev.rollcall.testing.ServiceTest;
import dev.rollcall.testing.SourceTables;
import io.quarkus.test.common.http.TestHTTPResource;
import java.net.URI;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.UUID;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.jboss.logging.Logger;
import org.junit.jupiter.api.Test;

@ServiceTest
class ConcurrentClaimTest {

  private static final Logger LOG = Logger.getLogger(ConcurrentClaimTest.class);

  static final int CLAIMERS = 32;

  @TestHTTPResource("/")
  URI base;

  @Test
  void thirtyTwoConcurrentClaimersShareOneEpochAndHandOutEveryRunExactlyOnce() throws Exception {
    Api api = new Api(base);
    String deploy = UUID.randomUUID().toString();
    List<Instance> instances = new ArrayList<>();
    for (int i = 0; i < CLAIMERS; i++) {
      instances.add(api.register(SourceTables.LARGE, deploy, "claimer-" + i));
    }
    Set<String> handedOut = ConcurrentHashMap.newKeySet();
    List<String> duplicates = new ArrayList<>();
    ConcurrentHashMap<Long, Boolean> epochs = new ConcurrentHashMap<>();
    CountDownLatch start = new CountDownLatch(1);
    ExecutorService pool = Executors.newFixedThreadPool(CLAIMERS);
    List<Future<Integer>> results = new ArrayList<>();
    for (Instance instance : instances) {
      results.add(
          pool.submit(
              () -> {
                start.await();
                int batches = 0;
                for (Batch b; (b = api.claimBatch(instance, 97)) != null; batches++) {
                  epochs.put(b.epochId(), true);
                  for (String id : b.runIds()) {
                    if (!handedOut.add(id)) {
                      synchronized (duplicates) {
                        duplicates.add(id);
                      }
                    }
                  }
                  api.complete(instance, b, List.of()).expect(200);
                }
                return batches;
              }));
    }
    start.countDown();
    int claimersWithWork = 0;
    for (Future<Integer> f : results) {
      if (f.get(5, TimeUnit.MINUTES) > 0) {
        claimersWithWork++;
      }
    }
    pool.shutdown();

    assertEquals(List.of(), duplicates, "runs handed out twice");
    assertEquals(1, epochs.size(), "epochs seen by claimers");
    long epoch = epochs.keys().nextElement();
    assertEquals(
        1,
        Db.number(
            "SELECT count(*) FROM rollcall.epochs WHERE kind = 'boot' AND deployment_id = ?",
            deploy));
    assertEquals(Db.activeRuns(SourceTables.LARGE), handedOut);
    assertEquals(
        Db.activeRuns(SourceTables.LARGE),
        Db.set(
            "SELECT r.run_id FROM rollcall.batch_runs r JOIN rollcall.batches b"
                + " ON b.id = r.batch_id WHERE b.epoch_id = ? AND b.state = 'completed'",
            epoch),
        "the union of completed batches is the active set");
    long handOuts = Db.number("SELECT count(*) FROM rollcall.ledger WHERE epoch_id = ?", epoch);
    long runs =
        Db.number("SELECT count(DISTINCT run_id) FROM rollcall.ledger WHERE epoch_id = ?", epoch);
    assertEquals(handOuts, runs, "hand-outs per run");
    assertEquals(
        "closed", Db.column("SELECT state FROM rollcall.epochs WHERE id = ?", epoch).get(0));
    assertTrue(claimersWithWork > 1, "work was spread over claimers: " + claimersWithWork);
    LOG.infof(
        "%d claimers, %d runs: hand-outs per run %.2f, %d claimers got batches",
        CLAIMERS, runs, (double) handOuts / runs, claimersWithWork);
  }
}
