//! One batch into the read models, in either dialect: the checkpoint compare-and-set, then one
//! multi-row statement per row set (its rows read from a `RowSet`: PostgreSQL `UNNEST`, SQLite
//! `json_each`), then the recipient state of the identities the batch touched.
//!
//! Deliberately never one statement per event, and never opens or commits the transaction: the
//! caller owns it and the writer lock it holds (`Backend::apply` for the live projector, a
//! rebuild for its scratch tables).

use foldhash::{HashMap, HashSet};
use std::time::Duration;

use chrono::{DateTime, Utc};
use uuid::Uuid;

use crate::batch::{Batch, FactRow, SentRow, SignalPatch, PROJECTION};
use crate::error::Result;
use crate::sql::{Args, Conn, Dialect, RowSet};

mod directives;
pub(crate) mod inflight;

/// Writes `batch` if the checkpoint is `expected`; `Ok(false)` (nothing written) otherwise.
pub(crate) async fn apply_in(
    conn: &mut Conn<'_>,
    b: &Batch,
    expected: u64,
    now: DateTime<Utc>,
    stale_after: Duration,
) -> Result<bool> {
    // The compare-and-set goes first: a batch that was already applied stops here, before any
    // row is touched, which is what makes a redelivered batch change nothing.
    let mut args = conn.args().bind(b.to_seq as i64).bind(PROJECTION).bind(expected as i64);
    let now_sql = conn.dialect().now(&mut args, now);
    let sql = format!(
        "UPDATE projection_checkpoints SET last_seq = $1, updated_at = {now_sql} \
         WHERE projection = $2 AND last_seq = $3"
    );
    if conn.execute(&sql, args).await? != 1 {
        return Ok(false);
    }
    let merged = insert_sent(conn, b).await?;
    patch_signals(conn, b, &merged).await?;
    remove_agents(conn, b).await?;
    insert_agents(conn, b).await?;
    sessions(conn, b).await?;
    facts(conn, b).await?;
    directives::directives(conn, b).await?;
    crate::apply_groups::groups(conn, b).await?;
    dead_letters(conn, b, now).await?;
    if !b.touched.is_empty() {
        let mut args = conn.args();
        let threshold = args.arg(threshold(now, stale_after));
        let rows = RowSet::new()
            .col("tenant", b.touched.iter().map(|t| t.0.as_str()))
            .col("identity", b.touched.iter().map(|t| t.1.as_str()));
        let ids = format!("SELECT DISTINCT tenant, identity FROM {}", args.rows(rows));
        conn.execute(&refresh_sql(&ids, &threshold), args).await?;
    }
    Ok(true)
}

/// The stale threshold of `bus::presence`, whose rule the `CASE` below spells in SQL (the
/// projector's tests hold the two to the same answers).
fn threshold(now: DateTime<Utc>, stale_after: Duration) -> DateTime<Utc> {
    bus::presence::stale_threshold(now, stale_after)
}

/// Recomputes `recipient_state` for the identities `ids` selects; `threshold` is the stale
/// threshold's placeholder (a heartbeat newer than it counts as live). Only registered
/// identities get a row: the sessions of a removed agent close after its removal, and must not
/// bring its row back. Rows are only written when they change, so the once-a-second refresh
/// costs no writes in steady state.
fn refresh_sql(ids: &str, threshold: &str) -> String {
    format!(
        "WITH ids AS ({ids}), computed AS ( \
           SELECT i.tenant AS tenant, i.identity AS identity, \
             CAST(count(s.session_id) FILTER (WHERE s.released_at IS NULL) AS INTEGER) AS live, \
             max(s.last_heartbeat) FILTER (WHERE s.released_at IS NULL) AS live_hb, \
             max(s.last_heartbeat) AS last_hb \
           FROM ids i JOIN agents a ON a.tenant = i.tenant AND a.identity = i.identity \
           LEFT JOIN agent_sessions s ON s.tenant = i.tenant AND s.identity = i.identity \
           GROUP BY i.tenant, i.identity) \
         INSERT INTO recipient_state (tenant, identity, state, live_sessions, last_heartbeat) \
         SELECT tenant, identity, \
           CASE WHEN live = 0 THEN 'not_available_offline' \
                WHEN live_hb > {threshold} THEN 'available' ELSE 'not_available_stale' END, \
           live, last_hb FROM computed WHERE true \
         ON CONFLICT (tenant, identity) DO UPDATE SET state = EXCLUDED.state, \
           live_sessions = EXCLUDED.live_sessions, last_heartbeat = EXCLUDED.last_heartbeat \
         WHERE recipient_state.state IS DISTINCT FROM EXCLUDED.state \
            OR recipient_state.live_sessions IS DISTINCT FROM EXCLUDED.live_sessions \
            OR recipient_state.last_heartbeat IS DISTINCT FROM EXCLUDED.last_heartbeat"
    )
}

