-- Acks that touch no index (PostgreSQL's heap-only tuple updates). An ack stamps `acked_at`
-- and `last_event_seq`; PostgreSQL updates a row in place on its page, without a new entry in
-- any index, only when no index reads a column the update changes and the page has room for
-- the new version. `ix_signal_queue_unacked` read `acked_at` in its predicate, so each ack wrote
-- three index entries (the key, `_from`, `_to`): a pushed signal cost seven B-tree inserts, four
-- at its send and three at its ack (docs/performance.md).
--
-- The drain's redelivery half needs a recipient's delivered, unacked rows; they are now listed
-- in `signal_inflight`, which the projector keeps in the same statements that stamp the rows
-- (`projector/src/apply/inflight.rs`): one entry per hot signal with `delivered_at` and no
-- `acked_at`, removed when the row is acked or archived. Derived like every read model (a
-- rebuild writes it again) and not one of the contract's tables; embedded mode (SQLite, whose
-- updates have no such rule) keeps the partial index.
CREATE TABLE signal_inflight (
    tenant      text NOT NULL,
    to_identity text NOT NULL,
    id          uuid NOT NULL,
    PRIMARY KEY (tenant, to_identity, id)
);

INSERT INTO signal_inflight (tenant, to_identity, id)
    SELECT tenant, to_identity, id FROM signal_queue WHERE delivered_at IS NOT NULL AND acked_at IS NULL;

DROP INDEX ix_signal_queue_unacked;

-- Room on each page for one more version of every row inserted there, so the one update most
-- rows get after their insert (the ack of a pushed send) stays on the page. Pages already
-- written keep their fill; new ones take this. The hot table takes about twice the pages of
-- its live rows (settled rows leave it after `--archive-after`, 24 h by default).
ALTER TABLE signal_queue SET (fillfactor = 50);
