//! Reading the inbox, shared by HTTP (`GET /v1/inbox`) and MCP (`check_inbox`): the caller's
//! pending signals, listed or drained, and — with a wait (CONTRACT §16) — answered as soon as
//! one is pending, or after the wait with an empty list.
//!
//! Deliberately no polling: a waiter is a future parked on the identity's `Waits` entry, which
//! the stream tail wakes when something may have become pending for it; it then looks once
//! (one row, read-only) and either answers or parks again. It holds no task, thread or
//! database connection while parked. While it waits it heartbeats the session its caller
//! named, as a call would. The gateway's graceful stop answers it at once. Listing and draining
//! themselves are the `Deliverer`'s, so a signal is still handed out at most once.

use std::time::Duration;

use bus::event::DeliveredVia;
use tokio::time::Instant;
use uuid::Uuid;

use crate::agent::Agent;
use crate::error::ApiError;
use crate::state::Gateway;
use crate::wire::PushSignal;

/// Longest wait of an inbox read (CONTRACT §16: `wait` ≤ 60; MCP allows 50).
pub const MAX_WAIT: Duration = Duration::from_secs(60);

/// One inbox read.
#[derive(Debug, Clone, Copy)]
pub struct InboxRead {
    /// Deliver what is answered (`delivered_via: inbox`), or only list it.
    pub drain: bool,
    pub limit: u32,
    /// How long to wait for a first pending signal (zero: answer at once).
    pub wait: Duration,
}

/// Who reads: the agent, the session a drain hands the signals to (`None`: to the caller, as
/// `GET /v1/inbox?drain=true` does), and the session to heartbeat while waiting.
#[derive(Debug, Clone, Copy)]
pub struct Reader<'a> {
    pub agent: &'a Agent,
    pub drain_into: Option<Uuid>,
    pub keep_alive: Option<Uuid>,
}

/// The caller's pending signals in drain order, drained or listed; with a wait, once there is
/// one (or the wait is over, or the gateway stops).
pub async fn read(gw: &Gateway, who: Reader<'_>, req: InboxRead) -> Result<Vec<PushSignal>, ApiError> {
    let wait = req.wait.min(MAX_WAIT);
    let first = take(gw, who, req).await?;
    if !first.is_empty() || wait.is_zero() {
        return Ok(first);
    }
    let deadline = Instant::now() + wait;
    let key = (who.agent.tenant.clone(), who.agent.identity.clone());
    // The call itself was a heartbeat (the piggyback middleware, the MCP edge).
    let mut next_beat = Instant::now() + heartbeat_every(gw);
    tracing::debug!(identity = %who.agent.identity, wait_ms = wait.as_millis() as u64, "inbox waiter parked");
    loop {
        let stopping = park(gw, who, &key, deadline, &mut next_beat).await;
        // Outside the wait: a drain that started is never cut short, so what it recorded as
        // delivered is always in the answer.
        let got = take(gw, who, req).await?;
        if !got.is_empty() || stopping || Instant::now() >= deadline {
            return Ok(got);
        }
    }
}

/// Lists or drains once.
async fn take(gw: &Gateway, who: Reader<'_>, req: InboxRead) -> Result<Vec<PushSignal>, ApiError> {
    if req.drain {
        gw.deliverer().drain(who.agent, who.drain_into, DeliveredVia::Inbox, req.limit).await
    } else {
        gw.deliverer().pending(who.agent, req.limit).await
    }
}

/// Waits until something may be pending for the reader (a wake from the tail, after which one
/// look says yes), the deadline, or the gateway's stop — heartbeating `keep_alive` meanwhile,
/// on a schedule kept across parks (`next_beat`), so frequent wakes never starve it.
/// Registered before it looks, so a signal arriving in between is not missed. True when the
/// gateway is stopping.
async fn park(
    gw: &Gateway,
    who: Reader<'_>,
    key: &(String, String),
    deadline: Instant,
    next_beat: &mut Instant,
) -> bool {
    let remaining = deadline.saturating_duration_since(Instant::now());
    // A failed look ends the wait: the next `take` answers the error.
    let look = async || gw.deliverer().any_pending(who.agent, remaining).await.unwrap_or(true);
    tokio::select! {
        _ = gw.inbox_waits().wait_for(key, remaining, look) => false,
        // The look may itself wait (for lagging read models): the deadline holds regardless.
        _ = tokio::time::sleep_until(deadline) => false,
        _ = keep_alive(gw, who, next_beat) => false,
        _ = gw.shutdown_token().cancelled() => true,
    }
}

fn heartbeat_every(gw: &Gateway) -> Duration {
    gw.config().heartbeat_interval().max(Duration::from_millis(50))
}

/// Heartbeats the reader's session at `next_beat` and every heartbeat interval after, as a call
/// on it would, for as long as it is polled (never returns); nothing without a session.
async fn keep_alive(gw: &Gateway, who: Reader<'_>, next_beat: &mut Instant) {
    let Some(id) = who.keep_alive else { return std::future::pending().await };
    loop {
        tokio::time::sleep_until(*next_beat).await;
        *next_beat = Instant::now() + heartbeat_every(gw);
        if gw.presence().is_open(id) {
            gw.lifecycle().piggyback_called(id, who.agent).await;
        }
    }
}