/// The clock-driven refresh: every identity with an open session (only those can cross the
/// stale threshold by the clock alone), and every one still counted live.
pub(crate) async fn refresh_open(conn: &mut Conn<'_>, now: DateTime<Utc>, stale_after: Duration) -> Result<u64> {
    let ids = "SELECT DISTINCT tenant, identity FROM agent_sessions WHERE released_at IS NULL \
               UNION SELECT tenant, identity FROM recipient_state WHERE live_sessions > 0";
    let args = conn.args().bind(threshold(now, stale_after));
    conn.execute(&refresh_sql(ids, "$1"), args).await
}

/// Inserts the batch's new signal rows with whatever later events of the same batch did to
/// them already stamped in, so a signal sent, delivered and acked within one batch is written
/// once (an insert followed by an update writes the row, and every index over it, twice).
/// Patches of rows sent in earlier batches are left to `patch_signals`.
async fn insert_sent<'b>(conn: &mut Conn<'_>, b: &'b Batch) -> Result<HashSet<Uuid>> {
    if b.sent.is_empty() {
        return Ok(HashSet::default());
    }
    let s = &b.sent;
    let new_ids: HashSet<Uuid> = s.iter().map(|r| r.id).collect();
    let merged: HashMap<Uuid, &'b SignalPatch> =
        b.signal_patches.iter().filter(|p| new_ids.contains(&p.id)).map(|p| (p.id, p)).collect();
    let patch = |r: &SentRow| merged.get(&r.id).copied();
    let rows = RowSet::new()
        .col("id", s.iter().map(|r| r.id))
        .col("tenant", s.iter().map(|r| r.tenant.as_str()))
        .col("f", s.iter().map(|r| r.from.as_str()))
        .col("t", s.iter().map(|r| r.to.as_str()))
        .col("st", s.iter().map(|r| r.signal_type.as_str()))
        .col("cat", s.iter().map(|r| r.category.as_str()))
        .col("pri", s.iter().map(|r| r.priority))
        .col("payload", s.iter().map(|r| r.payload.as_str()))
        .col("dc", s.iter().map(|r| r.delivery_class.as_str()))
        .col("rs", s.iter().map(|r| r.recipient_state.as_str()))
        .col("pp", s.iter().map(|r| r.publish_path.as_str()))
        .col("corr", s.iter().map(|r| r.correlation_id.as_deref()))
        .col("ca", s.iter().map(|r| r.created_at))
        .col("ea", s.iter().map(|r| r.expires_at))
        .col("fan", s.iter().map(|r| r.fanout_id))
        .col("dla", s.iter().map(|r| r.deliver_at))
        .col("seq", s.iter().map(|r| patch(r).map_or(r.seq, |p| p.seq.max(r.seq))))
        .col("da", s.iter().map(|r| patch(r).and_then(|p| p.delivered_at)))
        .col("via", s.iter().map(|r| patch(r).and_then(|p| p.via.as_deref())))
        .col("sess", s.iter().map(|r| patch(r).and_then(|p| p.session)))
        .col("aa", s.iter().map(|r| patch(r).and_then(|p| p.acked_at)))
        .col("xa", s.iter().map(|r| patch(r).and_then(|p| p.expired_at)))
        .col("xr", s.iter().map(|r| patch(r).and_then(|p| p.expired_reason)))
        .col("ra", s.iter().map(|r| patch(r).and_then(|p| p.recalled_at)))
        .col("rla", s.iter().map(|r| patch(r).and_then(|p| p.released_at)));
    let d = conn.dialect();
    let mut args = conn.args();
    let src = args.rows(rows);
    // A fresh row under `patch_signals`' rules: every stamp is the patch's, the session only
    // with a delivery path, the sequence the newer of the send and the patch.
    // The conflict arm applies the same rules to an existing row (a send seen twice cannot
    // happen past the checkpoint compare-and-set; `bisect` adds it when one did, so a patch is
    // never dropped). It only fires when the batch stamped something, which is exactly when a
    // patch exists.
    let conflict_arm = if b.sent_may_exist {
        format!(
            "WHERE true ON CONFLICT (id) DO UPDATE SET {stamps} \
             WHERE COALESCE(EXCLUDED.delivered_at, EXCLUDED.acked_at, EXCLUDED.expired_at, EXCLUDED.recalled_at, \
               EXCLUDED.released_at) IS NOT NULL",
            stamps = stamps("EXCLUDED", ["delivered_via", "resolved_to_session", "last_event_seq"], d),
        )
    } else {
        String::new()
    };
    let insert = format!(
        "INSERT INTO signal_queue AS q (id, tenant, from_identity, to_identity, signal_type, category, priority, \
           payload, delivery_class, recipient_state, publish_path, correlation_id, created_at, expires_at, \
           delivered_at, delivered_via, resolved_to_session, acked_at, expired_at, recalled_at, last_event_seq, \
           fanout_id, deliver_at, released_at, expired_reason) \
         SELECT id, tenant, f, t, st, cat, pri, {payload}, dc, rs, pp, corr, ca, ea, \
           da, via, CASE WHEN via IS NOT NULL THEN sess END, aa, xa, ra, seq, fan, dla, rla, xr \
         FROM {src} {conflict_arm}",
        payload = d.json("payload"),
    );
    conn.execute(&inflight::insert(d, insert, b.sent_may_exist), args).await?;
    Ok(new_ids)
}

