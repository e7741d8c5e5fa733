-- The W3C traceparent of the span that opened a pass (dev.rollcall.tracing.RecoveryTraces), so that
-- what happens to the pass later (its batches handed out, its close), on whichever service replica,
-- joins the pass's trace: a takeover's close joins the trace of the death that opened it. Null when
-- tracing was off as the pass opened, and for passes opened before this column existed.
ALTER TABLE rollcall.epochs ADD COLUMN trace_parent text;
