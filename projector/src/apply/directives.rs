//! A batch's directives into `directives` and `directive_candidates`: new rows with the same
//! batch's later events already merged in (one write per row), then one `UPDATE` for the
//! patches of rows from earlier batches. Written once for both dialects.
//!
//! Deliberately never one statement per event or per directive, and no transaction handling:
//! `apply_in`'s caller owns the transaction.

use std::collections::{HashMap, HashSet};

use uuid::Uuid;

use crate::batch::{Batch, DirectivePatch, RequestedRow};
use crate::error::Result;
use crate::sql::Dialect;
use crate::sql::{Conn, RowSet};

/// Writes the batch's directive rows, candidates and patches.
pub(super) async fn directives(conn: &mut Conn<'_>, b: &Batch) -> Result<()> {
    let merged = insert(conn, b).await?;
    candidates(conn, &b.directives).await?;
    patch(conn, b, &merged).await
}

async fn insert(conn: &mut Conn<'_>, b: &Batch) -> Result<HashSet<Uuid>> {
    if b.directives.is_empty() {
        return Ok(HashSet::new());
    }
    let d = &b.directives;
    let ids: HashSet<Uuid> = d.iter().map(|r| r.id).collect();
    let patches: HashMap<Uuid, &DirectivePatch> =
        b.directive_patches.iter().filter(|p| ids.contains(&p.id)).map(|p| (p.id, p)).collect();
    let p = |r: &RequestedRow| patches.get(&r.id).copied();
    let declined: Vec<Option<String>> = d.iter().map(|r| p(r).and_then(DirectivePatch::declined_json)).collect();
    let rows = RowSet::new()
        .col("id", d.iter().map(|r| r.id))
        .col("tenant", d.iter().map(|r| r.tenant.as_str()))
        .col("issuer", d.iter().map(|r| r.issuer.as_str()))
        .col("assignee", d.iter().map(|r| r.assignee.as_str()))
        .col("claimed", d.iter().map(|r| p(r).and_then(|p| p.claimed_by.as_deref())))
        .col("dt", d.iter().map(|r| r.directive_type.as_str()))
        .col("params", d.iter().map(|r| r.params.as_str()))
        .col("status", d.iter().map(|r| p(r).and_then(|p| p.status).unwrap_or("requested")))
        .col("ik", d.iter().map(|r| r.idempotency_key.as_str()))
        .col("corr", d.iter().map(|r| r.correlation_id.as_deref()))
        .col("ca", d.iter().map(|r| r.created_at))
        .col("dl", d.iter().map(|r| r.deadline))
        .col("sa", d.iter().map(|r| p(r).and_then(|p| p.started_at)))
        .col("fa", d.iter().map(|r| p(r).and_then(|p| p.finished_at)))
        .col("progress", d.iter().map(|r| p(r).and_then(|p| p.progress.as_deref())))
        .col("result", d.iter().map(|r| p(r).and_then(|p| p.result.as_deref())))
        .col("failure", d.iter().map(|r| p(r).and_then(|p| p.failure.as_deref())))
        .col("reason", d.iter().map(|r| p(r).and_then(|p| p.reason.as_deref())))
        .col("declined", declined.iter().map(|x| x.as_deref().unwrap_or("[]")))
        .col("seq", d.iter().map(|r| p(r).map_or(r.seq, |p| p.seq.max(r.seq))));
    let dialect = conn.dialect();
    let j = |c: &str| dialect.json(c);
    let mut args = conn.args();
    let src = args.rows(rows);
    // A create is the first event of its subject and the checkpoint compare-and-set lets each
    // batch in once, so a conflict cannot happen; `DO NOTHING` keeps a replay harmless anyway.
    let sql = format!(
        "INSERT INTO directives (directive_id, tenant, issuer, assignee, claimed_by, directive_type, params, status, \
           idempotency_key, correlation_id, created_at, deadline, started_at, finished_at, progress, result, failure, \
           reason, declined_by, last_event_seq) \
         SELECT id, tenant, issuer, assignee, claimed, dt, {params}, status, ik, corr, ca, dl, sa, fa, {progress}, \
           {result}, {failure}, reason, {declined}, seq FROM {src} WHERE true \
         ON CONFLICT (directive_id) DO NOTHING",
        params = j("params"),
        progress = j("progress"),
        result = j("result"),
        failure = j("failure"),
        declined = j("declined"),
    );
    conn.execute(&sql, args).await?;
    Ok(ids)
}

