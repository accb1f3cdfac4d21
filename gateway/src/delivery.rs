//! Handing signals to this process's sessions: the per-signal compare-and-set that records
//! `signal.delivered` before the frame is queued, the live push that follows the stream tail,
//! and the startup drain of a session that opens.
//!
//! Deliberately never writes a frame for a delivery it could not record: the stream decides,
//! so a recalled or expired signal is never handed out and two drains never share a signal.
//! A frame queued after its delivery was recorded but never read (the client vanished) is
//! simply delivered-and-unacked, which the next session of the identity gets again.

use std::borrow::Cow;
use std::collections::HashSet;
use std::sync::Arc;

use bus::event::{DeliveredVia, EventBody, SignalSent};
use bus::signal::{Hint, SignalCommand, SignalState, Status};
use bus::store::Known;
use chrono::Utc;
use uuid::Uuid;

use crate::hub::{CloseReason, DeliveredAt, SessionHandle};
use crate::state::Gateway;
use crate::{metrics, wire};

/// A `signal.sent` just read from the stream, with the sequence it was stored at.
pub struct Fresh<'a> {
    pub sent: &'a SignalSent,
    pub seq: u64,
}

/// Who a delivery goes to: the recipient identity and the session it is handed to.
#[derive(Debug, Clone, Copy)]
pub struct Recipient<'a> {
    pub tenant: &'a str,
    pub identity: &'a str,
    /// Recorded in `signal.delivered`; a signal this session was handed and has not acked is
    /// never handed to it again. `None`: `GET /v1/inbox?drain=true`, which hands signals to
    /// the caller rather than to a session.
    pub session_id: Option<Uuid>,
}

impl<'a> Recipient<'a> {
    pub fn session(s: &'a SessionHandle) -> Self {
        Recipient { tenant: &s.tenant, identity: &s.identity, session_id: Some(s.id) }
    }
}

/// A delivery that was recorded: what to hand over, exactly once, to whoever asked.
#[derive(Debug)]
pub struct Delivered<'a> {
    pub sent: Cow<'a, SignalSent>,
    pub redelivered: bool,
    /// The stream sequence of the `signal.delivered`.
    pub seq: u64,
}

/// Delivers one signal to `session`. Returns whether a frame was queued.
///
/// `allow_redeliver` lets a signal delivered to a session that has since closed, and never
/// acked, go out again (`redelivered: true`).
pub async fn deliver_to(
    gw: &Gateway,
    session: &Arc<SessionHandle>,
    signal_id: Uuid,
    fresh: Option<Fresh<'_>>,
    via: DeliveredVia,
    allow_redeliver: bool,
) -> Result<bool, bus::Error> {
    if session.is_closing() {
        return Ok(false);
    }
    // Reserve the queue slot first: a delivery is only recorded if its frame has room.
    let permit = match session.out.try_reserve() {
        Ok(p) => p,
        Err(tokio::sync::mpsc::error::TrySendError::Full(_)) => {
            session.close(CloseReason::SlowConsumer);
            return Ok(false);
        }
        Err(tokio::sync::mpsc::error::TrySendError::Closed(_)) => return Ok(false),
    };
    let Some(d) = record(gw, Recipient::session(session), signal_id, fresh, via, allow_redeliver).await? else {
        return Ok(false);
    };
    let at = DeliveredAt { seq: d.seq, correlation_id: d.sent.correlation_id.clone() };
    session.remember_delivery(signal_id, at);
    permit.send(wire::signal_frame(&d.sent, d.redelivered));
    Ok(true)
}

/// Records the delivery of one signal to `to` through the per-signal compare-and-set and
/// returns what to hand over, or `None` when it is not (or no longer) deliverable to `to`.
/// The caller must hand what it gets to the recipient: it is delivered on the stream.
///
/// With `fresh`, the delivery is decided on the `signal.sent` just seen and appended expecting it
/// to still be the newest event — no read on the hot path; losing that race (a recall, an
/// expiry, another delivery) reads the signal and decides again (`execute_hinted`).
pub async fn record<'a>(
    gw: &Gateway,
    to: Recipient<'_>,
    signal_id: Uuid,
    fresh: Option<Fresh<'a>>,
    via: DeliveredVia,
    allow_redeliver: bool,
) -> Result<Option<Delivered<'a>>, bus::Error> {
    let hinted_sent = fresh.as_ref().map(|f| f.sent);
    let known = fresh.map(|Fresh { sent, seq }| Known {
        hint: Hint::Sent(sent),
        last_seq: seq,
        correlation_id: sent.correlation_id.clone(),
    });
    // Hand out again only what went to a session that is gone: a delivery to a session still
    // open (the asking one, or a sibling) is that session's to ack.
    let command = |state: &SignalState| {
        let redeliver = allow_redeliver
            && state.status == (Status::Delivered { acked: false })
            && state
                .last_delivery
                .as_ref()
                .and_then(|d| d.session_id)
                .is_some_and(|sid| Some(sid) != to.session_id && !gw.presence().is_open(sid));
        SignalCommand::Deliver { to: to.identity.to_string(), via, session_id: to.session_id, redeliver }
    };
    let done = match gw.store().execute_hinted(to.tenant, signal_id, command, to.identity, Utc::now(), known).await {
        Ok(done) => done,
        // Not (or no longer) deliverable to `to`: recalled, expired, delivered, someone else's.
        Err(bus::Error::Domain(_)) => return Ok(None),
        Err(e) => return Err(e),
    };
    let Some((seq, EventBody::SignalDelivered(d))) = done.appended else { return Ok(None) };
    let sent = match (done.state.and_then(|s| s.sent), hinted_sent) {
        (Some(sent), _) => Cow::Owned(*sent),
        (None, Some(sent)) => Cow::Borrowed(sent),
        (None, None) => return Ok(None),
    };
    metrics::delivered(&gw.config().types, &sent.signal_type, via, sent.created_at);
    Ok(Some(Delivered { sent, redelivered: d.redelivered, seq }))
}

