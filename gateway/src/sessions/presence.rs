//! Who is connected where: an in-memory model of every open session on every node, fed by
//! `session.*` events from the stream and, for this node's sessions, by local activity, and
//! the recipient state of CONTRACT §2 computed from it.
//!
//! Deliberately does not close or ping anything (`ws/session.rs` does) and never reads a read
//! model: presence is on the send hot path and must not wait for the projector.

use foldhash::{HashMap, HashSet};
use std::sync::RwLock;
use std::time::Duration;

use bus::event::{Event, EventBody, RecipientState, SessionKind, Surface};
use chrono::{DateTime, Utc};
use uuid::Uuid;

/// One open session as presence knows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub tenant: String,
    pub identity: String,
    pub kind: SessionKind,
    pub surface: Surface,
    pub node: String,
    pub last_heartbeat: DateTime<Utc>,
}

/// The recipient as a send sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resolution {
    pub state: RecipientState,
    pub has_live_ws: bool,
    /// The freshest live ws session, else the freshest live session of any surface.
    pub resolved: Option<(Uuid, String)>,
    pub live_sessions: usize,
    pub last_heartbeat: Option<DateTime<Utc>>,
}

#[derive(Debug, Default)]
struct Inner {
    sessions: HashMap<Uuid, Entry>,
    /// tenant → identity → open sessions: nested, so the per-send lookup borrows its keys.
    by_identity: HashMap<String, HashMap<String, HashSet<Uuid>>>,
}

#[derive(Debug, Default)]
pub struct Presence {
    inner: RwLock<Inner>,
}

impl Presence {
    /// Folds a `session.*` event in; other events are ignored. A session opened here is also
    /// recorded locally first, so applying its `session.opened` again only keeps the freshest
    /// heartbeat.
    pub fn apply(&self, event: &Event) {
        match &event.body {
            EventBody::SessionOpened(o) => self.open(
                o.session_id,
                Entry {
                    tenant: event.tenant.clone(),
                    identity: o.identity.clone(),
                    kind: o.kind,
                    surface: o.surface,
                    node: o.node.clone(),
                    last_heartbeat: event.occurred_at,
                },
            ),
            EventBody::SessionHeartbeat(h) => self.touch(h.session_id, event.occurred_at),
            EventBody::SessionClosed(c) => self.close(c.session_id),
            _ => {}
        }
    }

    pub fn open(&self, id: Uuid, entry: Entry) {
        let mut inner = self.inner.write().unwrap();
        match inner.sessions.get_mut(&id) {
            Some(existing) => existing.last_heartbeat = existing.last_heartbeat.max(entry.last_heartbeat),
            None => {
                let identities = inner.by_identity.entry(entry.tenant.clone()).or_default();
                identities.entry(entry.identity.clone()).or_default().insert(id);
                inner.sessions.insert(id, entry);
            }
        }
    }

    /// Records a heartbeat of an open session (unknown sessions are ignored: a late heartbeat
    /// must not resurrect a closed one).
    pub fn touch(&self, id: Uuid, at: DateTime<Utc>) {
        if let Some(e) = self.inner.write().unwrap().sessions.get_mut(&id) {
            e.last_heartbeat = e.last_heartbeat.max(at);
        }
    }

    pub fn close(&self, id: Uuid) {
        let mut inner = self.inner.write().unwrap();
        if let Some(e) = inner.sessions.remove(&id) {
            if let Some(identities) = inner.by_identity.get_mut(&e.tenant) {
                if let Some(set) = identities.get_mut(&e.identity) {
                    set.remove(&id);
                    if set.is_empty() {
                        identities.remove(&e.identity);
                    }
                }
                if identities.is_empty() {
                    inner.by_identity.remove(&e.tenant);
                }
            }
        }
    }

    pub fn is_open(&self, id: Uuid) -> bool {
        self.inner.read().unwrap().sessions.contains_key(&id)
    }

    /// One open session, as presence knows it.
    pub fn get(&self, id: Uuid) -> Option<Entry> {
        self.inner.read().unwrap().sessions.get(&id).cloned()
    }

    /// Every open session of an identity, on any node.
    pub fn sessions_of(&self, tenant: &str, identity: &str) -> Vec<(Uuid, Entry)> {
        let inner = self.inner.read().unwrap();
        let Some(ids) = inner.ids_of(tenant, identity) else { return Vec::new() };
        ids.iter().filter_map(|id| inner.sessions.get(id).map(|e| (*id, e.clone()))).collect()
    }

