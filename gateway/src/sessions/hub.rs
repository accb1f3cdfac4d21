//! The sessions this process holds: how to queue a frame for one, how to ask one to close, and
//! which of them belong to an identity.
//!
//! Deliberately holds no socket: each session's writer task owns its socket half, and the hub
//! only holds the bounded queue in front of it, so a slow client never blocks anyone else.

use foldhash::{HashMap, HashSet};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Instant;

use bus::event::SessionKind;
use bus::scope::{Scope, ScopeSet};
use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use crate::close::CloseReason;

/// Most deliveries one session remembers for read-free acks; past that, acks of further
/// deliveries take the slow path (read the signal, decide), so a client that never acks cannot
/// grow this without bound.
const MAX_REMEMBERED: usize = 4096;

/// Non-data frames, sent ahead of any queued data.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Control {
    Ping,
    Close(CloseReason),
}

/// One live WebSocket session of this process (piggyback sessions and HTTP drains have no
/// handle: nothing is queued for them between calls).
#[derive(Debug)]
pub struct SessionHandle {
    pub id: Uuid,
    pub tenant: String,
    pub identity: String,
    pub kind: SessionKind,
    /// What its token may do: each op is checked against it (`scopes`).
    pub scopes: ScopeSet,
    /// The agent as authenticated (its token's hash and expiry), to ask whether its token is
    /// still current.
    pub agent: crate::agent::Agent,
    /// Text frames waiting for the writer; bounded by `outbound_buffer`.
    pub out: mpsc::Sender<crate::wire::Outbound>,
    pub control: mpsc::UnboundedSender<Control>,
    /// The stream position the startup drain covers (set once it is known): a live push of an
    /// older `signal.sent` is left to the drain, which hands such signals out in drain order.
    pub drain_target: watch::Sender<Option<u64>>,
    closing: CancellationToken,
    reason: Mutex<Option<CloseReason>>,
    last_seen: Mutex<Instant>,
    /// Deliveries to this session not yet acked through it: an ack of one of these needs no
    /// read to know the signal was delivered to this identity (empty sets do not allocate, so
    /// an idle session pays nothing for this).
    delivered: Mutex<HashSet<Uuid>>,
}

impl SessionHandle {
    pub fn new(
        id: Uuid,
        agent: &crate::agent::Agent,
        kind: SessionKind,
        out: mpsc::Sender<crate::wire::Outbound>,
        control: mpsc::UnboundedSender<Control>,
    ) -> Self {
        Self {
            id,
            tenant: agent.tenant.clone(),
            identity: agent.identity.clone(),
            kind,
            scopes: agent.scopes,
            agent: agent.clone(),
            out,
            control,
            drain_target: watch::channel(None).0,
            closing: CancellationToken::new(),
            reason: Mutex::new(None),
            last_seen: Mutex::new(Instant::now()),
            delivered: Mutex::new(HashSet::default()),
        }
    }

    /// Asks the session to close; the first reason given is the one recorded.
    pub fn close(&self, reason: CloseReason) {
        self.reason.lock().unwrap().get_or_insert(reason);
        self.closing.cancel();
    }

    pub fn is_closing(&self) -> bool {
        self.closing.is_cancelled()
    }

    pub fn closing(&self) -> &CancellationToken {
        &self.closing
    }

    pub fn reason(&self) -> Option<CloseReason> {
        *self.reason.lock().unwrap()
    }

    pub fn touch(&self) {
        *self.last_seen.lock().unwrap() = Instant::now();
    }

    pub fn last_seen(&self) -> Instant {
        *self.last_seen.lock().unwrap()
    }

    /// Remembers that `signal_id` was delivered to this session.
    pub fn remember_delivery(&self, signal_id: Uuid) {
        let mut set = self.delivered.lock().unwrap();
        if set.len() < MAX_REMEMBERED {
            set.insert(signal_id);
        }
    }

    /// Whether `signal_id` was delivered to this session, forgotten: an ack uses it once.
    pub fn take_delivery(&self, signal_id: Uuid) -> bool {
        self.delivered.lock().unwrap().remove(&signal_id)
    }

    /// Queues a frame; a full queue closes the session as a slow consumer (CONTRACT §7).
    pub fn send(&self, frame: String) -> bool {
        match self.out.try_send(frame.into()) {
            Ok(()) => true,
            Err(mpsc::error::TrySendError::Full(_)) => {
                self.close(CloseReason::SlowConsumer);
                false
            }
            Err(mpsc::error::TrySendError::Closed(_)) => false,
        }
    }
}