/// Called by the stream tail for every `signal.sent`: if this process holds a live session of
/// the recipient, push to it. The node holding the preferred (freshest) session pushes at
/// once; any other node holding a session waits `push_grace` first, then tries too, so a lagging
/// presence view can delay a push but never lose it. The compare-and-set picks one winner.
pub fn on_sent(gw: &Gateway, tenant: &str, sent: &SignalSent, seq: u64) {
    if Utc::now() >= sent.expires_at {
        return;
    }
    let Some(freshest_local) = gw.hub().of_identity(tenant, &sent.to).into_iter().next() else { return };
    let preferred = gw.presence().resolve(tenant, &sent.to, Utc::now(), gw.config().stale_after).resolved;
    let (session, delay) = match preferred {
        Some((id, node)) if node == gw.config().node => {
            (gw.hub().get(id).filter(|s| !s.is_closing()).unwrap_or(freshest_local), None)
        }
        Some(_) => (freshest_local, Some(gw.config().push_grace)),
        None => (freshest_local, None),
    };
    let gw = gw.clone();
    let sent = sent.clone();
    gw.tasks().clone().spawn(async move {
        if let Some(d) = delay {
            tokio::time::sleep(d).await;
        }
        // What the session's startup drain covers goes out through the drain, in drain order.
        let mut target = session.drain_target.subscribe();
        let wait = gw.config().drain_wait;
        let known = tokio::select! {
            r = tokio::time::timeout(wait, target.wait_for(Option::is_some)) => match r {
                Ok(Ok(t)) => *t,
                _ => None,
            },
            _ = session.closing().cancelled() => return,
        };
        if known.is_some_and(|t| seq <= t) {
            return;
        }
        let fresh = Fresh { sent: &sent, seq };
        if let Err(e) = deliver_to(&gw, &session, sent.signal_id, Some(fresh), DeliveredVia::WsPush, false).await {
            tracing::warn!(error = %e, signal_id = %sent.signal_id, "push failed; the signal stays pending");
        }
    });
}

/// The startup drain of a session that just opened: waits until the read models have applied
/// the stream up to the position seen now (so a signal sent just before the session opened is
/// not missed), then delivers what is drainable in `priority DESC, created_at ASC` order.
/// Anything sent after that position reaches the session through the tail push instead.
pub async fn startup_drain(gw: Gateway, session: Arc<SessionHandle>) {
    let result = drain(&gw, &session).await;
    // A drain that failed before knowing its position covers nothing: pushes go ahead.
    session.drain_target.send_if_modified(|t| {
        let unset = t.is_none();
        t.get_or_insert(0);
        unset
    });
    if let Err(e) = result {
        tracing::warn!(error = %e, session_id = %session.id, "startup drain failed; pending signals wait for the next session");
    }
}

async fn drain(gw: &Gateway, session: &Arc<SessionHandle>) -> Result<(), crate::ApiError> {
    let queries = gw.queries();
    let batch = gw.config().drain_batch.max(1);
    let mut seen: HashSet<Uuid> = HashSet::new();
    // Each round re-reads after the read models caught up with what the previous one appended,
    // so rows already handed out are not offered again, and a full page means "ask again".
    for round in 0..64 {
        let target = gw.log().last_seq().await?;
        if round == 0 {
            session.drain_target.send_replace(Some(target));
        }
        if let Err(e) = queries.wait_for(target, gw.config().drain_wait).await {
            tracing::warn!(error = %e, target, "read models lag; draining what they have");
        }
        // Presence must have seen the same events: whether a row may be redelivered depends on
        // whether its delivering session is known to be closed.
        gw.wait_applied(target, gw.config().drain_wait).await;
        if session.is_closing() {
            return Ok(());
        }
        let rows = queries.drainable(&session.tenant, &session.identity, Utc::now(), batch).await?;
        let full = rows.len() as u32 >= batch;
        let mut fresh_rows = 0;
        for row in rows {
            if !seen.insert(row.id) {
                continue;
            }
            fresh_rows += 1;
            if session.is_closing() {
                return Ok(());
            }
            let redeliver = row.delivered_at.is_some();
            deliver_to(gw, session, row.id, None, DeliveredVia::StartupDrain, redeliver).await?;
        }
        if !full || fresh_rows == 0 {
            return Ok(());
        }
    }
    Ok(())
}
