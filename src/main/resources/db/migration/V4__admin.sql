-- Operating Rollcall.

-- Per-namespace switches an operator sets at run time (configuration declares the namespaces).
CREATE TABLE rollcall.namespace_settings (
    namespace     text PRIMARY KEY,
    boot_recovery boolean     NOT NULL DEFAULT true,
    updated_at    timestamptz NOT NULL DEFAULT now()
);

-- Epoch progress for the admin API reads the ledger by epoch.
CREATE INDEX ledger_by_epoch ON rollcall.ledger (epoch_id, outcome);