/// Stamps deliveries, acks, expiries (with their reason), recalls and releases on rows of
/// earlier batches (`merged`: the ids `insert_sent` already wrote with their stamps). A row lives
/// in exactly one of the hot table and the history (archiving moves it under the writer lock),
/// so the history is patched only for the ids the hot table did not have — a late event for an
/// archived row (an ack after archiving) still lands, and a batch whose rows are all hot (the
/// usual case) never probes the history's key for each of them.
async fn patch_signals(conn: &mut Conn<'_>, b: &Batch, merged: &HashSet<Uuid>) -> Result<()> {
    let p: Vec<&SignalPatch> = b.signal_patches.iter().filter(|p| !merged.contains(&p.id)).collect();
    if p.is_empty() {
        return Ok(());
    }
    let d = conn.dialect();
    let (update, args) = patch_statement(conn, "signal_queue", &p);
    let sql = inflight::update(d, update, &d.returning("q", "id"));
    let hot = conn.fetch_all(&sql, args).await?.iter().map(|r| r.uuid("id")).collect::<Result<HashSet<Uuid>>>()?;
    let archived: Vec<&SignalPatch> = p.into_iter().filter(|r| !hot.contains(&r.id)).collect();
    if !archived.is_empty() {
        let (sql, args) = patch_statement(conn, "signal_history", &archived);
        conn.execute(&sql, args).await?;
    }
    Ok(())
}

/// The multi-row update of `patch_signals` against `table` (aliased `q`).
fn patch_statement<'a>(conn: &Conn<'_>, table: &str, p: &[&'a SignalPatch]) -> (String, Args<'a>) {
    let rows = RowSet::new()
        .col("id", p.iter().copied().map(|r| r.id))
        .col("delivered_at", p.iter().copied().map(|r| r.delivered_at))
        .col("via", p.iter().copied().map(|r| r.via.as_deref()))
        .col("session", p.iter().copied().map(|r| r.session))
        .col("acked_at", p.iter().copied().map(|r| r.acked_at))
        .col("expired_at", p.iter().copied().map(|r| r.expired_at))
        .col("expired_reason", p.iter().copied().map(|r| r.expired_reason))
        .col("recalled_at", p.iter().copied().map(|r| r.recalled_at))
        .col("released_at", p.iter().copied().map(|r| r.released_at))
        .col("seq", p.iter().copied().map(|r| r.seq));
    let mut args = conn.args();
    let src = args.rows(rows);
    let sql = format!(
        "UPDATE {table} AS q SET {stamps} FROM {src} WHERE q.id = u.id",
        stamps = stamps("u", ["via", "session", "seq"], conn.dialect()),
    );
    (sql, args)
}

