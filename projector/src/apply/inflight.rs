//! `signal_inflight`, PostgreSQL's list of delivered, unacked signal rows (the drain's
//! redelivery candidates): kept in the very statements that stamp `signal_queue`, as
//! data-modifying `WITH` clauses around them, so it costs no round trip and no second read of
//! the rows.
//!
//! Deliberately PostgreSQL only, and deliberately not an index on `signal_queue`: an index that
//! reads `acked_at` would make every ack a full new row version with an entry in each of the
//! table's indexes, where without one an ack is updated in place on its page
//! (schema/postgres/0009_inflight.sql). SQLite has no such rule and keeps the partial index
//! `ix_signal_queue_unacked`, so there these wrappers return the statement as it is.

use crate::sql::Dialect;

/// What the wrapped statements return of each row they wrote: its listing key and the two
/// stamps membership is decided by (delivered, and not acked).
const WRITTEN: &str = "RETURNING q.tenant, q.to_identity, q.id, q.delivered_at, q.acked_at";

/// Lists the delivered, unacked rows of `w` (the `WITH` clause of the written rows).
const LIST: &str = "INSERT INTO signal_inflight (tenant, to_identity, id) \
     SELECT tenant, to_identity, id FROM w WHERE delivered_at IS NOT NULL AND acked_at IS NULL \
     ON CONFLICT DO NOTHING";

/// Unlists the acked rows of `w`.
const UNLIST: &str = "DELETE FROM signal_inflight f USING w \
     WHERE f.tenant = w.tenant AND f.to_identity = w.to_identity AND f.id = w.id AND w.acked_at IS NOT NULL";

/// Whether `d` lists in-flight rows in `signal_inflight` (else a partial index does).
pub(crate) fn listed(d: Dialect) -> bool {
    d == Dialect::Postgres
}

/// The batch's insert of new `signal_queue` rows (aliased `q`, no `RETURNING`) that also lists
/// the delivered, unacked ones. `may_exist`: the insert has a conflict arm that can stamp an
/// existing row, which may then be acked and must leave the list; a plain insert only adds.
pub(crate) fn insert(d: Dialect, insert: String, may_exist: bool) -> String {
    if !listed(d) {
        return insert;
    }
    if may_exist {
        format!("WITH w AS ({insert} {WRITTEN}), unlisted AS ({UNLIST}) {LIST}")
    } else {
        format!("WITH w AS ({insert} {WRITTEN}) {LIST}")
    }
}

/// The batch's update of `signal_queue` rows (aliased `q`, no `RETURNING`) that also keeps the
/// list — an acked row leaves it, a delivered one enters it — and returns the ids it updated.
/// In SQLite: the update with `returning`.
pub(crate) fn update(d: Dialect, update: String, returning: &str) -> String {
    if !listed(d) {
        return format!("{update}{returning}");
    }
    format!("WITH w AS ({update} {WRITTEN}), unlisted AS ({UNLIST}), listed AS ({LIST}) SELECT id FROM w")
}

/// The archiver's delete of `signal_queue` rows (no `RETURNING`) that also unlists them.
pub(crate) fn delete(d: Dialect, delete: String) -> String {
    if !listed(d) {
        return delete;
    }
    format!(
        "WITH w AS ({delete} RETURNING tenant, to_identity, id) \
         DELETE FROM signal_inflight f USING w \
         WHERE f.tenant = w.tenant AND f.to_identity = w.to_identity AND f.id = w.id"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sqlite_statements_pass_through() {
        let s = "UPDATE signal_queue AS q SET acked_at = 1".to_string();
        assert_eq!(update(Dialect::Sqlite, s.clone(), " RETURNING id"), format!("{s} RETURNING id"));
        assert_eq!(insert(Dialect::Sqlite, s.clone(), true), s);
        assert_eq!(delete(Dialect::Sqlite, s.clone()), s);
    }

    #[test]
    fn a_plain_insert_only_lists_and_an_update_both_keeps_the_list_and_returns_its_ids() {
        let plain = insert(Dialect::Postgres, "INSERT INTO signal_queue AS q SELECT 1".into(), false);
        assert!(plain.contains("INSERT INTO signal_inflight") && !plain.contains("DELETE"));
        let upsert = insert(Dialect::Postgres, "INSERT INTO signal_queue AS q SELECT 1".into(), true);
        assert!(upsert.contains("DELETE FROM signal_inflight"));
        let u = update(Dialect::Postgres, "UPDATE signal_queue AS q SET x = 1".into(), " RETURNING q.id");
        assert!(u.contains("DELETE FROM signal_inflight") && u.contains("INSERT INTO signal_inflight"));
        assert!(u.ends_with("SELECT id FROM w"));
    }
}
