package dev.rollcall.recovery;

import java.util.Optional;

/**
 * One step under an epoch's lock: either what the claim gets from this epoch ({@code served}), or
 * the epoch to take the next step on ({@code again}: its scan just finished, or re-checked runs
 * handed nothing out). Exactly one is present.
 */
record Step(Optional<Served> served, Optional<Epoch> again) {

  static Step done(Served served) {
    return new Step(Optional.of(served), Optional.empty());
  }

  static Step again(Epoch epoch) {
    return new Step(Optional.empty(), Optional.of(epoch));
  }
}
