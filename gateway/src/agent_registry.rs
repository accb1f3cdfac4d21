//! Who holds which token: token hash → credential (an agent's registration token, its issued
//! tokens with their scopes and expiry, tenant admin tokens), and each tenant's roster, held in
//! memory and fed from the stream so every gateway process agrees.
//!
//! Deliberately knows no tokens (only their SHA-256) and decides nothing: the handlers append
//! `agent.*` and `admin.token_*` events, and this applies them (also synchronously, so a
//! rotated, revoked or removed token is refused by this process at once rather than when the
//! tail catches up; every other process within its tail's delay).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::RwLock;

use bus::event::{Event, EventBody, SessionKind};
use bus::scope::ScopeSet;
use chrono::{DateTime, Utc};
use uuid::Uuid;

/// One registered agent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentEntry {
    pub kind: SessionKind,
    pub token_hash: String,
    pub registered_at: DateTime<Utc>,
    /// Its issued tokens still in force (or expired, until listed away), by id.
    pub tokens: BTreeMap<Uuid, IssuedToken>,
}

/// An agent's extra token (never its secret).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IssuedToken {
    pub token_hash: String,
    pub scopes: ScopeSet,
    pub expires_at: Option<DateTime<Utc>>,
    pub label: Option<String>,
    pub issued_at: DateTime<Utc>,
}

/// A tenant admin token (never its secret).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AdminTokenEntry {
    pub tenant: String,
    pub token_hash: String,
    pub label: Option<String>,
    pub issued_at: DateTime<Utc>,
}

/// What a token hash stands for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Credential {
    Agent {
        tenant: String,
        identity: String,
        /// `None`: the registration token.
        token_id: Option<Uuid>,
        scopes: ScopeSet,
        expires_at: Option<DateTime<Utc>>,
    },
    TenantAdmin {
        tenant: String,
        token_id: Uuid,
    },
}

#[derive(Debug, Default)]
struct Inner {
    by_hash: HashMap<String, Credential>,
    agents: HashMap<(String, String), AgentEntry>,
    admin_tokens: HashMap<Uuid, AdminTokenEntry>,
    /// Hashes that worked once and were rotated away, revoked or removed: presenting one is
    /// counted as `revoked`, not as a bad token.
    retired: HashSet<String>,
    /// The stream sequence of the newest event applied per subject, kept after a removal: the
    /// writer applies its event before the tail replays the older ones, and an older event
    /// replayed after a newer one must change nothing.
    applied: HashMap<String, u64>,
}

#[derive(Debug, Default)]
pub struct AgentRegistry {
    inner: RwLock<Inner>,
}

impl AgentRegistry {
    /// Folds a token or agent event stored at `seq` in; other events are ignored. Idempotent and
    /// order-safe per subject: an event no newer than the last one applied for its subject
    /// changes nothing, so an event applied by its writer and again by the tail counts once.
    pub fn apply(&self, seq: u64, event: &Event) {
        let key = match &event.body {
            EventBody::AgentRegistered(r) => agent_key(&event.tenant, &r.identity),
            EventBody::TokenRotated(r) => agent_key(&event.tenant, &r.identity),
            EventBody::AgentRemoved(r) => agent_key(&event.tenant, &r.identity),
            EventBody::TokenIssued(r) => agent_key(&event.tenant, &r.identity),
            EventBody::TokenRevoked(r) => agent_key(&event.tenant, &r.identity),
            EventBody::AdminTokenIssued(r) => format!("admintok\u{0}{}", r.token_id),
            EventBody::AdminTokenRevoked(r) => format!("admintok\u{0}{}", r.token_id),
            _ => return,
        };
        let mut inner = self.inner.write().unwrap();
        if inner.applied.get(&key).is_some_and(|&last| last >= seq) {
            return;
        }
        inner.applied.insert(key, seq);
        inner.fold(event);
    }

    /// What a token hash authenticates as, if it was ever current and is not retired. Expiry is
    /// the caller's check (it holds the clock).
    pub fn credential(&self, token_hash: &str) -> Option<Credential> {
        self.inner.read().unwrap().by_hash.get(token_hash).cloned()
    }

    /// Whether a hash was current once and no longer is (rotated, revoked, its agent removed).
    pub fn is_retired(&self, token_hash: &str) -> bool {
        self.inner.read().unwrap().retired.contains(token_hash)
    }

    /// The (tenant, identity) an agent token hash authenticates, if it is current.
    pub fn lookup(&self, token_hash: &str) -> Option<(String, String)> {
        match self.credential(token_hash)? {
            Credential::Agent { tenant, identity, .. } => Some((tenant, identity)),
            Credential::TenantAdmin { .. } => None,
        }
    }

    pub fn get(&self, tenant: &str, identity: &str) -> Option<AgentEntry> {
        self.inner.read().unwrap().agents.get(&(tenant.to_string(), identity.to_string())).cloned()
    }

    pub fn is_registered(&self, tenant: &str, identity: &str) -> bool {
        self.inner.read().unwrap().agents.contains_key(&(tenant.to_string(), identity.to_string()))
    }

