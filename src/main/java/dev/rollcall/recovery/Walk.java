package dev.rollcall.recovery;

import java.util.List;
import java.util.Optional;
import java.util.OptionalLong;

/**
 * Where a claim is in the epochs it serves: their order (the namespace's shared epochs oldest
 * first, then the deploy's boot epoch), the index of the epoch it looks at {@code next}, and the
 * soonest wait hint of the epochs it passed.
 */
record Walk(List<Epoch> order, int next, Optional<WaitHints.Hint> hint) {

  static Walk start(List<Epoch> order) {
    return new Walk(order, 0, Optional.empty());
  }

  /** Every epoch was looked at. */
  boolean finished() {
    return next == order.size();
  }

  Epoch epoch() {
    return order.get(next);
  }

  Walk at(int index) {
    return new Walk(order, index, hint);
  }

  /** On to the epoch after this one, that one's wait hint kept if it is sooner. */
  Walk past(Optional<WaitHints.Hint> wait) {
    return new Walk(order, next + 1, WaitHints.sooner(wait, hint));
  }

  /** The deploy's boot epoch, which a "done" names. */
  OptionalLong bootEpochId() {
    return order.stream().filter(e -> e.kind() == EpochKind.BOOT).mapToLong(Epoch::id).findFirst();
  }
}
