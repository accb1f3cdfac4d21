//! One batch into PostgreSQL: the checkpoint compare-and-set, then one multi-row `UNNEST`
//! statement per row set, then the recipient state of the identities the batch touched.
//!
//! Deliberately never one statement per event, and never opens or commits the transaction: the
//! caller owns it (the live projector in the live schema, the rebuild in its scratch schema).

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use chrono::{DateTime, Utc};
use sqlx::PgConnection;
use uuid::Uuid;

use crate::batch::{Batch, SentRow, SignalPatch, PROJECTION};
use crate::error::Result;

/// Writes `batch` if the checkpoint is `expected`; `Ok(false)` (nothing written) otherwise.
pub(crate) async fn apply_in(
    conn: &mut PgConnection,
    b: &Batch,
    expected: u64,
    now: DateTime<Utc>,
    stale_after: Duration,
) -> Result<bool> {
    // The compare-and-set goes first: a batch that was already applied stops here, before any
    // row is touched, which is what makes a redelivered batch change nothing.
    let cas = sqlx::query(
        "UPDATE projection_checkpoints SET last_seq = $1, updated_at = now() \
         WHERE projection = $2 AND last_seq = $3",
    )
    .bind(b.to_seq as i64)
    .bind(PROJECTION)
    .bind(expected as i64)
    .execute(&mut *conn)
    .await?;
    if cas.rows_affected() != 1 {
        return Ok(false);
    }
    let merged = insert_sent(conn, b).await?;
    patch_signals(conn, b, &merged).await?;
    remove_agents(conn, b).await?;
    insert_agents(conn, b).await?;
    sessions(conn, b).await?;
    facts(conn, b).await?;
    dead_letters(conn, b).await?;
    if !b.touched.is_empty() {
        let tenants: Vec<&str> = b.touched.iter().map(|t| t.0.as_str()).collect();
        let identities: Vec<&str> = b.touched.iter().map(|t| t.1.as_str()).collect();
        let ids = "SELECT DISTINCT tenant, identity FROM UNNEST($2::text[], $3::text[]) AS t(tenant, identity)";
        sqlx::query(&refresh_sql(ids))
            .bind(threshold(now, stale_after))
            .bind(&tenants)
            .bind(&identities)
            .execute(&mut *conn)
            .await?;
    }
    Ok(true)
}

fn threshold(now: DateTime<Utc>, stale_after: Duration) -> DateTime<Utc> {
    now - chrono::Duration::from_std(stale_after).unwrap_or(chrono::Duration::seconds(60))
}

/// Recomputes `recipient_state` for the identities `ids` selects. `$1` is the stale threshold
/// (a heartbeat newer than it counts as live). Only registered identities get a row: the
/// sessions of a removed agent close after its removal, and must not bring its row back. Rows are only written when they change, so the
/// once-a-second refresh costs no writes in steady state.
fn refresh_sql(ids: &str) -> String {
    format!(
        "WITH ids AS ({ids}), computed AS ( \
           SELECT i.tenant, i.identity, \
             count(s.session_id) FILTER (WHERE s.released_at IS NULL)::int AS live, \
             max(s.last_heartbeat) FILTER (WHERE s.released_at IS NULL) AS live_hb, \
             max(s.last_heartbeat) AS last_hb \
           FROM ids i JOIN agents a ON a.tenant = i.tenant AND a.identity = i.identity \
           LEFT JOIN agent_sessions s ON s.tenant = i.tenant AND s.identity = i.identity \
           GROUP BY i.tenant, i.identity) \
         INSERT INTO recipient_state (tenant, identity, state, live_sessions, last_heartbeat) \
         SELECT tenant, identity, \
           CASE WHEN live = 0 THEN 'not_available_offline' \
                WHEN live_hb > $1 THEN 'available' ELSE 'not_available_stale' END, \
           live, last_hb FROM computed \
         ON CONFLICT (tenant, identity) DO UPDATE SET state = EXCLUDED.state, \
           live_sessions = EXCLUDED.live_sessions, last_heartbeat = EXCLUDED.last_heartbeat \
         WHERE (recipient_state.state, recipient_state.live_sessions, recipient_state.last_heartbeat) \
           IS DISTINCT FROM (EXCLUDED.state, EXCLUDED.live_sessions, EXCLUDED.last_heartbeat)"
    )
}

