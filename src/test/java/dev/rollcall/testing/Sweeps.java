package dev.rollcall.testing;

/** Sweeps are namespace-wide: a test leaves none open, and no recent one, for the next test. */
public final class Sweeps {

  private Sweeps() {}

  /** Closes every sweep and moves its creation a day back, so the next sweep may open at once. */
  public static void closeAll() {
    Db.update(
        "UPDATE rollcall.epochs SET state = 'closed', close_reason = 'test',"
            + " created_at = created_at - interval '1 day' WHERE kind = 'sweep'");
  }
}
