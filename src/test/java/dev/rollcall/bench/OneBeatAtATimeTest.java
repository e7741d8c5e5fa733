package dev.rollcall.bench;

import static org.junit.jupiter.api.Assertions.assertEquals;

import dev.rollcall.bench.LoadBenchmarkIT.OneBeatAtATime;
import dev.rollcall.bench.LoadBenchmarkIT.OneBeatAtATime.Due;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/** The load driver's heartbeats of one instance: at most one outstanding, as a client's. */
@Tag("unit")
class OneBeatAtATimeTest {

  @Test
  void aBeatDueWhileOneIsOutstandingGoesWhenItIsAnsweredCountedFromItsOwnDueTime() {
    OneBeatAtATime gate = new OneBeatAtATime(true);
    assertEquals(Due.SEND, gate.due(100));
    assertEquals(Due.WAITS, gate.due(700));
    assertEquals(700, gate.answered(), "sent now, late since 700");
    assertEquals(OneBeatAtATime.NONE, gate.answered(), "nothing waits after it");
    assertEquals(Due.SEND, gate.due(1900), "none outstanding: sent when due");
  }

  @Test
  void severalDueMeanwhileGoAsOneFromTheFirstDueTime() {
    OneBeatAtATime gate = new OneBeatAtATime(true);
    gate.due(0);
    assertEquals(Due.WAITS, gate.due(600));
    assertEquals(Due.MERGED, gate.due(1200));
    assertEquals(Due.MERGED, gate.due(1800));
    assertEquals(600, gate.answered());
    assertEquals(Due.WAITS, gate.due(2400), "the merged beat is outstanding now");
  }

  @Test
  void offEveryBeatIsSentWhenDue() {
    OneBeatAtATime gate = new OneBeatAtATime(false);
    assertEquals(Due.SEND, gate.due(0));
    assertEquals(Due.SEND, gate.due(600));
    assertEquals(OneBeatAtATime.NONE, gate.answered());
  }
}