/// The clock-driven refresh: every identity with an open session.
pub(crate) async fn refresh_open(conn: &mut PgConnection, now: DateTime<Utc>, stale_after: Duration) -> Result<u64> {
    let ids = "SELECT DISTINCT tenant, identity FROM agent_sessions WHERE released_at IS NULL \
               UNION SELECT tenant, identity FROM recipient_state WHERE live_sessions > 0";
    let r = sqlx::query(&refresh_sql(ids)).bind(threshold(now, stale_after)).execute(conn).await?;
    Ok(r.rows_affected())
}

/// Inserts the batch's new signal rows with whatever later events of the same batch did to
/// them already stamped in, so a signal sent, delivered and acked within one batch is written
/// once (an insert followed by an update writes the row, and every index over it, twice).
/// Patches of rows sent in earlier batches are left to `patch_signals`.
async fn insert_sent<'b>(conn: &mut PgConnection, b: &'b Batch) -> Result<HashSet<Uuid>> {
    if b.sent.is_empty() {
        return Ok(HashSet::new());
    }
    let s = &b.sent;
    let new_ids: HashSet<Uuid> = s.iter().map(|r| r.id).collect();
    let merged: HashMap<Uuid, &'b SignalPatch> =
        b.signal_patches.iter().filter(|p| new_ids.contains(&p.id)).map(|p| (p.id, p)).collect();
    let patch = |r: &SentRow| merged.get(&r.id).copied();
    // A fresh row under `patch_signals`' rules: every stamp is the patch's, the session only
    // with a delivery path, the sequence the newer of the send and the patch.
    // The conflict arm applies the same rules to an existing row (a send seen twice cannot
    // happen past the checkpoint compare-and-set; it is there so a patch is never dropped).
    // It only fires when the batch stamped something, which is exactly when a patch exists.
    sqlx::query(
        "INSERT INTO signal_queue AS q (id, tenant, from_identity, to_identity, signal_type, category, priority, \
           payload, delivery_class, recipient_state, publish_path, correlation_id, created_at, expires_at, \
           delivered_at, delivered_via, resolved_to_session, acked_at, expired_at, recalled_at, last_event_seq) \
         SELECT id, tenant, f, t, st, cat, pri, payload::jsonb, dc, rs, pp, corr, ca, ea, \
           da, via, CASE WHEN via IS NOT NULL THEN sess END, aa, xa, ra, seq \
         FROM UNNEST($1::uuid[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::int2[], \
           $8::text[], $9::text[], $10::text[], $11::text[], $12::text[], $13::timestamptz[], \
           $14::timestamptz[], $15::int8[], $16::timestamptz[], $17::text[], $18::uuid[], $19::timestamptz[], \
           $20::timestamptz[], $21::timestamptz[]) \
           AS u(id, tenant, f, t, st, cat, pri, payload, dc, rs, pp, corr, ca, ea, seq, da, via, sess, aa, xa, ra) \
         ON CONFLICT (id) DO UPDATE SET \
           delivered_at = COALESCE(q.delivered_at, EXCLUDED.delivered_at), \
           delivered_via = COALESCE(EXCLUDED.delivered_via, q.delivered_via), \
           resolved_to_session = CASE WHEN EXCLUDED.delivered_via IS NOT NULL THEN EXCLUDED.resolved_to_session \
             ELSE q.resolved_to_session END, \
           acked_at = COALESCE(q.acked_at, EXCLUDED.acked_at), \
           expired_at = COALESCE(q.expired_at, EXCLUDED.expired_at), \
           recalled_at = COALESCE(q.recalled_at, EXCLUDED.recalled_at), \
           last_event_seq = GREATEST(q.last_event_seq, EXCLUDED.last_event_seq) \
         WHERE num_nonnulls(EXCLUDED.delivered_at, EXCLUDED.acked_at, EXCLUDED.expired_at, EXCLUDED.recalled_at) > 0",
    )
    .bind(s.iter().map(|r| r.id).collect::<Vec<Uuid>>())
    .bind(s.iter().map(|r| r.tenant.as_str()).collect::<Vec<_>>())
    .bind(s.iter().map(|r| r.from.as_str()).collect::<Vec<_>>())
    .bind(s.iter().map(|r| r.to.as_str()).collect::<Vec<_>>())
    .bind(s.iter().map(|r| r.signal_type.as_str()).collect::<Vec<_>>())
    .bind(s.iter().map(|r| r.category.as_str()).collect::<Vec<_>>())
    .bind(s.iter().map(|r| r.priority).collect::<Vec<i16>>())
    .bind(s.iter().map(|r| r.payload.as_str()).collect::<Vec<_>>())
    .bind(s.iter().map(|r| r.delivery_class.as_str()).collect::<Vec<_>>())
    .bind(s.iter().map(|r| r.recipient_state.as_str()).collect::<Vec<_>>())
    .bind(s.iter().map(|r| r.publish_path.as_str()).collect::<Vec<_>>())
    .bind(s.iter().map(|r| r.correlation_id.as_deref()).collect::<Vec<Option<&str>>>())
    .bind(s.iter().map(|r| r.created_at).collect::<Vec<_>>())
    .bind(s.iter().map(|r| r.expires_at).collect::<Vec<_>>())
    .bind(s.iter().map(|r| patch(r).map_or(r.seq, |p| p.seq.max(r.seq))).collect::<Vec<i64>>())
    .bind(s.iter().map(|r| patch(r).and_then(|p| p.delivered_at)).collect::<Vec<_>>())
    .bind(s.iter().map(|r| patch(r).and_then(|p| p.via.as_deref())).collect::<Vec<Option<&str>>>())
    .bind(s.iter().map(|r| patch(r).and_then(|p| p.session)).collect::<Vec<Option<Uuid>>>())
    .bind(s.iter().map(|r| patch(r).and_then(|p| p.acked_at)).collect::<Vec<_>>())
    .bind(s.iter().map(|r| patch(r).and_then(|p| p.expired_at)).collect::<Vec<_>>())
    .bind(s.iter().map(|r| patch(r).and_then(|p| p.recalled_at)).collect::<Vec<_>>())
    .execute(conn)
    .await?;
    Ok(new_ids)
}

