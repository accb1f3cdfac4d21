-- Scheduled delivery (CONTRACT §16): a signal sent with `deliver_at` is invisible to its
-- recipient until then; the sweeper appends `signal.released` at that instant, stamped here as
-- `released_at`. Both stay NULL for a signal sent to be seen at once.
ALTER TABLE signal_queue ADD COLUMN deliver_at timestamptz;
ALTER TABLE signal_queue ADD COLUMN released_at timestamptz;
ALTER TABLE signal_history ADD COLUMN deliver_at timestamptz;
ALTER TABLE signal_history ADD COLUMN released_at timestamptz;

-- The sweeper's backstop of releases: pending scheduled rows not released yet, paged by keyset
-- on (deliver_at, id) like the expiry scan. Only the scheduled backlog is in it.
CREATE INDEX ix_signal_queue_deliver_at ON signal_queue (deliver_at, id)
    WHERE deliver_at IS NOT NULL AND released_at IS NULL
      AND delivered_at IS NULL AND expired_at IS NULL AND recalled_at IS NULL;