    /// Every open session whose newest heartbeat is not newer than `before`, on any node.
    pub fn silent_since(&self, before: DateTime<Utc>) -> Vec<(Uuid, Entry)> {
        let inner = self.inner.read().unwrap();
        inner.sessions.iter().filter(|(_, e)| e.last_heartbeat <= before).map(|(id, e)| (*id, e.clone())).collect()
    }

    /// Every open WebSocket session whose node `pick` says yes to.
    pub fn ws_sessions_where(&self, mut pick: impl FnMut(&str) -> bool) -> Vec<(Uuid, Entry)> {
        let inner = self.inner.read().unwrap();
        inner
            .sessions
            .iter()
            .filter(|(_, e)| e.surface == bus::event::Surface::Ws && pick(&e.node))
            .map(|(id, e)| (*id, e.clone()))
            .collect()
    }

    /// The recipient state of `identity` at `now` (CONTRACT §2).
    pub fn resolve(&self, tenant: &str, identity: &str, now: DateTime<Utc>, stale_after: Duration) -> Resolution {
        let inner = self.inner.read().unwrap();
        let threshold = bus::presence::stale_threshold(now, stale_after);
        // One pass, nothing collected: this runs for every send.
        let (mut open, mut live_sessions, mut has_live_ws) = (0, 0, false);
        let mut last_heartbeat: Option<DateTime<Utc>> = None;
        let mut best: Option<(&Uuid, &Entry)> = None;
        let sessions = inner.ids_of(tenant, identity).into_iter().flatten();
        for (id, e) in sessions.filter_map(|id| inner.sessions.get_key_value(id)) {
            open += 1;
            last_heartbeat = last_heartbeat.max(Some(e.last_heartbeat));
            if !bus::presence::is_live(e.last_heartbeat, threshold) {
                continue;
            }
            live_sessions += 1;
            has_live_ws |= e.surface == Surface::Ws;
            // Freshest first, ws before piggyback at equal freshness: a push beats a buffer.
            let rank = |e: &Entry| (e.surface == Surface::Ws, e.last_heartbeat);
            if best.is_none_or(|(_, b)| rank(e) > rank(b)) {
                best = Some((id, e));
            }
        }
        Resolution {
            state: bus::presence::recipient_state(open, last_heartbeat, threshold),
            has_live_ws,
            resolved: best.map(|(id, e)| (*id, e.node.clone())),
            live_sessions,
            last_heartbeat,
        }
    }
}

impl Inner {
    fn ids_of(&self, tenant: &str, identity: &str) -> Option<&HashSet<Uuid>> {
        self.by_identity.get(tenant)?.get(identity)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(surface: Surface, node: &str, at: DateTime<Utc>) -> Entry {
        Entry {
            tenant: "t".into(),
            identity: "bob".into(),
            kind: SessionKind::Interactive,
            surface,
            node: node.into(),
            last_heartbeat: at,
        }
    }

    #[test]
    fn states_follow_the_threshold_and_the_freshest_ws_session_wins() {
        let p = Presence::default();
        let now = Utc::now();
        let stale = Duration::from_secs(60);
        assert_eq!(p.resolve("t", "bob", now, stale).state, RecipientState::NotAvailableOffline);
        let old = Uuid::new_v4();
        p.open(old, entry(Surface::Ws, "n1", now - chrono::Duration::seconds(120)));
        let r = p.resolve("t", "bob", now, stale);
        assert_eq!(r.state, RecipientState::NotAvailableStale);
        assert_eq!(r.resolved, None);
        let fresh = Uuid::new_v4();
        p.open(fresh, entry(Surface::Ws, "n2", now - chrono::Duration::seconds(5)));
        let pb = Uuid::new_v4();
        p.open(pb, entry(Surface::Piggyback, "n1", now));
        let r = p.resolve("t", "bob", now, stale);
        assert_eq!(r.state, RecipientState::Available);
        assert!(r.has_live_ws);
        assert_eq!(r.resolved, Some((fresh, "n2".into())));
        assert_eq!(p.resolve("u", "bob", now, stale).state, RecipientState::NotAvailableOffline);
        p.close(fresh);
        p.touch(fresh, now);
        let r = p.resolve("t", "bob", now, stale);
        assert!(!r.has_live_ws);
        assert_eq!(r.resolved, Some((pb, "n1".into())));
    }
}
