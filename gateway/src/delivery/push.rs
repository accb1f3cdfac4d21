//! The live push: every `signal.sent` the stream tail reads (and every `signal.released` of a
//! scheduled one) goes to a session of its recipient this process holds, through the per-signal
//! compare-and-set, with its frame queued only once the delivery is recorded. Also the
//! one-signal delivery the startup drain uses, and the push at send: a send whose recipient's
//! session this process holds records the send and the push in one event
//! (`SignalSent::pushed_to`) and queues the frame itself, with no tail round trip.
//!
//! Deliberately never waits on a socket: a full queue closes the session as a slow consumer.

use std::sync::Arc;

use bus::event::{DeliveredVia, SignalReleased, SignalSent};
use bus::signal::Status;
use chrono::Utc;
use tokio::sync::mpsc::OwnedPermit;
use uuid::Uuid;

use crate::close::CloseReason;
use crate::delivery::{Deliverer, Fresh, Recipient};
use crate::sessions::hub::SessionHandle;
use crate::wire;

impl Deliverer {
    /// Delivers one signal to `session`. Returns whether a frame was queued.
    ///
    /// `allow_redeliver` lets a signal delivered to a session that has since closed, and never
    /// acked, go out again (`redelivered: true`).
    pub async fn deliver_to(
        &self,
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
        let Some(d) = self.record(Recipient::session(session), signal_id, fresh, via, allow_redeliver).await? else {
            return Ok(false);
        };
        session.remember_delivery(signal_id);
        permit.send(wire::Outbound::signal(wire::signal_frame(&d.sent, d.redelivered), d.sent.expires_at));
        Ok(true)
    }

    /// Called by the stream tail for every `signal.sent`: if this process holds a live session of
    /// the recipient, push to it. The node holding the preferred (freshest) session pushes at
    /// once; any other node holding a session waits `push_grace` first, then tries too, so a
    /// lagging presence view can delay a push but never lose it. The compare-and-set picks one
    /// winner. A scheduled send is not pushed: it is invisible until its release (`on_released`).
    ///
    /// `at` is where the tail read the send; `last_seq` the newest sequence on the signal's
    /// subject (`at` for a send stored there, 0 for one gathered in a `sends.recorded`).
    pub fn on_sent(self: &Arc<Self>, tenant: &str, sent: &SignalSent, at: u64, last_seq: u64) {
        if sent.deliver_at.is_none() {
            self.push_fresh(tenant, sent, at, last_seq, false);
        }
    }

    /// Called by the stream tail for every `signal.released` (CONTRACT §16): the scheduled signal
    /// is pushed as a fresh `signal.sent` would be, to a live session of its recipient here, or
    /// waits like any queued signal. Only a node holding a session of the recipient reads the
    /// signal (the release carries no body); `announce` then tells the other surfaces.
    pub fn on_released(
        self: &Arc<Self>,
        tenant: &str,
        released: &SignalReleased,
        seq: u64,
        announce: impl FnOnce(&str, &SignalSent) + Send + 'static,
    ) {
        // Taken on every gateway, whether it pushes or not: a kept send is wanted only once.
        let kept = self.scheduled.take(released.signal_id);
        if bus::signal::is_due(released.expires_at, Utc::now()) {
            return;
        }
        let node = &self.config.node;
        if !self.presence.sessions_of(tenant, &released.to).iter().any(|(_, e)| e.node == *node) {
            return;
        }
        let (this, tenant, id) = (self.clone(), tenant.to_string(), released.signal_id);
        self.tasks.spawn(async move {
            // The send as this tail read it, or read back; either way the push's compare-and-set
            // on the release's sequence decides, so a kept send never hands out a stale signal.
            let sent = match kept {
                Some(sent) => Some(sent),
                None => match this.store.load(&tenant, id).await {
                    Ok((state, _)) if state.status == Status::Pending => state.sent,
                    Ok(_) => None,
                    Err(e) => {
                        tracing::warn!(error = %e, signal_id = %id, "released signal unreadable; it waits for a drain");
                        None
                    }
                },
            };
            if let Some(sent) = sent {
                announce(&tenant, &sent);
                this.push_fresh(&tenant, &sent, seq, seq, true);
            }
        });
    }

