package dev.rollcall.api;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/** The rate limit's token bucket, driven with explicit monotonic times. */
@Tag("unit")
class TokenBucketTest {

  private static final long MS = 1_000_000L;

  @Test
  void aFreshBucketAllowsABurstOfTwoSecondsWorthThenRefuses() {
    TokenBucket bucket = new TokenBucket(10, 0);
    for (int i = 0; i < 20; i++) {
      assertEquals(0, bucket.take(10, 0), "token " + i);
    }
    assertEquals(100, bucket.take(10, 0), "the next token comes after 1/10 s");
  }

  @Test
  void tokensComeBackAtTheRateAndTheRetryHintShrinksAsTimePasses() {
    TokenBucket bucket = new TokenBucket(10, 0);
    for (int i = 0; i < 20; i++) {
      bucket.take(10, 0);
    }
    assertEquals(60, bucket.take(10, 40 * MS));
    assertEquals(0, bucket.take(10, 100 * MS));
    assertEquals(100, bucket.take(10, 100 * MS));
  }

  @Test
  void anIdleBucketRefillsToTwoSecondsWorthAndNoMore() {
    TokenBucket bucket = new TokenBucket(5, 0);
    for (int i = 0; i < 10; i++) {
      bucket.take(5, 0);
    }
    long later = 60_000 * MS;
    for (int i = 0; i < 10; i++) {
      assertEquals(0, bucket.take(5, later), "token " + i);
    }
    assertEquals(200, bucket.take(5, later));
  }

  @Test
  void aRefusedCallTakesNothing() {
    TokenBucket bucket = new TokenBucket(1, 0);
    bucket.take(1, 0);
    bucket.take(1, 0);
    assertEquals(1000, bucket.take(1, 0));
    assertEquals(500, bucket.take(1, 500 * MS));
    assertEquals(0, bucket.take(1, 1000 * MS));
  }

  @Test
  void aBucketIsForgettableOnlyAfterItsIdleTime() {
    TokenBucket bucket = new TokenBucket(1, 0);
    bucket.take(1, 10 * MS);
    assertFalse(bucket.idleLongerThan(100 * MS, 110 * MS));
    assertTrue(bucket.idleLongerThan(100 * MS, 111 * MS));
  }
}
