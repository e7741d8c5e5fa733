package dev.rollcall.e2e;

import dev.rollcall.testing.TestDatabase;
import java.util.Collection;
import java.util.List;

/**
 * Every queue job a graphile worker takes, as the database saw it: a trigger of the test's own on
 * the queue's jobs table records each take (the statement that locks a job and counts an attempt)
 * with the worker, the job's message id and the time ({@code clock_timestamp()}, the host's clock,
 * as the replicas' journals are). The jobs themselves are deleted once done; this record stays.
 */
final class JobTakes {

  private JobTakes() {}

  /** Starts recording; the queue's schema must exist (a replica has started its queue). */
  static void record(TestDatabase db) {
    db.execute(
        "CREATE TABLE IF NOT EXISTS public.e2e_job_takes (job_id bigint NOT NULL,"
            + " worker_id text NOT NULL, message_id text,"
            + " taken_at timestamptz NOT NULL DEFAULT clock_timestamp())",
        "CREATE OR REPLACE FUNCTION public.e2e_record_take() RETURNS trigger LANGUAGE plpgsql AS"
            + " $$ BEGIN INSERT INTO public.e2e_job_takes (job_id, worker_id, message_id)"
            + " VALUES (NEW.id, NEW.locked_by, NEW.payload->>'messageId'); RETURN NEW; END $$",
        "DROP TRIGGER IF EXISTS e2e_record_take ON graphile_worker._private_jobs",
        "CREATE TRIGGER e2e_record_take AFTER UPDATE OF locked_by"
            + " ON graphile_worker._private_jobs FOR EACH ROW"
            + " WHEN (NEW.locked_by IS NOT NULL AND NEW.attempts > OLD.attempts)"
            + " EXECUTE FUNCTION public.e2e_record_take()");
  }

  /**
   * The takes by any of {@code workers} strictly between {@code from} and {@code to} (epoch ms),
   * each as "message id @ ms after {@code from}", oldest first.
   */
  static List<String> between(TestDatabase db, Collection<String> workers, long from, long to) {
    long until = Math.min(to, System.currentTimeMillis() + 86_400_000L);
    if (from >= until) {
      return List.of();
    }
    return db.column(
        "SELECT coalesce(message_id, 'job ' || job_id) || ' @'"
            + " || round(extract(epoch FROM taken_at) * 1000 - ?)::bigint"
            + " FROM public.e2e_job_takes WHERE worker_id = ANY(?)"
            + " AND taken_at > to_timestamp(? / 1000.0) AND taken_at < to_timestamp(? / 1000.0)"
            + " ORDER BY taken_at",
        from,
        workers.toArray(String[]::new),
        from,
        until);
  }

  /**
   * When any of {@code workers} took the job of {@code messageId} (epoch ms each), oldest first.
   */
  static List<String> of(TestDatabase db, Collection<String> workers, String messageId) {
    return db.column(
        "SELECT round(extract(epoch FROM taken_at) * 1000)::bigint::text"
            + " FROM public.e2e_job_takes WHERE worker_id = ANY(?) AND message_id = ?"
            + " ORDER BY taken_at",
        workers.toArray(String[]::new),
        messageId);
  }

  /** When the last take by any of {@code workers} in [from, to) happened (epoch ms), or -1. */
  static long last(TestDatabase db, Collection<String> workers, long from, long to) {
    return Long.parseLong(
        db.column(
                "SELECT coalesce(max(round(extract(epoch FROM taken_at) * 1000))::bigint, -1)::text"
                    + " FROM public.e2e_job_takes WHERE worker_id = ANY(?)"
                    + " AND taken_at >= to_timestamp(? / 1000.0)"
                    + " AND taken_at < to_timestamp(? / 1000.0)",
                workers.toArray(String[]::new),
                from,
                to)
            .get(0));
  }
}
