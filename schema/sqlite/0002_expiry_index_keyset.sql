-- The sweeper's scan pages through overdue rows by keyset, continuing strictly after the last
-- (expires_at, id) it handled, so rows it already expired but the projector has not yet
-- stamped are never read again (with expires_at alone, ties — a backlog sent in one burst —
-- have no order to continue after). Same name and predicate as before (SPEC-071 §8).
DROP INDEX ix_signal_queue_expires_at;
CREATE INDEX ix_signal_queue_expires_at ON signal_queue (expires_at, id)
    WHERE expires_at IS NOT NULL AND delivered_at IS NULL AND expired_at IS NULL AND recalled_at IS NULL;