    /// A tenant's agents, sorted by identity.
    pub fn roster(&self, tenant: &str) -> Vec<(String, AgentEntry)> {
        let inner = self.inner.read().unwrap();
        let mut out: Vec<_> =
            inner.agents.iter().filter(|((t, _), _)| t == tenant).map(|((_, i), e)| (i.clone(), e.clone())).collect();
        out.sort_by(|a, b| a.0.cmp(&b.0));
        out
    }

    /// The tenant admin tokens in force, of one tenant or all, oldest first.
    pub fn admin_tokens(&self, tenant: Option<&str>) -> Vec<(Uuid, AdminTokenEntry)> {
        let inner = self.inner.read().unwrap();
        let mut out: Vec<_> = inner
            .admin_tokens
            .iter()
            .filter(|(_, e)| tenant.is_none_or(|t| e.tenant == t))
            .map(|(id, e)| (*id, e.clone()))
            .collect();
        out.sort_by(|a, b| (a.1.issued_at, a.0).cmp(&(b.1.issued_at, b.0)));
        out
    }

    pub fn admin_token(&self, token_id: Uuid) -> Option<AdminTokenEntry> {
        self.inner.read().unwrap().admin_tokens.get(&token_id).cloned()
    }
}

fn agent_key(tenant: &str, identity: &str) -> String {
    format!("agent\u{0}{tenant}\u{0}{identity}")
}

impl Inner {
    fn retire(&mut self, hash: &str) {
        if self.by_hash.remove(hash).is_some() {
            self.retired.insert(hash.to_string());
        }
    }

    fn fold(&mut self, event: &Event) {
        let tenant = &event.tenant;
        match &event.body {
            EventBody::AgentRegistered(r) => {
                let key = (tenant.clone(), r.identity.clone());
                // The first registration holds until a removal: a second one cannot be on the
                // stream otherwise (it is appended expecting the subject's newest event).
                if self.agents.contains_key(&key) {
                    return;
                }
                self.by_hash
                    .insert(r.token_hash.clone(), agent_credential(tenant, &r.identity, None, ScopeSet::all(), None));
                let entry = AgentEntry {
                    kind: r.kind,
                    token_hash: r.token_hash.clone(),
                    registered_at: event.occurred_at,
                    tokens: BTreeMap::new(),
                };
                self.agents.insert(key, entry);
            }
            EventBody::TokenRotated(r) => {
                let key = (tenant.clone(), r.identity.clone());
                let Some(entry) = self.agents.get_mut(&key) else { return };
                let old = std::mem::replace(&mut entry.token_hash, r.token_hash.clone());
                self.retire(&old);
                self.by_hash
                    .insert(r.token_hash.clone(), agent_credential(tenant, &r.identity, None, ScopeSet::all(), None));
            }
            EventBody::AgentRemoved(r) => {
                if let Some(entry) = self.agents.remove(&(tenant.clone(), r.identity.clone())) {
                    self.retire(&entry.token_hash);
                    for token in entry.tokens.values() {
                        self.retire(&token.token_hash);
                    }
                }
            }
            EventBody::TokenIssued(t) => {
                let Some(entry) = self.agents.get_mut(&(tenant.clone(), t.identity.clone())) else { return };
                let issued = IssuedToken {
                    token_hash: t.token_hash.clone(),
                    scopes: t.scopes,
                    expires_at: t.expires_at,
                    label: t.label.clone(),
                    issued_at: event.occurred_at,
                };
                entry.tokens.insert(t.token_id, issued);
                let credential = agent_credential(tenant, &t.identity, Some(t.token_id), t.scopes, t.expires_at);
                self.by_hash.insert(t.token_hash.clone(), credential);
            }
            EventBody::TokenRevoked(t) => {
                let Some(entry) = self.agents.get_mut(&(tenant.clone(), t.identity.clone())) else { return };
                if let Some(token) = entry.tokens.remove(&t.token_id) {
                    self.retire(&token.token_hash);
                }
            }
            EventBody::AdminTokenIssued(t) => {
                let entry = AdminTokenEntry {
                    tenant: tenant.clone(),
                    token_hash: t.token_hash.clone(),
                    label: t.label.clone(),
                    issued_at: event.occurred_at,
                };
                self.admin_tokens.insert(t.token_id, entry);
                self.by_hash.insert(
                    t.token_hash.clone(),
                    Credential::TenantAdmin { tenant: tenant.clone(), token_id: t.token_id },
                );
            }
            EventBody::AdminTokenRevoked(t) => {
                if let Some(entry) = self.admin_tokens.remove(&t.token_id) {
                    self.retire(&entry.token_hash);
                }
            }
            _ => {}
        }
    }
}

fn agent_credential(
    tenant: &str,
    identity: &str,
    token_id: Option<Uuid>,
    scopes: ScopeSet,
    expires_at: Option<DateTime<Utc>>,
) -> Credential {
    Credential::Agent { tenant: tenant.to_string(), identity: identity.to_string(), token_id, scopes, expires_at }
}

#[cfg(test)]
#[path = "agent_registry_tests.rs"]
mod tests;
