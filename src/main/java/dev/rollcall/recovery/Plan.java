package dev.rollcall.recovery;

import java.util.Optional;
import java.util.OptionalLong;

/**
 * What a claim's first transaction found: a batch or a range ({@code served}), or else where the
 * claim goes on under the epochs' locks ({@code walk}), with the epoch whose next page it may read
 * ahead of its lock ({@code readAhead}; {@link EpochLocks}).
 */
record Plan(Walk walk, Optional<Served> served, OptionalLong readAhead) {

  static Plan found(Walk walk, Served served) {
    return new Plan(walk, Optional.of(served), OptionalLong.empty());
  }

  static Plan from(Walk walk) {
    return new Plan(walk, Optional.empty(), OptionalLong.empty());
  }

  static Plan queued(Walk walk, boolean readAhead) {
    return new Plan(
        walk,
        Optional.empty(),
        readAhead ? OptionalLong.of(walk.epoch().id()) : OptionalLong.empty());
  }
}