    /// The push of `sent`, read by the tail at `at` (its send, or with `released` its release),
    /// whose subject's newest sequence is `last_seq`, to a live session of its recipient here.
    fn push_fresh(self: &Arc<Self>, tenant: &str, sent: &SignalSent, at: u64, last_seq: u64, released: bool) {
        if bus::signal::is_due(sent.expires_at, Utc::now()) {
            return;
        }
        let Some(freshest_local) = self.hub.of_identity(tenant, &sent.to).into_iter().next() else { return };
        let config = &self.config;
        let preferred = self.presence.resolve(tenant, &sent.to, Utc::now(), config.stale_after).resolved;
        let (session, delay) = match preferred {
            Some((id, node)) if node == config.node => {
                (self.hub.get(id).filter(|s| !s.is_closing()).unwrap_or(freshest_local), None)
            }
            Some(_) => (freshest_local, Some(config.push_grace)),
            None => (freshest_local, None),
        };
        let this = self.clone();
        let sent = sent.clone();
        self.tasks.spawn(async move {
            if let Some(d) = delay {
                tokio::time::sleep(d).await;
            }
            // What the session's startup drain covers goes out through the drain, in drain order.
            let mut target = session.drain_target.subscribe();
            let wait = this.config.drain_wait;
            let known = tokio::select! {
                r = tokio::time::timeout(wait, target.wait_for(Option::is_some)) => match r {
                    Ok(Ok(t)) => *t,
                    _ => None,
                },
                _ = session.closing().cancelled() => return,
            };
            if known.is_some_and(|t| at <= t) {
                return;
            }
            let fresh = Fresh { sent: &sent, seq: last_seq, released };
            if let Err(e) = this.deliver_to(&session, sent.signal_id, Some(fresh), DeliveredVia::WsPush, false).await {
                tracing::warn!(error = %e, signal_id = %sent.signal_id, "push failed; the signal stays pending");
            }
        });
    }
}

/// Room reserved in a local session's queue for a send that is about to record its own push.
/// Dropping it unused (the append failed, or a dedupe repeat) gives the room back.
pub struct PushAtSend {
    session: Arc<SessionHandle>,
    permit: OwnedPermit<wire::Outbound>,
}

impl PushAtSend {
    pub fn session_id(&self) -> Uuid {
        self.session.id
    }

    /// Queues the push of `sent`, whose `signal.sent` (carrying `pushed_to`) the stream
    /// accepted: it is delivered there, so it must be handed over now.
    pub fn complete(self, deliverer: &Deliverer, sent: &SignalSent) {
        self.session.remember_delivery(sent.signal_id);
        self.permit.send(wire::Outbound::signal(wire::signal_frame(sent, false), sent.expires_at));
        crate::metrics::delivered(&deliverer.config.types, &sent.signal_type, DeliveredVia::WsPush, sent.created_at);
    }
}

impl Deliverer {
    /// Reserves a push at send to `resolved` (the recipient's freshest live session), when this
    /// process holds it, its startup drain has fixed its position (older signals go out through
    /// the drain), and its queue has room. `None`: the send records only itself, and the push
    /// follows the stream tail as for a session held elsewhere.
    pub fn reserve_push_at_send(&self, resolved: Option<&(Uuid, String)>) -> Option<PushAtSend> {
        let (id, node) = resolved?;
        if *node != self.config.node {
            return None;
        }
        let session = self.hub.get(*id).filter(|s| !s.is_closing() && s.drain_target.borrow().is_some())?;
        let permit = session.out.clone().try_reserve_owned().ok()?;
        Some(PushAtSend { session, permit })
    }
}
