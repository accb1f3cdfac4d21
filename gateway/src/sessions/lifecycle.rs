//! A session's life on the stream: the one place that records `session.opened`,
//! `session.heartbeat` and `session.closed` (built and decided by `bus::session`), for WebSocket
//! and piggyback sessions alike, and keeps this node's presence and heartbeat throttle in step
//! with what it records.
//!
//! Deliberately holds no session: the WebSocket loop (`api/ws/session.rs`) owns its socket and
//! its hub entry, and decides when to open, beat and close; this only records.

use std::sync::Arc;
use std::time::Duration;

use bus::event::{Entity, Event, SessionKind, Surface};
use bus::log::Expect;
use bus::session::Closing;
use bus::store::SignalStore;
use chrono::{DateTime, Utc};
use uuid::Uuid;

use crate::agent::Agent;
use crate::close::CloseReason;
use crate::metrics;
use crate::sessions::heartbeats::Heartbeats;
use crate::sessions::presence::{Entry, Presence};

/// What recording a session's life needs: the store, this node's presence and heartbeat
/// throttle, and the node's name.
#[derive(Debug, Clone)]
pub struct Lifecycle {
    pub store: SignalStore,
    pub presence: Arc<Presence>,
    pub heartbeats: Arc<Heartbeats>,
    pub node: String,
    pub heartbeat_interval: Duration,
}

impl Lifecycle {
    /// Records `session.opened` for a session of `agent` on this node; returns the stream
    /// sequence it was stored at (where the session's startup drain begins).
    pub async fn record_opened(
        &self,
        id: Uuid,
        agent: &Agent,
        kind: SessionKind,
        surface: Surface,
        at: DateTime<Utc>,
    ) -> Result<u64, bus::Error> {
        let body = bus::session::opened(id, &agent.identity, kind, surface, &self.node);
        let appended = self.store.record(&Event::new(&agent.tenant, Some(agent.identity.clone()), at, body)).await?;
        Ok(appended.seq)
    }

    /// The presence entry of a session of `agent` that opens on this node at `at`.
    pub fn entry(&self, agent: &Agent, kind: SessionKind, surface: Surface, at: DateTime<Utc>) -> Entry {
        Entry {
            tenant: agent.tenant.clone(),
            identity: agent.identity.clone(),
            kind,
            surface,
            node: self.node.clone(),
            last_heartbeat: at,
        }
    }

    /// Opens a piggyback session for `agent`: `session.opened` with surface `piggyback`.
    pub async fn open_piggyback(&self, agent: &Agent, kind: SessionKind) -> Result<Uuid, bus::Error> {
        let id = Uuid::new_v4();
        let now = Utc::now();
        self.record_opened(id, agent, kind, Surface::Piggyback, now).await?;
        self.presence.open(id, self.entry(agent, kind, Surface::Piggyback, now));
        self.heartbeats.call(id, agent, now, self.heartbeat_interval);
        metrics::session_opened(kind, Surface::Piggyback);
        tracing::info!(session_id = %id, tenant = %agent.tenant, identity = %agent.identity, kind = kind.as_str(), "piggyback session opened");
        Ok(id)
    }

    /// Records a heartbeat event for a session (failures are logged: a missed heartbeat only
    /// makes the session look older to other nodes).
    pub async fn record_heartbeat(&self, id: Uuid, tenant: &str, identity: &str, at: DateTime<Utc>) {
        let body = bus::session::heartbeat(id, identity);
        if let Err(e) = self.store.record(&Event::new(tenant, Some(identity.to_string()), at, body)).await {
            tracing::warn!(error = %e, session_id = %id, "heartbeat could not be recorded");
        }
    }

    /// A call of `agent` on its piggyback session `id`: presence sees it at once, and the
    /// throttled `session.heartbeat` is recorded now or owed to the reaper's next tick.
    pub async fn piggyback_called(&self, id: Uuid, agent: &Agent) {
        let now = Utc::now();
        self.presence.touch(id, now);
        if self.heartbeats.call(id, agent, now, self.heartbeat_interval) {
            self.record_heartbeat(id, &agent.tenant, &agent.identity, now).await;
        }
    }

    /// Records `session.closed` for a session this node holds and is closing itself.
    pub async fn record_closed(
        &self,
        id: Uuid,
        tenant: &str,
        identity: &str,
        reason: CloseReason,
    ) -> Result<(), bus::Error> {
        let body = bus::session::closed(id, identity, reason.label());
        self.store.record(&Event::new(tenant, Some(identity.to_string()), Utc::now(), body)).await?;
        Ok(())
    }

    /// Records `session.closed` for `id` unless it is already closed or, with `silent_before`,
    /// unless its newest event is newer than that: a compare-and-set on the session's subject,
    /// so of all the nodes that try, exactly one records it. Returns whether this call did.
    pub async fn close(
        &self,
        tenant: &str,
        identity: &str,
        id: Uuid,
        reason: CloseReason,
        silent_before: Option<DateTime<Utc>>,
    ) -> Result<bool, bus::Error> {
        let log = self.store.log();
        let subject = log.subjects().of(tenant, Entity::Session(id));
        let newest = log.last_on_subject(&subject).await?;
        let (event, newest_seq) =
            match bus::session::decide_close(newest.as_ref(), id, identity, reason.label(), silent_before) {
                Closing::Unknown => {
                    self.presence.close(id);
                    return Ok(false);
                }
                Closing::AlreadyClosed => {
                    self.presence.close(id);
                    self.heartbeats.forget(id);
                    return Ok(false);
                }
                Closing::StillHeard => return Ok(false),
                Closing::Close { event, newest_seq } => (event, newest_seq),
            };
        let event = Event::new(tenant, Some(identity.to_string()), Utc::now(), event);
        match self.store.append(&event, Expect::LastSubjectSeq(newest_seq)).await {
            Ok(_) => {
                self.presence.close(id);
                self.heartbeats.forget(id);
                Ok(true)
            }
            // A heartbeat or another node's close got there first; the tail tells us which.
            Err(bus::Error::Conflict { .. }) => Ok(false),
            Err(e) => Err(e),
        }
    }
}
