package dev.rollcall.recovery;

import static org.junit.jupiter.api.Assertions.assertEquals;

import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/** How long a service replica's turn to look for orphaned queue locks lasts. */
@Tag("unit")
class OrphanTurnTest {

  @Test
  void aTurnIsHalfATickShortOfTheInterval() {
    // Looks every 3 s (half the default activity fence) on the reaper's 1 s tick.
    assertEquals(2_500, Reaper.orphanTurnMs(3_000, 1_000));
    // A look every tick: the replica that looked wins its next tick, half a tick after its turn.
    assertEquals(500, Reaper.orphanTurnMs(1_000, 1_000));
  }

  @Test
  void aTurnIsNeverEmpty() {
    // An empty turn would let every replica that fires at once look.
    assertEquals(1, Reaper.orphanTurnMs(1, 1_000));
    assertEquals(1, Reaper.orphanTurnMs(0, 0));
  }
}
