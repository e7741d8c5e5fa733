package dev.rollcall.registry;

import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.security.SecureRandom;
import java.util.Base64;

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

  /** A fresh token. */
  public static String generate() {
    byte[] bytes = new byte[32];
    RANDOM.nextBytes(bytes);
    return PREFIX + Base64.getUrlEncoder().withoutPadding().encodeToString(bytes);
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