/// Stamps deliveries, acks, expiries and recalls on rows of earlier batches (`merged`: the ids
/// `insert_sent` already wrote with their stamps). Runs against the hot table and the history,
/// so a late event for an archived row (an ack after archiving) still lands.
async fn patch_signals(conn: &mut PgConnection, b: &Batch, merged: &HashSet<Uuid>) -> Result<()> {
    let p: Vec<&SignalPatch> = b.signal_patches.iter().filter(|p| !merged.contains(&p.id)).collect();
    if p.is_empty() {
        return Ok(());
    }
    let ids: Vec<Uuid> = p.iter().map(|r| r.id).collect();
    let delivered: Vec<Option<DateTime<Utc>>> = p.iter().map(|r| r.delivered_at).collect();
    let via: Vec<Option<&str>> = p.iter().map(|r| r.via.as_deref()).collect();
    let session: Vec<Option<Uuid>> = p.iter().map(|r| r.session).collect();
    let acked: Vec<Option<DateTime<Utc>>> = p.iter().map(|r| r.acked_at).collect();
    let expired: Vec<Option<DateTime<Utc>>> = p.iter().map(|r| r.expired_at).collect();
    let recalled: Vec<Option<DateTime<Utc>>> = p.iter().map(|r| r.recalled_at).collect();
    let seq: Vec<i64> = p.iter().map(|r| r.seq).collect();
    for table in ["signal_queue", "signal_history"] {
        let sql = format!(
            "UPDATE {table} q SET \
               delivered_at = COALESCE(q.delivered_at, u.delivered_at), \
               delivered_via = COALESCE(u.via, q.delivered_via), \
               resolved_to_session = CASE WHEN u.via IS NOT NULL THEN u.session ELSE q.resolved_to_session END, \
               acked_at = COALESCE(q.acked_at, u.acked_at), \
               expired_at = COALESCE(q.expired_at, u.expired_at), \
               recalled_at = COALESCE(q.recalled_at, u.recalled_at), \
               last_event_seq = GREATEST(q.last_event_seq, u.seq) \
             FROM UNNEST($1::uuid[], $2::timestamptz[], $3::text[], $4::uuid[], $5::timestamptz[], \
               $6::timestamptz[], $7::timestamptz[], $8::int8[]) \
               AS u(id, delivered_at, via, session, acked_at, expired_at, recalled_at, seq) \
             WHERE q.id = u.id"
        );
        sqlx::query(&sql)
            .bind(&ids)
            .bind(&delivered)
            .bind(&via)
            .bind(&session)
            .bind(&acked)
            .bind(&expired)
            .bind(&recalled)
            .bind(&seq)
            .execute(&mut *conn)
            .await?;
    }
    Ok(())
}

