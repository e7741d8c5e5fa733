package dev.rollcall.admin;

import dev.rollcall.admin.AdminViews.Minute;
import dev.rollcall.admin.AdminViews.TimelineView;
import io.quarkus.hibernate.reactive.panache.common.WithSession;
import io.smallrye.mutiny.Uni;
import jakarta.enterprise.context.ApplicationScoped;
import java.time.Instant;
import java.time.OffsetDateTime;
import java.time.ZoneOffset;
import java.util.Map;

/**
 * The last hour of recovery, minute by minute, for the console's chart: runs handed out, deaths,
 * how long each death took to detect, and the passes open. Read from the ledger, the hand-outs in
 * flight, the epochs and the instances, by the database's clock.
 */
@ApplicationScoped
public class Timeline {

  /** Minutes shown, the current one last. */
  static final int MINUTES = 60;

  /**
   * One row per minute. Hand-outs: every hand-out's ledger row is written once with its outcome
   * (V18), so a hand-out counts in the minute its outcome was written, or, still in flight, in the
   * minute it was leased; only passes open at some point of the hour are read (the ledger's epoch
   * index, never the whole ledger). Detection: a takeover's opening minus its subject's lease
   * expiry, the longest of the minute. Open passes: those open at any moment of the minute.
   */
  private static final String SQL =
      "WITH minutes AS (SELECT m FROM generate_series(date_trunc('minute', now())"
          + "   - (:minutes - 1) * interval '1 minute', date_trunc('minute', now()),"
          + "   interval '1 minute') AS m),"
          + " recent AS (SELECT id, kind, created_at, closed_at, subject_lease_expired_at"
          + "   FROM rollcall.epochs WHERE (:ns = '' OR namespace = :ns)"
          + "   AND (closed_at IS NULL OR closed_at >= (SELECT min(m) FROM minutes))),"
          + " hand_outs AS (SELECT date_trunc('minute', l.recorded_at) AS m, count(*) AS n"
          + "   FROM rollcall.ledger l WHERE l.epoch_id IN (SELECT id FROM recent)"
          + "   AND l.batch_id IS NOT NULL"
          + "   AND l.recorded_at >= (SELECT min(m) FROM minutes) GROUP BY 1"
          + "   UNION ALL SELECT date_trunc('minute', f.recorded_at), count(*)"
          + "   FROM rollcall.hand_outs_in_flight f WHERE f.epoch_id IN (SELECT id FROM recent)"
          + "   GROUP BY 1),"
          + " deaths AS (SELECT date_trunc('minute', ended_at) AS m, count(*) AS n"
          + "   FROM rollcall.instances WHERE state = 'dead' AND (:ns = '' OR namespace = :ns)"
          + "   AND ended_at >= (SELECT min(m) FROM minutes) GROUP BY 1),"
          + " detections AS (SELECT date_trunc('minute', created_at) AS m,"
          + "   max(greatest(0, extract(epoch FROM created_at - subject_lease_expired_at) * 1000))"
          + "   ::bigint AS ms FROM recent WHERE kind = 'takeover'"
          + "   AND subject_lease_expired_at IS NOT NULL GROUP BY 1)"
          + " SELECT (extract(epoch FROM minutes.m) * 1000)::bigint,"
          + "   coalesce((SELECT sum(n) FROM hand_outs h WHERE h.m = minutes.m), 0)::bigint,"
          + "   coalesce((SELECT n FROM deaths d WHERE d.m = minutes.m), 0)::bigint,"
          + "   (SELECT ms FROM detections x WHERE x.m = minutes.m),"
          + "   (SELECT count(*) FROM recent e WHERE e.created_at < minutes.m + interval '1 minute'"
          + "     AND (e.closed_at IS NULL OR e.closed_at >= minutes.m))"
          + " FROM minutes ORDER BY minutes.m";

  /** The last hour, of one namespace or (null) of all. */
  @WithSession
  public Uni<TimelineView> lastHour(String namespace) {
    return Pages.selectSql(
            SQL, Map.of("ns", namespace == null ? "" : namespace, "minutes", MINUTES))
        .map(rows -> new TimelineView(namespace, rows.stream().map(Timeline::minute).toList()));
  }

  private static Minute minute(Object[] r) {
    return new Minute(
        OffsetDateTime.ofInstant(Instant.ofEpochMilli(number(r[0])), ZoneOffset.UTC),
        number(r[1]),
        number(r[2]),
        r[3] == null ? null : number(r[3]),
        number(r[4]));
  }

  private static long number(Object value) {
    return ((Number) value).longValue();
  }
}
