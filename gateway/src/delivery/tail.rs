//! The stream tail of one gateway process: applies every event to the registry and presence,
//! closes sessions whose token was rotated or whose agent was removed anywhere, and hands every
//! `signal.sent` (alone or gathered in a `sends.recorded`) — and every `signal.released` of a
//! scheduled one — to the push path and the MCP
//! announcement, so a signal sent through any process
//! reaches a session held by this one; a session's close lets a sibling that opened before it
//! take back what the closed one left unacked (`Deliverer::on_closed`). It wakes the callers
//! waiting on a directive's end, and the inbox waiters of an identity something may have become
//! pending for (a `signal.sent` to it that no session took at once; a session of it closing,
//! which makes what that session left unacked drainable again).
//!
//! Deliberately never appends: what it reads is already decided. It resumes after a tail
//! error from the last applied sequence, so it never skips an event — except one that cannot
//! be decoded, which is logged and passed.

use std::sync::Arc;
use std::time::Duration;

use bus::event::EventBody;
use bus::log::{SharedLog, Stored};
use futures::StreamExt;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::agent_registry::AgentRegistry;
use crate::announcers::Announce;
use crate::close::CloseReason;
use crate::delivery::confirm::Confirmations;
use crate::delivery::Deliverer;
use crate::sessions::hub::Hub;
use crate::sessions::presence::Presence;
use crate::waits::Waits;

/// What the tail writes to: the tables it keeps current, and where a `signal.sent` goes.
pub struct Tail {
    pub log: SharedLog,
    pub registry: Arc<AgentRegistry>,
    /// Asks whether a session's token is still current after a rotation or revocation.
    pub auth: crate::auth::Authenticator,
    pub presence: Arc<Presence>,
    pub hub: Arc<Hub>,
    pub deliverer: Arc<Deliverer>,
    pub confirmations: Arc<Confirmations>,
    /// Woken when a directive ends (callers waiting on it).
    pub directive_ends: Arc<Waits<uuid::Uuid>>,
    /// Woken, by (tenant, identity), when something may have become pending for the identity.
    pub inbox_waits: Arc<Waits<(String, String)>>,
    pub announce: Announce,
    pub shutdown: CancellationToken,
}

/// Starts the tail on `tasks`; it reports each applied sequence through `applied`.
pub fn spawn(f: Tail, applied: watch::Sender<u64>, tasks: &TaskTracker) {
    tasks.spawn(async move {
        let stop = f.shutdown.clone();
        let mut next = 1u64;
        let mut backoff = Duration::from_millis(100);
        loop {
            let tail = tokio::select! {
                _ = stop.cancelled() => return,
                t = f.log.tail(next) => t,
            };
            match tail {
                Ok(mut stream) => loop {
                    let item = tokio::select! {
                        _ = stop.cancelled() => return,
                        item = stream.next() => item,
                    };
                    match item {
                        Some(Ok(stored)) => {
                            // Sequences are gapless from `next`; anything lower was already applied.
                            if stored.seq < next {
                                continue;
                            }
                            f.apply(&stored);
                            next = stored.seq + 1;
                            applied.send_replace(stored.seq);
                            backoff = Duration::from_millis(100);
                        }
                        // Nothing can be derived from it (the projector dead-letters it), and
                        // the tail has moved past it: resuming there would only meet it again
                        // and stop pushes and presence for everyone.
                        Some(Err(bus::Error::Undecodable { seq, subject, reason })) => {
                            tracing::error!(seq, subject, reason, "undecodable event on the stream; skipped");
                            if seq >= next {
                                next = seq + 1;
                                applied.send_replace(seq);
                            }
                        }
                        Some(Err(e)) => {
                            tracing::warn!(error = %e, next, "stream tail failed; resuming");
                            break;
                        }
                        None => {
                            tracing::warn!(next, "stream tail ended; resuming");
                            break;
                        }
                    }
                },
                Err(e) => tracing::warn!(error = %e, next, "could not open the stream tail; retrying"),
            }
            tokio::select! {
                _ = stop.cancelled() => return,
                _ = tokio::time::sleep(backoff) => {}
            }
            backoff = (backoff * 2).min(Duration::from_secs(5));
        }
    });
}

impl Tail {
    /// Closes the sessions of `identity` whose token stopped working (on every gateway, as each
    /// one's tail reads the event; the writer's process closes its own at once too).
    fn close_retired(&self, tenant: &str, identity: &str) {
        let now = chrono::Utc::now();
        self.hub.close_retired_tokens(tenant, identity, |agent| self.auth.still_current(agent, now));
    }

    fn apply(&self, stored: &Stored) {
        let event = &stored.event;
        self.registry.apply(stored.seq, event);
        self.presence.apply(event);
        match &event.body {
            EventBody::TokenRotated(r) => self.close_retired(&event.tenant, &r.identity),
            EventBody::TokenRevoked(r) => self.close_retired(&event.tenant, &r.identity),
            EventBody::AgentRemoved(r) => {
                self.hub.close_identity(&event.tenant, &r.identity, CloseReason::AgentRemoved);
            }
            // Gathered sends each as if stored alone, on a subject that is still empty.
            EventBody::SignalSent(_) | EventBody::SendsRecorded(_) => {
                for (sent, last_seq) in event.body.sends_at(stored.seq) {
                    self.on_sent(&event.tenant, sent, stored.seq, last_seq);
                }
            }
            EventBody::SignalReleased(r) => {
                let announce = self.announce.clone();
                self.deliverer.on_released(&event.tenant, r, stored.seq, move |tenant, sent| announce(tenant, sent));
                // Now visible: whoever waits on the recipient's inbox hears of it.
                self.wake_inbox(&event.tenant, &r.to);
            }
            EventBody::SignalDelivered(d) => self.confirmations.delivered(d.signal_id),
            EventBody::SessionClosed(c) => {
                self.deliverer.on_closed(&event.tenant, &c.identity, stored.seq);
                self.wake_inbox(&event.tenant, &c.identity);
            }
            body => {
                if let Some(id) = body.directive_id().filter(|_| ends_a_directive(body)) {
                    self.directive_ends.wake(&id);
                }
            }
        }
    }
}

impl Tail {
    /// One send read at `at`, whose signal's subject's newest sequence is `last_seq`.
    fn on_sent(&self, tenant: &str, sent: &bus::event::SignalSent, at: u64, last_seq: u64) {
        // Sent and pushed in one event by the gateway that held the session: nothing to push.
        if sent.pushed_to.is_some() {
            self.confirmations.delivered(sent.signal_id);
        } else if sent.deliver_at.is_some() {
            // A scheduled send is invisible until its release, which is pushed and announced then.
            self.deliverer.scheduled.keep(sent, chrono::Utc::now());
        } else {
            self.deliverer.on_sent(tenant, sent, at, last_seq);
            (self.announce)(tenant, sent);
            self.wake_inbox(tenant, &sent.to);
        }
    }

    /// Wakes whoever waits on the inbox of `identity` (they look again; nothing is handed out
    /// here).
    fn wake_inbox(&self, tenant: &str, identity: &str) {
        self.inbox_waits.wake(&(tenant.to_string(), identity.to_string()));
    }
}

/// Whether `body` ends a directive (a decline only when it rejects it).
fn ends_a_directive(body: &EventBody) -> bool {
    match body {
        EventBody::DirectiveDeclined(d) => d.rejects,
        EventBody::DirectiveCompleted(_)
        | EventBody::DirectiveFailed(_)
        | EventBody::DirectiveCanceled(_)
        | EventBody::DirectiveExpired(_) => true,
        _ => false,
    }
}
