//! Who the agents are: token hash → (tenant, identity), and each tenant's roster, held in
//! memory and fed from the stream so every gateway process agrees.
//!
//! Deliberately knows no tokens (only their SHA-256) and decides nothing: the HTTP handlers
//! append `agent.*` events, and this applies them (also synchronously, so a rotated or removed
//! token is refused by this process at once rather than when the tail catches up).

use std::collections::HashMap;
use std::sync::RwLock;

use bus::event::{Event, EventBody, SessionKind};
use chrono::{DateTime, Utc};

/// One registered agent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentEntry {
    pub kind: SessionKind,
    pub token_hash: String,
    pub registered_at: DateTime<Utc>,
}

#[derive(Debug, Default)]
struct Inner {
    by_hash: HashMap<String, (String, String)>,
    agents: HashMap<(String, String), AgentEntry>,
    /// The stream sequence of the newest `agent.*` event applied per identity, kept after a
    /// removal: the writer applies its event before the tail replays the older ones, and an
    /// older registration replayed after a removal must not bring the agent back.
    applied: HashMap<(String, String), u64>,
}

#[derive(Debug, Default)]
pub struct AgentRegistry {
    inner: RwLock<Inner>,
}

impl AgentRegistry {
    /// Folds an `agent.*` event stored at `seq` in; other events are ignored. Idempotent and
    /// order-safe per identity: an event no newer than the last one applied for its identity
    /// changes nothing, so an event applied by its writer and again by the tail counts once.
    pub fn apply(&self, seq: u64, event: &Event) {
        let identity = match &event.body {
            EventBody::AgentRegistered(r) => &r.identity,
            EventBody::TokenRotated(r) => &r.identity,
            EventBody::AgentRemoved(r) => &r.identity,
            _ => return,
        };
        let key = (event.tenant.clone(), identity.clone());
        let mut inner = self.inner.write().unwrap();
        if inner.applied.get(&key).is_some_and(|&last| last >= seq) {
            return;
        }
        inner.applied.insert(key.clone(), seq);
        match &event.body {
            EventBody::AgentRegistered(r) => {
                // The first registration holds until a removal: a second one cannot be on the
                // stream otherwise (it is appended expecting the subject's newest event).
                if inner.agents.contains_key(&key) {
                    return;
                }
                inner.by_hash.insert(r.token_hash.clone(), key.clone());
                inner.agents.insert(
                    key,
                    AgentEntry { kind: r.kind, token_hash: r.token_hash.clone(), registered_at: event.occurred_at },
                );
            }
            EventBody::TokenRotated(r) => {
                let Some(entry) = inner.agents.get_mut(&key) else { return };
                let old = std::mem::replace(&mut entry.token_hash, r.token_hash.clone());
                inner.by_hash.remove(&old);
                inner.by_hash.insert(r.token_hash.clone(), key);
            }
            EventBody::AgentRemoved(_) => {
                if let Some(entry) = inner.agents.remove(&key) {
                    inner.by_hash.remove(&entry.token_hash);
                }
            }
            _ => {}
        }
    }

    /// The (tenant, identity) a token hash authenticates, if it is current.
    pub fn lookup(&self, token_hash: &str) -> Option<(String, String)> {
        self.inner.read().unwrap().by_hash.get(token_hash).cloned()
    }

    pub fn get(&self, tenant: &str, identity: &str) -> Option<AgentEntry> {
        self.inner.read().unwrap().agents.get(&(tenant.to_string(), identity.to_string())).cloned()
    }

    pub fn is_registered(&self, tenant: &str, identity: &str) -> bool {
        self.get(tenant, identity).is_some()
    }

    /// A tenant's agents, sorted by identity.
    pub fn roster(&self, tenant: &str) -> Vec<(String, AgentEntry)> {
        let inner = self.inner.read().unwrap();
        let mut out: Vec<_> =
            inner.agents.iter().filter(|((t, _), _)| t == tenant).map(|((_, i), e)| (i.clone(), e.clone())).collect();
        out.sort_by(|a, b| a.0.cmp(&b.0));
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bus::event::{AgentRegistered, AgentRemoved, TokenRotated};

    fn ev(tenant: &str, body: EventBody) -> Event {
        Event::new(tenant, None, Utc::now(), body)
    }

    #[test]
    fn rotation_replaces_the_hash_and_tenants_stay_apart() {
        let r = AgentRegistry::default();
        let reg = |t: &str, h: &str| {
            ev(
                t,
                EventBody::AgentRegistered(AgentRegistered {
                    identity: "alice".into(),
                    kind: SessionKind::Interactive,
                    token_hash: h.into(),
                }),
            )
        };
        r.apply(1, &reg("t1", "h1"));
        r.apply(2, &reg("t2", "h2"));
        assert_eq!(r.lookup("h1"), Some(("t1".into(), "alice".into())));
        let rot = ev("t1", EventBody::TokenRotated(TokenRotated { identity: "alice".into(), token_hash: "h3".into() }));
        r.apply(3, &rot);
        r.apply(3, &rot);
        assert_eq!(r.lookup("h1"), None);
        assert_eq!(r.lookup("h3"), Some(("t1".into(), "alice".into())));
        assert_eq!(r.lookup("h2"), Some(("t2".into(), "alice".into())));
        assert_eq!(r.roster("t1").len(), 1);
    }

    #[test]
    fn a_removal_applied_first_is_not_undone_by_the_tail_replaying_older_events() {
        let r = AgentRegistry::default();
        let reg = |h: &str| {
            ev(
                "t",
                EventBody::AgentRegistered(AgentRegistered {
                    identity: "bob".into(),
                    kind: SessionKind::Daemon,
                    token_hash: h.into(),
                }),
            )
        };
        let removed = ev("t", EventBody::AgentRemoved(AgentRemoved { identity: "bob".into() }));
        // The writer applies the registration and the removal; then the tail replays both.
        r.apply(1, &reg("h1"));
        r.apply(2, &removed);
        r.apply(1, &reg("h1"));
        r.apply(2, &removed);
        assert_eq!(r.lookup("h1"), None);
        assert!(!r.is_registered("t", "bob"));
        // Registered again: a new token, the old one still refused.
        r.apply(3, &reg("h2"));
        assert_eq!(r.lookup("h2"), Some(("t".into(), "bob".into())));
        assert_eq!(r.lookup("h1"), None);
        assert!(r.roster("t").iter().any(|(i, e)| i == "bob" && e.kind == SessionKind::Daemon));
    }
}