/// Deletes the `agents` and `recipient_state` rows of the identities the batch removed; their
/// sessions and signals stay, as history.
async fn remove_agents(conn: &mut PgConnection, b: &Batch) -> Result<()> {
    if b.removed_agents.is_empty() {
        return Ok(());
    }
    let tenants: Vec<&str> = b.removed_agents.iter().map(|k| k.0.as_str()).collect();
    let identities: Vec<&str> = b.removed_agents.iter().map(|k| k.1.as_str()).collect();
    for table in ["agents", "recipient_state"] {
        let sql = format!(
            "DELETE FROM {table} x USING UNNEST($1::text[], $2::text[]) AS u(tenant, identity) \
             WHERE x.tenant = u.tenant AND x.identity = u.identity"
        );
        sqlx::query(&sql).bind(&tenants).bind(&identities).execute(&mut *conn).await?;
    }
    Ok(())
}

async fn insert_agents(conn: &mut PgConnection, b: &Batch) -> Result<()> {
    if b.agents.is_empty() {
        return Ok(());
    }
    let a = &b.agents;
    sqlx::query(
        "INSERT INTO agents (tenant, identity, kind, registered_at) \
         SELECT * FROM UNNEST($1::text[], $2::text[], $3::text[], $4::timestamptz[]) \
         ON CONFLICT (tenant, identity) DO NOTHING",
    )
    .bind(a.iter().map(|r| r.tenant.as_str()).collect::<Vec<_>>())
    .bind(a.iter().map(|r| r.identity.as_str()).collect::<Vec<_>>())
    .bind(a.iter().map(|r| r.kind.as_str()).collect::<Vec<_>>())
    .bind(a.iter().map(|r| r.registered_at).collect::<Vec<_>>())
    .execute(conn)
    .await?;
    Ok(())
}

async fn sessions(conn: &mut PgConnection, b: &Batch) -> Result<()> {
    if !b.sessions.is_empty() {
        let s = &b.sessions;
        sqlx::query(
            "INSERT INTO agent_sessions (session_id, tenant, identity, kind, surface, node, opened_at, last_heartbeat) \
             SELECT id, tenant, identity, kind, surface, node, at, at \
             FROM UNNEST($1::uuid[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::timestamptz[]) \
               AS u(id, tenant, identity, kind, surface, node, at) \
             ON CONFLICT (session_id) DO NOTHING",
        )
        .bind(s.iter().map(|r| r.session_id).collect::<Vec<_>>())
        .bind(s.iter().map(|r| r.tenant.as_str()).collect::<Vec<_>>())
        .bind(s.iter().map(|r| r.identity.as_str()).collect::<Vec<_>>())
        .bind(s.iter().map(|r| r.kind.as_str()).collect::<Vec<_>>())
        .bind(s.iter().map(|r| r.surface.as_str()).collect::<Vec<_>>())
        .bind(s.iter().map(|r| r.node.as_str()).collect::<Vec<_>>())
        .bind(s.iter().map(|r| r.opened_at).collect::<Vec<_>>())
        .execute(&mut *conn)
        .await?;
    }
    if !b.session_patches.is_empty() {
        let p = &b.session_patches;
        sqlx::query(
            "UPDATE agent_sessions s SET \
               last_heartbeat = GREATEST(s.last_heartbeat, u.hb), \
               released_at = COALESCE(s.released_at, u.released) \
             FROM UNNEST($1::uuid[], $2::timestamptz[], $3::timestamptz[]) AS u(id, hb, released) \
             WHERE s.session_id = u.id",
        )
        .bind(p.iter().map(|r| r.session_id).collect::<Vec<_>>())
        .bind(p.iter().map(|r| r.heartbeat).collect::<Vec<_>>())
        .bind(p.iter().map(|r| r.released_at).collect::<Vec<_>>())
        .execute(&mut *conn)
        .await?;
    }
    Ok(())
}

