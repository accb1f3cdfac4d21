//! The state the client's facade and its engine tasks share: [`Inner`] (the open session's
//! outbound queue, calls waiting for results, the dedupe window, the inbox, asks waiting for
//! replies, the ack buffer, the session state), and the small types several layers name.
//!
//! Deliberately behaviour-free and at the bottom: it imports no other module of the client
//! except the leaves (`error`, `http`, `spool`, `types*`), so every layer may name it and no
//! layer is imported back. The session loop is `session.rs`, calls over it `rpc.rs`, the
//! facade `client.rs`.

use std::collections::{HashMap, VecDeque};
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::Value;
use tokio::sync::{broadcast, mpsc, oneshot, watch, Notify};
use tokio::task::JoinHandle;
use tokio_tungstenite::tungstenite::Message;
use tokio_util::sync::CancellationToken;

use crate::error::{Error, Result};
use crate::http::HttpApi;
use crate::spool::{Spool, SpoolEntry};
use crate::types::{Signal, Welcome};
use crate::types_directive::Directive;
use crate::types_send::SendResult;

/// What a signal handler may fail with; a failed handler does not ack (the signal comes back).
pub type HandlerError = Box<dyn std::error::Error + Send + Sync>;
/// One run of the signal handler, as the engine awaits it (it never sees the `Client` the
/// facade lends the handler).
pub(crate) type HandlerRun = Pin<Box<dyn Future<Output = std::result::Result<(), HandlerError>> + Send>>;
/// Told about each spooled send a replay settled: accepted, refused for good, or expired.
pub type ReplayCallback = Arc<dyn Fn(&SpoolEntry, &Result<SendResult>) + Send + Sync>;

/// A mistake in the calling code: `Error::Usage`, never the bus's `InvalidRequest`.
pub(crate) fn usage(message: &str) -> Error {
    Error::Usage(message.into())
}

/// A change of the client's connection, told in this order over
/// [`Client::connection_events`](crate::Client::connection_events).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ConnectionEvent {
    /// The first session opened.
    Connected,
    /// An open session was lost; the client reconnects by itself.
    Disconnected,
    /// A session opened again after a loss.
    Reconnected,
    /// The client stopped for good: `close()`, its last handle dropped, or the bus refused the
    /// token. Told once, last.
    Closed,
}

/// What the session supervisor publishes: whether a session is open, its welcome, and the
/// error that made the client give up (a refused token).
#[derive(Debug, Clone, Default)]
pub(crate) struct SessionState {
    pub connected: bool,
    pub welcome: Option<Welcome>,
    pub fatal: Option<Error>,
    pub closed: bool,
}

/// Recently seen signal ids: `true` once handled (acked), `false` while the handler runs.
/// Bounded, oldest forgotten first, so a long-lived client does not grow without end.
#[derive(Debug, Default)]
pub(crate) struct Seen {
    window: usize,
    ids: HashMap<String, bool>,
    order: VecDeque<String>,
}

impl Seen {
    pub fn new(window: usize) -> Self {
        Seen { window, ..Seen::default() }
    }
    pub fn get(&self, id: &str) -> Option<bool> {
        self.ids.get(id).copied()
    }
    pub fn remember(&mut self, id: &str, handled: bool) {
        if self.ids.insert(id.to_string(), handled).is_none() {
            self.order.push_back(id.to_string());
        }
        while self.ids.len() > self.window {
            match self.order.pop_front() {
                Some(old) => {
                    self.ids.remove(&old);
                }
                None => break,
            }
        }
    }
    pub fn forget(&mut self, id: &str) {
        self.ids.remove(id);
        self.order.retain(|o| o != id);
    }
}

/// Everything the client's tasks share. Std mutexes: every critical section is a map or
/// option update that never awaits.
pub(crate) struct Inner {
    pub api: HttpApi,
    pub ws_url: String,
    pub auto_ack: bool,
    /// How many handler runs may be under way at once (at least 1).
    pub max_concurrent_handlers: usize,
    pub request_timeout: Duration,
    pub connect_timeout: Duration,
    pub reconnect_initial: Duration,
    pub reconnect_max: Duration,
    pub replay_gap: Duration,
    pub replay_interval: Duration,
    pub on_replay: Option<ReplayCallback>,
    pub spool: Option<Spool>,
    /// The open session's outbound queue (its writer owns the socket); `None` between sessions.
    pub out: Mutex<Option<mpsc::UnboundedSender<Message>>>,
    /// Cancelling it drops the open session's socket without a close handshake.
    pub kill: Mutex<Option<CancellationToken>>,
    /// Calls waiting for their `result` frame, by `ref`.
    pub pending: Mutex<HashMap<String, oneshot::Sender<Value>>>,
    pub refs: AtomicU64,
    pub seen: Mutex<Seen>,
    /// Asks waiting for a reply, by correlation_id.
    pub asks: Mutex<HashMap<String, oneshot::Sender<Signal>>>,
    /// `run_directive`s waiting for their directive's end, by its idempotency_key (known before
    /// the create answers, so no lifecycle signal can slip past): each gets the directive of
    /// every lifecycle signal to the issuer, and of this client's own transitions.
    pub directive_waits: Mutex<HashMap<String, Vec<mpsc::UnboundedSender<Directive>>>>,
    /// `on_directive` workers: a type pattern and the channel of its task, in registration order;
    /// a `DirectiveRequested` goes to the most specific pattern that matches.
    pub directive_workers: Mutex<Vec<(String, mpsc::UnboundedSender<Signal>)>>,
    pub inbox_tx: mpsc::UnboundedSender<Signal>,
    pub inbox_rx: tokio::sync::Mutex<mpsc::UnboundedReceiver<Signal>>,
    pub state: watch::Sender<SessionState>,
    pub identity: Mutex<Option<String>>,
    pub duplicates_dropped: AtomicU64,
    pub sessions_opened: AtomicU64,
    pub replay_wakeup: Notify,
    /// One replay pass at a time (the loop and a caller's `replay_spool`).
    pub replay_lock: tokio::sync::Mutex<()>,
    pub shutdown: CancellationToken,
    /// Ids handled and waiting to be acked in one frame (see `acks.rs`).
    pub ack_buffer: Mutex<Vec<String>>,
    pub ack_wakeup: Notify,
    pub ack_max: usize,
    pub ack_interval: Duration,
    /// Ack calls made (WS frames or HTTP requests), auto and manual: a metric of the batching.
    pub ack_calls: AtomicU64,
    pub started: AtomicBool,
    pub tasks: Mutex<Vec<JoinHandle<()>>>,
    /// Connection events, in order (a receiver that lags loses the oldest).
    pub events: broadcast::Sender<ConnectionEvent>,
    /// `Closed` was told (it is told once).
    pub closed_told: AtomicBool,
}

impl Inner {
    /// Drops every call waiting for a result: each sees the session closed (outcome unknown).
    pub fn fail_pending(&self) {
        self.pending.lock().unwrap().clear();
    }

    /// Tells a connection event to whoever listens (nobody listening is fine).
    pub fn tell(&self, event: ConnectionEvent) {
        let _ = self.events.send(event);
    }

    /// Tells `Closed`, once.
    pub fn tell_closed(&self) {
        if !self.closed_told.swap(true, std::sync::atomic::Ordering::SeqCst) {
            self.tell(ConnectionEvent::Closed);
        }
    }
}
