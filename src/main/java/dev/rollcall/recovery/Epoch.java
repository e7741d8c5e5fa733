package dev.rollcall.recovery;

import dev.rollcall.source.Snapshot;
import io.vertx.mutiny.sqlclient.Row;
import java.util.Optional;

/** One recovery pass as read from its row. */
public record Epoch(
    long id,
    String namespace,
    EpochKind kind,
    boolean open,
    Snapshot snapshot,
    Optional<String> cursor,
    boolean scanDone) {

  /** The columns {@link #from(Row)} reads. */
  static final String COLUMNS =
      "id, namespace, kind, state, snapshot_max_id, snapshot_at, scan_cursor, scan_done";

  /** This epoch with its scan moved on (as {@code Epochs.advance} records it). */
  Epoch advancedTo(Optional<String> newCursor, boolean done) {
    return new Epoch(id, namespace, kind, open, snapshot, newCursor, done);
  }

  static Epoch from(Row row) {
    return new Epoch(
        row.getLong("id"),
        row.getString("namespace"),
        EpochKind.fromWire(row.getString("kind")),
        "open".equals(row.getString("state")),
        new Snapshot(row.getString("snapshot_max_id"), row.getOffsetDateTime("snapshot_at")),
        Optional.ofNullable(row.getString("scan_cursor")),
        row.getBoolean("scan_done"));
  }
}
