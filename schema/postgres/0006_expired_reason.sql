-- Why a signal expired (CONTRACT §16), folded from `signal.expired`'s `reason`: `ttl` (past its
-- expires_at: the sweeper, or a recall that found it so), `forced` (an operator's force-expire),
-- `undeliverable` (a sync push given up) or `removed` (its recipient was removed). NULL while the
-- signal has not expired.
ALTER TABLE signal_queue ADD COLUMN expired_reason varchar(16);
ALTER TABLE signal_history ADD COLUMN expired_reason varchar(16);

-- Rows expired before this migration: their events carry no reason, and the projector reads one
-- from the event's `undeliverable` flag (`ttl` unless given up). A row does not hold that flag,
-- but a give-up comes before the TTL and a TTL expiry at or after it, so the times tell the same
-- answer — except for a removal that found a signal already past its TTL before the sweeper did:
-- `ttl` here, `undeliverable` once `signalbus admin rebuild` recomputes every row from the stream.
UPDATE signal_queue SET expired_reason = CASE WHEN expired_at < expires_at THEN 'undeliverable' ELSE 'ttl' END
    WHERE expired_at IS NOT NULL;
UPDATE signal_history SET expired_reason = CASE WHEN expired_at < expires_at THEN 'undeliverable' ELSE 'ttl' END
    WHERE expired_at IS NOT NULL;