async fn facts(conn: &mut PgConnection, b: &Batch) -> Result<()> {
    if b.facts.is_empty() {
        return Ok(());
    }
    let f = &b.facts;
    sqlx::query(
        "INSERT INTO plugin_facts (tenant, plugin_name, seq, fact_type, fact, recorded_by, created_at) \
         SELECT tenant, plugin, seq, ft, fact::jsonb, rb, at \
         FROM UNNEST($1::text[], $2::text[], $3::int8[], $4::text[], $5::text[], $6::text[], $7::timestamptz[]) \
           AS u(tenant, plugin, seq, ft, fact, rb, at) \
         ON CONFLICT (tenant, plugin_name, seq) DO NOTHING",
    )
    .bind(f.iter().map(|r| r.tenant.as_str()).collect::<Vec<_>>())
    .bind(f.iter().map(|r| r.plugin.as_str()).collect::<Vec<_>>())
    .bind(f.iter().map(|r| r.seq).collect::<Vec<_>>())
    .bind(f.iter().map(|r| r.fact_type.as_str()).collect::<Vec<_>>())
    .bind(f.iter().map(|r| r.fact.as_str()).collect::<Vec<_>>())
    .bind(f.iter().map(|r| r.recorded_by.as_str()).collect::<Vec<_>>())
    .bind(f.iter().map(|r| r.created_at).collect::<Vec<_>>())
    .execute(&mut *conn)
    .await?;
    let s = &b.plugin_states;
    // Only a newer fact replaces the compatibility view (facts can arrive in any batch split).
    sqlx::query(
        "INSERT INTO plugin_state (tenant, plugin_name, state, seq, updated_at) \
         SELECT tenant, plugin, fact::jsonb, seq, at \
         FROM UNNEST($1::text[], $2::text[], $3::text[], $4::int8[], $5::timestamptz[]) \
           AS u(tenant, plugin, fact, seq, at) \
         ON CONFLICT (tenant, plugin_name) DO UPDATE SET state = EXCLUDED.state, seq = EXCLUDED.seq, \
           updated_at = EXCLUDED.updated_at WHERE plugin_state.seq < EXCLUDED.seq",
    )
    .bind(s.iter().map(|r| r.tenant.as_str()).collect::<Vec<_>>())
    .bind(s.iter().map(|r| r.plugin.as_str()).collect::<Vec<_>>())
    .bind(s.iter().map(|r| r.fact.as_str()).collect::<Vec<_>>())
    .bind(s.iter().map(|r| r.seq).collect::<Vec<_>>())
    .bind(s.iter().map(|r| r.created_at).collect::<Vec<_>>())
    .execute(conn)
    .await?;
    Ok(())
}

/// Records the batch's dead letters (the checkpoint compare-and-set already moved past them).
async fn dead_letters(conn: &mut PgConnection, b: &Batch) -> Result<()> {
    if b.dead_letters.is_empty() {
        return Ok(());
    }
    let d = &b.dead_letters;
    sqlx::query(
        "INSERT INTO projection_dead_letters (projection, seq, subject, event_type, reason, recorded_at) \
         SELECT $1, seq, subject, et, reason, now() \
         FROM UNNEST($2::int8[], $3::text[], $4::text[], $5::text[]) AS u(seq, subject, et, reason) \
         ON CONFLICT (projection, seq) DO NOTHING",
    )
    .bind(PROJECTION)
    .bind(d.iter().map(|r| r.seq as i64).collect::<Vec<_>>())
    .bind(d.iter().map(|r| r.subject.as_str()).collect::<Vec<_>>())
    .bind(d.iter().map(|r| r.event_type.as_str()).collect::<Vec<_>>())
    .bind(d.iter().map(|r| r.reason.as_str()).collect::<Vec<_>>())
    .execute(conn)
    .await?;
    Ok(())
}
