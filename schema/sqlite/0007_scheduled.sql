-- Scheduled delivery: see schema/postgres.
ALTER TABLE signal_queue ADD COLUMN deliver_at text;
ALTER TABLE signal_queue ADD COLUMN released_at text;
ALTER TABLE signal_history ADD COLUMN deliver_at text;
ALTER TABLE signal_history ADD COLUMN released_at text;

CREATE INDEX ix_signal_queue_deliver_at ON signal_queue (deliver_at, id)
    WHERE deliver_at IS NOT NULL AND released_at IS NULL
      AND delivered_at IS NULL AND expired_at IS NULL AND recalled_at IS NULL;
