package dev.rollcall.recovery;

import com.fasterxml.jackson.annotation.JsonValue;
import java.util.Locale;

/** The kinds of recovery pass. */
public enum EpochKind {
  /** One per namespace and deployment: the runs to recover when a deploy starts. */
  BOOT,
  /** One per dead instance: its in-flight runs. */
  TAKEOVER,
  /** Periodic: runs stranded between deploys. */
  SWEEP,
  /** Started by an operator. */
  MANUAL;

  /** The stable string (lower case). */
  @JsonValue
  public String wire() {
    return name().toLowerCase(Locale.ROOT);
  }

  /** The kind with this stable string. */
  public static EpochKind fromWire(String wire) {
    return valueOf(wire.toUpperCase(Locale.ROOT));
  }
}
