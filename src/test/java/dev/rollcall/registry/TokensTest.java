package dev.rollcall.registry;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.Optional;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/** An instance token names its database, so that any service replica finds the instance. */
@Tag("unit")
class TokensTest {

  @Test
  void aTokenOfTheDefaultDatabaseNamesNoneAndAnotherNamesItsOwn() {
    String plain = Tokens.generate("default", "default");
    String billing = Tokens.generate("billing-db", "default");
    assertTrue(plain.startsWith(Tokens.PREFIX) && billing.startsWith(Tokens.PREFIX));
    assertEquals(Optional.empty(), Tokens.database(plain));
    assertEquals(Optional.of("billing-db"), Tokens.database(billing));
    // The random part is the secret: two tokens of one database differ.
    assertNotEquals(billing, Tokens.generate("billing-db", "default"));
    assertTrue(billing.length() <= 100, "within the length authentication accepts");
  }
}