/// The sessions by id, and the same sessions by `(tenant, identity)`: every `signal.sent` the
/// tail reads asks for the recipient's sessions, which must not cost a scan of all of them.
#[derive(Debug, Default)]
struct Sessions {
    by_id: HashMap<Uuid, Arc<SessionHandle>>,
    by_identity: HashMap<(String, String), Vec<Arc<SessionHandle>>>,
}

#[derive(Debug, Default)]
pub struct Hub {
    sessions: RwLock<Sessions>,
    /// Ack ids received by this process's sessions and not yet recorded.
    acks_pending: AtomicUsize,
}

impl Hub {
    /// Counts ack ids a session received (`add`) or recorded (`done`).
    pub fn acks_received(&self, n: usize) {
        self.acks_pending.fetch_add(n, Ordering::Relaxed);
        crate::metrics::acks_pending(n as f64);
    }

    pub fn acks_recorded(&self, n: usize) {
        self.acks_pending.fetch_sub(n, Ordering::Relaxed);
        crate::metrics::acks_pending(-(n as f64));
    }

    pub fn acks_pending(&self) -> usize {
        self.acks_pending.load(Ordering::Relaxed)
    }

    pub fn insert(&self, s: Arc<SessionHandle>) {
        let mut all = self.sessions.write().unwrap();
        if let Some(old) = all.by_id.insert(s.id, s.clone()) {
            Self::unindex(&mut all, &old);
        }
        all.by_identity.entry((s.tenant.clone(), s.identity.clone())).or_default().push(s);
    }

    pub fn remove(&self, id: Uuid) {
        let mut all = self.sessions.write().unwrap();
        if let Some(old) = all.by_id.remove(&id) {
            Self::unindex(&mut all, &old);
        }
    }

    fn unindex(all: &mut Sessions, s: &Arc<SessionHandle>) {
        let key = (s.tenant.clone(), s.identity.clone());
        if let Some(list) = all.by_identity.get_mut(&key) {
            list.retain(|x| !Arc::ptr_eq(x, s));
            if list.is_empty() {
                all.by_identity.remove(&key);
            }
        }
    }

    pub fn get(&self, id: Uuid) -> Option<Arc<SessionHandle>> {
        self.sessions.read().unwrap().by_id.get(&id).cloned()
    }

    /// This process's open sessions of an identity that may be pushed to (their token holds
    /// `receive`), freshest first.
    pub fn of_identity(&self, tenant: &str, identity: &str) -> Vec<Arc<SessionHandle>> {
        let mut out = self.all_of_identity(tenant, identity);
        out.retain(|s| s.scopes.contains(Scope::Receive));
        out
    }

    /// Every open session of an identity on this process, receiving or not, freshest first.
    fn all_of_identity(&self, tenant: &str, identity: &str) -> Vec<Arc<SessionHandle>> {
        let all = self.sessions.read().unwrap();
        let Some(list) = all.by_identity.get(&(tenant.to_string(), identity.to_string())) else { return Vec::new() };
        let mut out: Vec<_> = list.iter().filter(|s| !s.is_closing()).cloned().collect();
        drop(all);
        out.sort_by_key(|s| std::cmp::Reverse(s.last_seen()));
        out
    }

    /// Closes an identity's sessions whose token `current` no longer accepts (rotated away,
    /// revoked, expired, removed), each with the reason it gives.
    pub fn close_retired_tokens(
        &self,
        tenant: &str,
        identity: &str,
        current: impl Fn(&crate::agent::Agent) -> Result<(), CloseReason>,
    ) {
        for s in self.all_of_identity(tenant, identity) {
            if let Err(reason) = current(&s.agent) {
                s.close(reason);
            }
        }
    }

    /// Closes every session of an identity held by this process; returns how many.
    pub fn close_identity(&self, tenant: &str, identity: &str, reason: CloseReason) -> usize {
        let sessions = self.all_of_identity(tenant, identity);
        for s in &sessions {
            s.close(reason);
        }
        sessions.len()
    }

    pub fn close_all(&self, reason: CloseReason) {
        for s in self.sessions.read().unwrap().by_id.values() {
            s.close(reason);
        }
    }

    pub fn len(&self) -> usize {
        self.sessions.read().unwrap().by_id.len()
    }
}
