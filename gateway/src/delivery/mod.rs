//! Handing signals to recipients: the per-signal compare-and-set that records
//! `signal.delivered` before anything is handed over (`Deliverer::record`), the live push that
//! follows the stream tail (`push`), the drains (`drain`), the tail itself (`tail`), and the
//! sends waiting for their push to be recorded (`confirm`).
//!
//! Deliberately never hands over a delivery it could not record: the stream decides, so a
//! recalled or expired signal is never handed out and two drains never share a signal. A frame
//! queued after its delivery was recorded but never read (the client vanished) is simply
//! delivered-and-unacked, which the next session of the identity gets again.

pub mod confirm;
pub mod drain;
pub mod push;
pub mod scheduled;
pub mod tail;

use std::borrow::Cow;
use std::sync::Arc;

use bus::event::{DeliveredVia, EventBody, SignalSent};
use bus::signal::{Hint, SignalCommand, SignalState};
use bus::store::{Known, SignalStore};
use chrono::Utc;
use projector::queries::Queries;
use tokio_util::task::TaskTracker;
use uuid::Uuid;

use crate::applied::Applied;
use crate::config::GatewayConfig;
use crate::metrics;
use crate::sessions::hub::{Hub, SessionHandle};
use crate::sessions::presence::Presence;

/// What delivering needs and nothing more: the command store to record on, the read models to
/// drain from, this process's sessions to push to, and presence to tell a closed session from
/// an open one.
#[derive(Debug)]
pub struct Deliverer {
    pub store: SignalStore,
    pub queries: Arc<dyn Queries>,
    pub hub: Arc<Hub>,
    pub presence: Arc<Presence>,
    /// How far this process's presence has applied the stream (a drain waits for it).
    pub applied: Applied,
    /// Delayed pushes run here, so shutdown waits for them.
    pub tasks: TaskTracker,
    /// Scheduled sends read on the tail, so their release is pushed without a read.
    pub scheduled: scheduled::ScheduledSends,
    pub config: Arc<GatewayConfig>,
}

/// A `signal.sent` just read from the stream, with the newest sequence on its signal's subject
/// (where it was stored; 0 for a send gathered in a `sends.recorded`, whose subject is empty) —
/// or, with `released`, the send of a scheduled signal whose `signal.released` was stored at
/// `seq`.
pub struct Fresh<'a> {
    pub sent: &'a SignalSent,
    pub seq: u64,
    pub released: bool,
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
}

impl Deliverer {
    /// Records the delivery of one signal to `to` through the per-signal compare-and-set and
    /// returns what to hand over, or `None` when it is not (or no longer) deliverable to `to`.
    /// The caller must hand what it gets to the recipient: it is delivered on the stream.
    ///
    /// With `fresh`, the delivery is decided on the `signal.sent` (or `signal.released`) just
    /// seen and appended expecting it to still be the newest event — no read on the hot path;
    /// losing that race (a recall, an expiry, another delivery) reads the signal and decides
    /// again (`execute_hinted`).
    pub async fn record<'a>(
        &self,
        to: Recipient<'_>,
        signal_id: Uuid,
        fresh: Option<Fresh<'a>>,
        via: DeliveredVia,
        allow_redeliver: bool,
    ) -> Result<Option<Delivered<'a>>, bus::Error> {
        let hinted_sent = fresh.as_ref().map(|f| f.sent);
        let known = fresh.map(|Fresh { sent, seq, released }| Known {
            hint: if released { Hint::Released(sent) } else { Hint::Sent(sent) },
            last_seq: seq,
            correlation_id: sent.correlation_id.clone(),
        });
        let command = |state: &SignalState| {
            SignalCommand::deliver(state, to.identity, via, to.session_id, allow_redeliver, |sid| {
                self.presence.is_open(sid)
            })
        };
        let done = match self.store.execute_hinted(to.tenant, signal_id, command, to.identity, Utc::now(), known).await
        {
            Ok(done) => done,
            // Not (or no longer) deliverable to `to`: recalled, expired, delivered, someone else's.
            Err(bus::Error::Domain(_)) => return Ok(None),
            Err(e) => return Err(e),
        };
        let Some((_, EventBody::SignalDelivered(d))) = done.appended else { return Ok(None) };
        let sent = match (done.state.and_then(|s| s.sent), hinted_sent) {
            (Some(sent), _) => Cow::Owned(*sent),
            (None, Some(sent)) => Cow::Borrowed(sent),
            (None, None) => return Ok(None),
        };
        metrics::delivered(&self.config.types, &sent.signal_type, via, sent.created_at);
        Ok(Some(Delivered { sent, redelivered: d.redelivered }))
    }
}
