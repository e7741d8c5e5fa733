package dev.rollcall.registry;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;

import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

@Tag("unit")
class BoundedMapTest {

  @Test
  void whenFullItStartsOverEmpty() {
    BoundedMap<String, Integer> memo = new BoundedMap<>(2);
    memo.put("a", 1);
    memo.put("b", 2);
    assertEquals(2, memo.size());
    memo.put("c", 3);
    assertEquals(1, memo.size());
    assertEquals(3, memo.get("c"));
    assertNull(memo.get("a"));
  }

  @Test
  void aKeyPutAgainKeepsOneEntry() {
    BoundedMap<String, Integer> memo = new BoundedMap<>(2);
    memo.put("a", 1);
    memo.put("a", 2);
    assertEquals(1, memo.size());
    assertEquals(2, memo.get("a"));
  }
}
