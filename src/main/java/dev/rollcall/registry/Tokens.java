package dev.rollcall.registry;

import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.security.SecureRandom;
import java.util.Base64;
import java.util.Optional;

/**
 * Instance tokens: 256 random bits, shown to the instance once and stored only as a SHA-256 hash. A
 * plain hash is enough here (no salt, no stretching) because the token is random, not a password:
 * nobody can guess a preimage.
 */
public final class Tokens {

  /** Every instance token starts with this, so a leaked one is easy to recognise and scan for. */
  public static final String PREFIX = "rci_";

  private static final SecureRandom RANDOM = new SecureRandom();

  private Tokens() {}

  /** Between a token's random part and the database it names ({@link #generate(String)}). */
  static final char DATABASE_MARK = '.';

  /** A fresh token. */
  public static String generate() {
    byte[] bytes = new byte[32];
    RANDOM.nextBytes(bytes);
    return PREFIX + Base64.getUrlEncoder().withoutPadding().encodeToString(bytes);
  }

  /**
   * A fresh token of an instance whose rows live in {@code database}: the random part, then {@code
   * .database} unless it is the default one, so that any service replica finds the instance's
   * database from the token alone (a token without the mark, as every token was before there were
   * several databases, is the default database's). The name is no secret; the random part is.
   */
  public static String generate(String database, String defaultDatabase) {
    String token = generate();
    return database.equals(defaultDatabase) ? token : token + DATABASE_MARK + database;
  }

  /** The database a token names; empty for the default database's. */
  public static Optional<String> database(String token) {
    int mark = token.indexOf(DATABASE_MARK);
    return mark < 0 ? Optional.empty() : Optional.of(token.substring(mark + 1));
  }

  /** The stored form of a token. */
  public static byte[] hash(String token) {
    try {
      return MessageDigest.getInstance("SHA-256").digest(token.getBytes(StandardCharsets.UTF_8));
    } catch (NoSuchAlgorithmException e) {
      throw new IllegalStateException("SHA-256 is part of every Java runtime", e);
    }
  }

  /** Compares two secrets in time that does not depend on where they differ. */
  public static boolean constantTimeEquals(String expected, String given) {
    if (expected == null || given == null) {
      return false;
    }
    return MessageDigest.isEqual(hash(expected), hash(given));
  }
}