async fn candidates(conn: &mut Conn<'_>, d: &[RequestedRow]) -> Result<()> {
    let pairs: Vec<(&RequestedRow, &str)> =
        d.iter().flat_map(|r| r.candidates.iter().map(move |c| (r, c.as_str()))).collect();
    if pairs.is_empty() {
        return Ok(());
    }
    let rows = RowSet::new()
        .col("id", pairs.iter().map(|(r, _)| r.id))
        .col("tenant", pairs.iter().map(|(r, _)| r.tenant.as_str()))
        .col("identity", pairs.iter().map(|(_, c)| *c));
    let mut args = conn.args();
    let sql = format!(
        "INSERT INTO directive_candidates (directive_id, tenant, identity) SELECT id, tenant, identity FROM {} \
         WHERE true ON CONFLICT (directive_id, identity) DO NOTHING",
        args.rows(rows)
    );
    conn.execute(&sql, args).await?;
    Ok(())
}

/// `declined_by` with the batch's declines `u.declined` (a JSON array, or NULL) appended.
fn append_declined(d: Dialect) -> &'static str {
    match d {
        Dialect::Postgres => {
            "CASE WHEN u.declined IS NULL THEN q.declined_by ELSE q.declined_by || u.declined::jsonb END"
        }
        Dialect::Sqlite => {
            "CASE WHEN u.declined IS NULL THEN q.declined_by ELSE (SELECT json_group_array(value) FROM ( \
               SELECT 0 AS part, key, value FROM json_each(q.declined_by) \
               UNION ALL SELECT 1 AS part, key, value FROM json_each(u.declined) ORDER BY part, key)) END"
        }
    }
}

/// Patches rows of earlier batches (`merged`: the ids `insert` wrote with their patches).
async fn patch(conn: &mut Conn<'_>, b: &Batch, merged: &HashSet<Uuid>) -> Result<()> {
    let p: Vec<&DirectivePatch> = b.directive_patches.iter().filter(|p| !merged.contains(&p.id)).collect();
    if p.is_empty() {
        return Ok(());
    }
    let declined: Vec<Option<String>> = p.iter().map(|p| p.declined_json()).collect();
    let rows = RowSet::new()
        .col("id", p.iter().map(|r| r.id))
        .col("status", p.iter().map(|r| r.status))
        .col("claimed", p.iter().map(|r| r.claimed_by.as_deref()))
        .col("sa", p.iter().map(|r| r.started_at))
        .col("fa", p.iter().map(|r| r.finished_at))
        .col("progress", p.iter().map(|r| r.progress.as_deref()))
        .col("result", p.iter().map(|r| r.result.as_deref()))
        .col("failure", p.iter().map(|r| r.failure.as_deref()))
        .col("reason", p.iter().map(|r| r.reason.as_deref()))
        .col("declined", declined.iter().map(|x| x.as_deref()))
        .col("seq", p.iter().map(|r| r.seq));
    let d = conn.dialect();
    let mut args = conn.args();
    let src = args.rows(rows);
    let sql = format!(
        "UPDATE directives AS q SET \
           status = COALESCE(u.status, q.status), \
           claimed_by = COALESCE(q.claimed_by, u.claimed), \
           started_at = COALESCE(q.started_at, u.sa), \
           finished_at = COALESCE(q.finished_at, u.fa), \
           progress = COALESCE({progress}, q.progress), \
           result = COALESCE({result}, q.result), \
           failure = COALESCE({failure}, q.failure), \
           reason = COALESCE(u.reason, q.reason), \
           declined_by = {declined}, \
           last_event_seq = {greatest}(q.last_event_seq, u.seq) \
         FROM {src} WHERE q.directive_id = u.id",
        progress = d.json("u.progress"),
        result = d.json("u.result"),
        failure = d.json("u.failure"),
        declined = append_declined(d),
        greatest = d.greatest(),
    );
    conn.execute(&sql, args).await?;
    Ok(())
}
