-- Listing indexes keyed by one 64-bit hash of (tenant, identity) instead of the two texts.
--
-- Every send writes an entry in both listing indexes, and unlike the primary key (UUID v7 ids,
-- appended at the index's right edge) those entries land in the middle of the index, one
-- descent from the root each. On a 2-core host the two cost about a third of the projector's
-- insert of a pushed send (docs/performance.md, 2026-12-03). Keyed by `hashtextextended(tenant || U+001F
-- || identity, 0)` the entries are 32 bytes of fixed width instead of two texts compared under
-- the database's collation: the same descent, cheaper comparisons and fewer pages.
--
-- The listings ask for the same hash of their caller and recheck `tenant` and the identity
-- column on the row, so a collision of two hashes costs rows read, never a wrong answer
-- (`Dialect::identity_is`, projector/src/sql/dialect.rs). Embedded mode (SQLite) keeps the text keys.
DROP INDEX ix_signal_queue_from;
DROP INDEX ix_signal_queue_to;
CREATE INDEX ix_signal_queue_from ON signal_queue
    (hashtextextended(tenant || chr(31) || from_identity, 0), created_at DESC, id DESC);
CREATE INDEX ix_signal_queue_to ON signal_queue
    (hashtextextended(tenant || chr(31) || to_identity, 0), created_at DESC, id DESC);

-- The archive keeps the same shape, so one listing statement reads both tables by the same key.
DROP INDEX ix_signal_history_from;
DROP INDEX ix_signal_history_to;
CREATE INDEX ix_signal_history_from ON signal_history
    (hashtextextended(tenant || chr(31) || from_identity, 0), created_at DESC, id DESC);
CREATE INDEX ix_signal_history_to ON signal_history
    (hashtextextended(tenant || chr(31) || to_identity, 0), created_at DESC, id DESC);