/// The `SET` list that stamps signal row `q` with the stamps of row `n` — the one place the
/// stamping rules are spelled, for an insert's conflict arm and for a patch alike: a stamp
/// already on the row wins (the first delivery, ack, expiry, recall or release is the one the
/// stream decided), except the delivery path and session, which the newest delivery sets, and
/// the sequence, which only grows. The three names are `n`'s delivery path, session and sequence
/// columns.
fn stamps(n: &str, [via, session, seq]: [&str; 3], d: Dialect) -> String {
    format!(
        "delivered_at = COALESCE(q.delivered_at, {n}.delivered_at), \
         delivered_via = COALESCE({n}.{via}, q.delivered_via), \
         resolved_to_session = CASE WHEN {n}.{via} IS NOT NULL THEN {n}.{session} ELSE q.resolved_to_session END, \
         acked_at = COALESCE(q.acked_at, {n}.acked_at), \
         expired_at = COALESCE(q.expired_at, {n}.expired_at), \
         expired_reason = CASE WHEN q.expired_at IS NULL THEN {n}.expired_reason ELSE q.expired_reason END, \
         recalled_at = COALESCE(q.recalled_at, {n}.recalled_at), \
         released_at = COALESCE(q.released_at, {n}.released_at), \
         last_event_seq = {greatest}(q.last_event_seq, {n}.{seq})",
        greatest = d.greatest(),
    )
}

/// Deletes the `agents` and `recipient_state` rows of the identities the batch removed; their
/// sessions and signals stay, as history.
async fn remove_agents(conn: &mut Conn<'_>, b: &Batch) -> Result<()> {
    if b.removed_agents.is_empty() {
        return Ok(());
    }
    for table in ["agents", "recipient_state"] {
        let rows = RowSet::new()
            .col("tenant", b.removed_agents.iter().map(|k| k.0.as_str()))
            .col("identity", b.removed_agents.iter().map(|k| k.1.as_str()));
        let mut args = conn.args();
        let sql = format!(
            "DELETE FROM {table} WHERE (tenant, identity) IN (SELECT tenant, identity FROM {})",
            args.rows(rows)
        );
        conn.execute(&sql, args).await?;
    }
    Ok(())
}

async fn insert_agents(conn: &mut Conn<'_>, b: &Batch) -> Result<()> {
    if b.agents.is_empty() {
        return Ok(());
    }
    let a = &b.agents;
    let rows = RowSet::new()
        .col("tenant", a.iter().map(|r| r.tenant.as_str()))
        .col("identity", a.iter().map(|r| r.identity.as_str()))
        .col("kind", a.iter().map(|r| r.kind.as_str()))
        .col("at", a.iter().map(|r| r.registered_at));
    let mut args = conn.args();
    let sql = format!(
        "INSERT INTO agents (tenant, identity, kind, registered_at) \
         SELECT tenant, identity, kind, at FROM {} WHERE true ON CONFLICT (tenant, identity) DO NOTHING",
        args.rows(rows)
    );
    conn.execute(&sql, args).await?;
    Ok(())
}

