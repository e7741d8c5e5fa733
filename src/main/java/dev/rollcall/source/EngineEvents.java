package dev.rollcall.source;

import java.io.ByteArrayOutputStream;
import java.nio.charset.StandardCharsets;
import java.security.SecureRandom;
import java.util.Random;

/**
 * The bytes of an event as {@code @workflow/world-postgres} stores it, for the events Rollcall
 * writes when it mends a torn run: the event's {@code payload_cbor} is the engine's cbor-x encoding
 * of the event data, and the event's id a {@code wevt_} ULID. Pure functions; the byte-for-byte
 * agreement with the engine's own encoder is tested against the engine itself.
 *
 * <p>cbor-x (the engine's encoder, default options) writes a plain object as a map with a two-byte
 * length ({@code 0xb9 nn nn}), each key and string value as a definite text string with the
 * shortest length header, and a nested value exactly as it encodes that value alone. A step row's
 * {@code output_cbor} is the engine's encoding of the very value the event carries as {@code
 * result}, so the event's bytes are the map's header and keys around the row's bytes, unchanged.
 */
public final class EngineEvents {

  private static final char[] CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ".toCharArray();
  private static final Random RANDOM = new SecureRandom();

  private EngineEvents() {}

  /**
   * The data of a {@code step_completed} event as the runtime writes it: {@code {stepName,
   * workflowName, result}}, {@code result} being the row's {@code output_cbor} as it is.
   */
  public static byte[] stepCompleted(String stepName, String workflowName, byte[] outputCbor) {
    ByteArrayOutputStream out = new ByteArrayOutputStream();
    mapHeader(out, 3);
    text(out, "stepName");
    text(out, stepName);
    text(out, "workflowName");
    text(out, workflowName);
    text(out, "result");
    out.writeBytes(outputCbor);
    return out.toByteArray();
  }

  /**
   * The data of a {@code step_failed} event as the 5.0 runtime writes it: {@code {stepName,
   * error}}, {@code error} being the row's {@code error_cbor} as it is (the serialized error).
   */
  public static byte[] stepFailed(String stepName, byte[] errorCbor) {
    ByteArrayOutputStream out = new ByteArrayOutputStream();
    mapHeader(out, 2);
    text(out, "stepName");
    text(out, stepName);
    text(out, "error");
    out.writeBytes(errorCbor);
    return out.toByteArray();
  }

  /**
   * True when a step row's {@code error_cbor} holds a serialized error (a byte array, tag 64), the
   * 5.0 line's format, which its {@code step_failed} event carries unchanged. The 4.x line stores a
   * re-shaped {@code {message, stack}} map instead, from which its event is not rebuilt.
   */
  public static boolean serializedError(byte[] errorCbor) {
    return errorCbor != null
        && errorCbor.length >= 3
        && (errorCbor[0] & 0xff) == 0xd8
        && (errorCbor[1] & 0xff) == 0x40;
  }

  /**
   * A new {@code wevt_} id that sorts after {@code lastEventId} (the run's newest event, or null):
   * a ULID of {@code millis}, or of one millisecond past the newest event's time when that is not
   * earlier. The runtime reads a run's events in id order, and may read only those after the last
   * id it saw: the mended event must come after every event the run has.
   */
  public static String eventIdAfter(String lastEventId, long millis) {
    long time = millis;
    if (lastEventId != null && lastEventId.startsWith("wevt_") && lastEventId.length() >= 15) {
      long last = decodeTime(lastEventId.substring(5, 15));
      if (last >= 0 && last >= time) {
        time = last + 1;
      }
    }
    return "wevt_" + ulid(time, RANDOM);
  }

  /** A ULID of {@code millis} with 80 random bits, in Crockford's base 32 (26 characters). */
  static String ulid(long millis, Random random) {
    char[] chars = new char[26];
    long t = millis;
    for (int i = 9; i >= 0; i--) {
      chars[i] = CROCKFORD[(int) (t & 31)];
      t >>>= 5;
    }
    for (int i = 10; i < 26; i++) {
      chars[i] = CROCKFORD[random.nextInt(32)];
    }
    return new String(chars);
  }

  /** The time of a ULID's first ten characters, or -1 when they are not Crockford base 32. */
  static long decodeTime(String tenChars) {
    long t = 0;
    for (char c : tenChars.toUpperCase().toCharArray()) {
      int v = new String(CROCKFORD).indexOf(c);
      if (v < 0) {
        return -1;
      }
      t = (t << 5) | v;
    }
    return t;
  }

  private static void mapHeader(ByteArrayOutputStream out, int entries) {
    out.write(0xb9);
    out.write(entries >>> 8);
    out.write(entries & 0xff);
  }

  /** A definite text string with the shortest length header, as cbor-x writes one. */
  static void text(ByteArrayOutputStream out, String s) {
    byte[] utf8 = s.getBytes(StandardCharsets.UTF_8);
    int n = utf8.length;
    if (n < 24) {
      out.write(0x60 + n);
    } else if (n < 0x100) {
      out.write(0x78);
      out.write(n);
    } else if (n < 0x10000) {
      out.write(0x79);
      out.write(n >>> 8);
      out.write(n & 0xff);
    } else {
      out.write(0x7a);
      out.write(n >>> 24);
      out.write((n >>> 16) & 0xff);
      out.write((n >>> 8) & 0xff);
      out.write(n & 0xff);
    }
    out.writeBytes(utf8);
  }
}
