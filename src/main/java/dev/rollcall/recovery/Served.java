package dev.rollcall.recovery;

import dev.rollcall.source.ScannedRun;
import java.util.List;
import java.util.Optional;

/**
 * What a claim gets from one epoch: a batch, a range to classify, or nothing now (with a wait hint
 * if something may come).
 */
record Served(
    Optional<LeasedBatch> batch, Optional<ToClassify> range, Optional<WaitHints.Hint> hint) {

  /**
   * A range leased to the caller, to classify after the transaction that cut it commits. {@code
   * page} is what the cut read, or empty for a range re-taken from a claimer that did not classify
   * it (then its runs are looked up again).
   */
  record ToClassify(Epoch epoch, Batches.Range range, Optional<List<ScannedRun>> page) {}

  static Served batch(LeasedBatch batch) {
    return new Served(Optional.of(batch), Optional.empty(), Optional.empty());
  }

  static Served range(ToClassify range) {
    return new Served(Optional.empty(), Optional.of(range), Optional.empty());
  }

  static Served nothing() {
    return new Served(Optional.empty(), Optional.empty(), Optional.empty());
  }

  static Served later(WaitHints.Hint wait) {
    return new Served(Optional.empty(), Optional.empty(), Optional.of(wait));
  }

  Served withHint(Optional<WaitHints.Hint> wait) {
    return new Served(batch, range, wait);
  }

  /** A batch or a range: the claim stops looking at further epochs. */
  boolean found() {
    return batch.isPresent() || range.isPresent();
  }
}