async fn sessions(conn: &mut Conn<'_>, b: &Batch) -> Result<()> {
    if !b.sessions.is_empty() {
        let s = &b.sessions;
        let rows = RowSet::new()
            .col("id", s.iter().map(|r| r.session_id))
            .col("tenant", s.iter().map(|r| r.tenant.as_str()))
            .col("identity", s.iter().map(|r| r.identity.as_str()))
            .col("kind", s.iter().map(|r| r.kind.as_str()))
            .col("surface", s.iter().map(|r| r.surface.as_str()))
            .col("node", s.iter().map(|r| r.node.as_str()))
            .col("at", s.iter().map(|r| r.opened_at));
        let mut args = conn.args();
        let sql = format!(
            "INSERT INTO agent_sessions (session_id, tenant, identity, kind, surface, node, opened_at, last_heartbeat) \
             SELECT id, tenant, identity, kind, surface, node, at, at FROM {} WHERE true \
             ON CONFLICT (session_id) DO NOTHING",
            args.rows(rows)
        );
        conn.execute(&sql, args).await?;
    }
    if !b.session_patches.is_empty() {
        let p = &b.session_patches;
        let rows = RowSet::new()
            .col("id", p.iter().map(|r| r.session_id))
            .col("hb", p.iter().map(|r| r.heartbeat))
            .col("released", p.iter().map(|r| r.released_at));
        let mut args = conn.args();
        let sql = format!(
            "UPDATE agent_sessions AS s SET \
               last_heartbeat = {greatest}(s.last_heartbeat, COALESCE(u.hb, s.last_heartbeat)), \
               released_at = COALESCE(s.released_at, u.released) \
             FROM {src} WHERE s.session_id = u.id",
            greatest = conn.dialect().greatest(),
            src = args.rows(rows),
        );
        conn.execute(&sql, args).await?;
    }
    Ok(())
}

fn fact_rows(f: &[FactRow]) -> RowSet<'_> {
    RowSet::new()
        .col("tenant", f.iter().map(|r| r.tenant.as_str()))
        .col("plugin", f.iter().map(|r| r.plugin.as_str()))
        .col("seq", f.iter().map(|r| r.seq))
        .col("ft", f.iter().map(|r| r.fact_type.as_str()))
        .col("fact", f.iter().map(|r| r.fact.as_str()))
        .col("rb", f.iter().map(|r| r.recorded_by.as_str()))
        .col("at", f.iter().map(|r| r.created_at))
}

async fn facts(conn: &mut Conn<'_>, b: &Batch) -> Result<()> {
    if b.facts.is_empty() {
        return Ok(());
    }
    let fact = conn.dialect().json("fact");
    let mut args = conn.args();
    let sql = format!(
        "INSERT INTO plugin_facts (tenant, plugin_name, seq, fact_type, fact, recorded_by, created_at) \
         SELECT tenant, plugin, seq, ft, {fact}, rb, at FROM {} WHERE true \
         ON CONFLICT (tenant, plugin_name, seq) DO NOTHING",
        args.rows(fact_rows(&b.facts))
    );
    conn.execute(&sql, args).await?;
    // Only a newer fact replaces the compatibility view (facts can arrive in any batch split).
    let mut args = conn.args();
    let sql = format!(
        "INSERT INTO plugin_state (tenant, plugin_name, state, seq, updated_at) \
         SELECT tenant, plugin, {fact}, seq, at FROM {} WHERE true \
         ON CONFLICT (tenant, plugin_name) DO UPDATE SET state = EXCLUDED.state, seq = EXCLUDED.seq, \
           updated_at = EXCLUDED.updated_at WHERE plugin_state.seq < EXCLUDED.seq",
        args.rows(fact_rows(&b.plugin_states))
    );
    conn.execute(&sql, args).await?;
    Ok(())
}

/// Records the batch's dead letters (the checkpoint compare-and-set already moved past them).
async fn dead_letters(conn: &mut Conn<'_>, b: &Batch, now: DateTime<Utc>) -> Result<()> {
    if b.dead_letters.is_empty() {
        return Ok(());
    }
    let d = &b.dead_letters;
    let rows = RowSet::new()
        .col("seq", d.iter().map(|r| r.seq as i64))
        .col("subject", d.iter().map(|r| r.subject.as_str()))
        .col("et", d.iter().map(|r| r.event_type.as_str()))
        .col("reason", d.iter().map(|r| r.reason.as_str()));
    let mut args = conn.args();
    let projection = args.arg(PROJECTION);
    let now_sql = conn.dialect().now(&mut args, now);
    let sql = format!(
        "INSERT INTO projection_dead_letters (projection, seq, subject, event_type, reason, recorded_at) \
         SELECT {projection}, seq, subject, et, reason, {now_sql} FROM {} WHERE true \
         ON CONFLICT (projection, seq) DO NOTHING",
        args.rows(rows)
    );
    conn.execute(&sql, args).await?;
    Ok(())
}
