package dev.rollcall.recovery;

import dev.rollcall.source.Snapshot;
import io.vertx.mutiny.sqlclient.Row;
import java.util.Optional;
import java.util.UUID;

/**
 * One recovery pass as read from its row.
 *
 * @param subject a takeover's instance (dead or gone); empty for every other kind
 */
public record Epoch(
    long id,
    String namespace,
    EpochKind kind,
    boolean open,
    Snapshot snapshot,
    Optional<String> cursor,
    boolean scanDone,
    long runsScanned,
    long ageMs,
    Optional<UUID> subject) {

  /** The columns {@link #from(Row)} reads; the age is by the database's clock. */
  static final String COLUMNS =
      "id, namespace, kind, state, snapshot_max_id, snapshot_at, scan_cursor, scan_done,"
          + " runs_scanned, (extract(epoch FROM now() - created_at) * 1000)::bigint AS age_ms,"
          + " subject_instance_id";

  /** This epoch with its scan moved on (as {@code Epochs.advance} records it). */
  Epoch advancedTo(Optional<String> newCursor, boolean done, int scanned) {
    return new Epoch(
        id,
        namespace,
        kind,
        open,
        snapshot,
        newCursor,
        done,
        runsScanned + scanned,
        ageMs,
        subject);
  }

  /** This epoch as if it were closed: nothing of it is served. */
  Epoch closedView() {
    return new Epoch(
        id, namespace, kind, false, snapshot, cursor, scanDone, runsScanned, ageMs, subject);
  }

  static Epoch from(Row row) {
    return new Epoch(
        row.getLong("id"),
        row.getString("namespace"),
        EpochKind.fromWire(row.getString("kind")),
        "open".equals(row.getString("state")),
        new Snapshot(row.getString("snapshot_max_id"), row.getOffsetDateTime("snapshot_at")),
        Optional.ofNullable(row.getString("scan_cursor")),
        row.getBoolean("scan_done"),
        row.getLong("runs_scanned"),
        row.getLong("age_ms"),
        Optional.ofNullable(row.getUUID("subject_instance_id")));
  }
}
