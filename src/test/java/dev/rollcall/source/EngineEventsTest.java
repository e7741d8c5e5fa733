package dev.rollcall.source;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.ByteArrayOutputStream;
import java.util.HexFormat;
import java.util.Random;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/** The event bytes Rollcall writes when it mends a torn run, as cbor-x writes them. */
@Tag("unit")
class EngineEventsTest {

  static final HexFormat HEX = HexFormat.of();

  @Test
  void aStepCompletedEventIsTheMapAroundTheRowsOutputBytes() {
    // cbor-x: encode({stepName: 'a', workflowName: 'b', result: new Uint8Array([1, 2, 3])}).
    assertEquals(
        "b9000368737465704e616d6561616c776f726b666c6f774e616d65616266726573756c74d84043010203",
        HEX.formatHex(EngineEvents.stepCompleted("a", "b", HEX.parseHex("d84043010203"))));
  }

  @Test
  void aStepFailedEventCarriesTheRowsSerializedError() {
    // cbor-x: encode({stepName: 'a', error: new Uint8Array([1])}).
    assertEquals(
        "b9000268737465704e616d656161656572726f72d8404101",
        HEX.formatHex(EngineEvents.stepFailed("a", HEX.parseHex("d8404101"))));
    assertTrue(EngineEvents.serializedError(HEX.parseHex("d8404101")));
    assertFalse(EngineEvents.serializedError(HEX.parseHex("b900026765727221")));
    assertFalse(EngineEvents.serializedError(null));
  }

  @Test
  void textHeadersAreTheShortestAsCborXWritesThem() {
    assertEquals("60", text(""));
    assertEquals("77", text("x".repeat(23)).substring(0, 2));
    assertEquals("7818", text("x".repeat(24)).substring(0, 4));
    assertEquals("78ff", text("x".repeat(255)).substring(0, 4));
    assertEquals("790100", text("x".repeat(256)).substring(0, 6));
    assertEquals("7a00010000", text("x".repeat(65536)).substring(0, 10));
    // Lengths count UTF-8 bytes, not characters.
    assertEquals("62c3a9", text("é"));
  }

  @Test
  void aNewEventIdSortsAfterTheRunsNewestEventEvenWhenTheClockIsBehindIt() {
    String newest = "wevt_" + EngineEvents.ulid(2_000_000L, new Random(1));
    String later = EngineEvents.eventIdAfter(newest, 3_000_000L);
    assertEquals(3_000_000L, EngineEvents.decodeTime(later.substring(5, 15)));
    String behind = EngineEvents.eventIdAfter(newest, 1_000_000L);
    assertEquals(2_000_001L, EngineEvents.decodeTime(behind.substring(5, 15)));
    assertTrue(behind.compareTo(newest) > 0);
    String same = EngineEvents.eventIdAfter(newest, 2_000_000L);
    assertTrue(same.compareTo(newest) > 0);
    assertEquals(31, EngineEvents.eventIdAfter(null, 5L).length());
  }

  @Test
  void aUlidIsTwentySixCrockfordCharactersWhoseFirstTenAreTheTime() {
    String id = EngineEvents.ulid(1_700_000_000_123L, new Random(7));
    assertEquals(26, id.length());
    assertTrue(id.matches("[0-9A-HJKMNP-TV-Z]{26}"), id);
    assertEquals(1_700_000_000_123L, EngineEvents.decodeTime(id.substring(0, 10)));
    assertEquals(-1, EngineEvents.decodeTime("not-a-ulid"));
  }

  static String text(String s) {
    ByteArrayOutputStream out = new ByteArrayOutputStream();
    EngineEvents.text(out, s);
    return HEX.formatHex(out.toByteArray());
  }

  static byte[] bytes(String hex) {
    return HEX.parseHex(hex);
  }

  @Test
  void theOutputIsCarriedUnchanged() {
    byte[] output = bytes("d84058ff" + "00".repeat(255));
    byte[] event = EngineEvents.stepCompleted("s", "w", output);
    byte[] tail = new byte[output.length];
    System.arraycopy(event, event.length - output.length, tail, 0, output.length);
    assertArrayEquals(output, tail);
  }
}
