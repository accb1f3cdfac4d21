-- Why a signal expired: see schema/postgres (timestamps are fixed-width UTC text, so text order
-- is time order and the backfill compares them alike).
ALTER TABLE signal_queue ADD COLUMN expired_reason text;
ALTER TABLE signal_history ADD COLUMN expired_reason text;

UPDATE signal_queue SET expired_reason = CASE WHEN expired_at < expires_at THEN 'undeliverable' ELSE 'ttl' END
    WHERE expired_at IS NOT NULL;
UPDATE signal_history SET expired_reason = CASE WHEN expired_at < expires_at THEN 'undeliverable' ELSE 'ttl' END
    WHERE expired_at IS NOT NULL;
