//! The agent [`Client`]: its shared state and its lifecycle — start the background tasks
//! (session, handler, ack batching, spool replay), wait for a session, close; and stop them all
//! when the last handle is dropped. Its options are `builder.rs`.
//!
//! Deliberately not the protocol: the session loop is `session.rs`, the calls are `calls.rs`,
//! the spool replay `replay.rs`, ask/reply `ask.rs`. This file owns what they share.

use std::collections::{HashMap, VecDeque};
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use serde_json::Value;
use tokio::sync::{mpsc, oneshot, watch, Notify};
use tokio::task::JoinHandle;
use tokio_tungstenite::tungstenite::Message;
use tokio_util::sync::CancellationToken;

use crate::error::{BusError, Error, Result};
use crate::http::HttpApi;
use crate::spool::{Spool, SpoolEntry};
use crate::types::{SendResult, Signal, Welcome};

/// What a signal handler may fail with; a failed handler does not ack (the signal comes back).
pub type HandlerError = Box<dyn std::error::Error + Send + Sync>;
type BoxFuture = Pin<Box<dyn Future<Output = std::result::Result<(), HandlerError>> + Send>>;
pub(crate) type Handler = Arc<dyn Fn(Signal, Client) -> BoxFuture + Send + Sync>;
/// Told about each spooled send a replay settled: accepted, refused for good, or expired.
pub type ReplayCallback = Arc<dyn Fn(&SpoolEntry, &Result<SendResult>) + Send + Sync>;

pub(crate) fn usage(message: &str) -> Error {
    Error::InvalidRequest(Box::new(BusError {
        code: "invalid_request".into(),
        message: message.into(),
        status: None,
        details: Default::default(),
    }))
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
    pub request_timeout: Duration,
    pub connect_timeout: Duration,
    pub reconnect_initial: Duration,
    pub reconnect_max: Duration,
    pub replay_gap: Duration,
    pub replay_interval: Duration,
    pub handler: Option<Handler>,
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
}

impl Inner {
    /// Drops every call waiting for a result: each sees the session closed (outcome unknown).
    pub fn fail_pending(&self) {
        self.pending.lock().unwrap().clear();
    }
}

/// Held by the caller's handles only, never by a background task (they hold `Arc<Inner>`, and
/// at most a `Weak<Life>`): so its drop, with the last handle, is the client's end.
pub(crate) struct Life {
    inner: Arc<Inner>,
}

impl Drop for Life {
    fn drop(&mut self) {
        if self.inner.shutdown.is_cancelled() {
            return;
        }
        // No await here: the session task sees the cancel and closes its socket (1000) itself;
        // acks still buffered are not sent, so those signals come back to the next session.
        tracing::info!(url = self.inner.api.base(), "the last handle of the client was dropped: stopping its tasks");
        self.inner.state.send_modify(|s| s.closed = true);
        self.inner.shutdown.cancel();
    }
}

/// An agent's client: one WebSocket session kept open (reconnecting with jittered backoff,
/// heartbeating, resuming delivery with redeliveries deduped), the HTTP API, and an optional
/// offline spool. Cheap to clone. [`Client::close`] is the graceful end (acks flushed, close
/// 1000); dropping the last clone also stops every background task, without the ack flush.
#[derive(Clone)]
pub struct Client {
    pub(crate) inner: Arc<Inner>,
    pub(crate) life: Arc<Life>,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client").field("url", &self.inner.api.base()).field("connected", &self.connected()).finish()
    }
}

impl Client {
    pub(crate) fn from_inner(inner: Arc<Inner>) -> Client {
        Client { life: Arc::new(Life { inner: inner.clone() }), inner }
    }

    /// A handle for a background task to lend out (the handler's), while the caller still
    /// holds one; `None` once the last is gone.
    pub(crate) fn revive(inner: &Arc<Inner>, life: &Weak<Life>) -> Option<Client> {
        life.upgrade().map(|life| Client { inner: inner.clone(), life })
    }

    /// A client with default options (HTTP calls work at once; `connect` opens the session).
    pub fn new(url: impl Into<String>, token: impl Into<String>) -> Result<Client> {
        Client::builder(url, token).build()
    }

    /// The HTTP half, for calls this client has no method for.
    pub fn http(&self) -> &HttpApi {
        &self.inner.api
    }

    pub fn welcome(&self) -> Option<Welcome> {
        self.inner.state.borrow().welcome.clone()
    }
    pub fn connected(&self) -> bool {
        self.inner.state.borrow().connected
    }
    /// The identity: the welcome's, else the one given to the builder.
    pub fn identity(&self) -> Option<String> {
        self.inner.identity.lock().unwrap().clone()
    }
    pub fn spool(&self) -> Option<&Spool> {
        self.inner.spool.as_ref()
    }
    /// Sessions opened so far (1 after `connect`, 2 after one reconnect, ...).
    pub fn sessions_opened(&self) -> u64 {
        self.inner.sessions_opened.load(Ordering::Relaxed)
    }
    /// Redelivered signals dropped because their id was seen already.
    pub fn duplicates_dropped(&self) -> u64 {
        self.inner.duplicates_dropped.load(Ordering::Relaxed)
    }
    /// Ack calls made so far (WS frames or HTTP requests, auto and manual); with batching,
    /// fewer than the signals acked.
    pub fn ack_calls(&self) -> u64 {
        self.inner.ack_calls.load(Ordering::Relaxed)
    }

    /// Starts the session supervisor, the handler and the spool replay in the background
    /// without waiting for the bus. Needs a tokio runtime.
    pub fn start(&self) -> Result<()> {
        if self.inner.shutdown.is_cancelled() {
            return Err(Error::Closed);
        }
        if self.inner.started.swap(true, Ordering::SeqCst) {
            return Ok(());
        }
        // No task gets a `Client`: a strong handle there would keep the client alive forever.
        let mut tasks = self.inner.tasks.lock().unwrap();
        tasks.push(tokio::spawn(crate::session::supervise(self.inner.clone())));
        tasks.push(tokio::spawn(crate::acks::ack_loop(self.inner.clone())));
        if self.inner.handler.is_some() {
            tasks.push(tokio::spawn(crate::session::dispatch(self.inner.clone(), Arc::downgrade(&self.life))));
        }
        if self.inner.spool.is_some() {
            tasks.push(tokio::spawn(crate::replay::replay_loop(self.inner.clone())));
        }
        Ok(())
    }

    /// Starts (see `start`) and waits for the first session's welcome. A refused token fails
    /// with `Unauthorized` and the client stops trying; no session within the connect timeout
    /// is `Timeout` (the client keeps trying in the background until `close`).
    pub async fn connect(&self) -> Result<Welcome> {
        self.start()?;
        self.wait_connected(self.inner.connect_timeout).await
    }

    /// Waits until a session is open (or the client gave up, or `timeout` passed).
    pub async fn wait_connected(&self, timeout: Duration) -> Result<Welcome> {
        let mut rx = self.inner.state.subscribe();
        let wait = async {
            loop {
                {
                    let s = rx.borrow_and_update();
                    if let Some(fatal) = &s.fatal {
                        return Err(fatal.clone());
                    }
                    if s.closed {
                        return Err(Error::Closed);
                    }
                    if let (true, Some(w)) = (s.connected, &s.welcome) {
                        return Ok(w.clone());
                    }
                }
                if rx.changed().await.is_err() {
                    return Err(Error::Closed);
                }
            }
        };
        tokio::time::timeout(timeout, wait).await.unwrap_or_else(|_| {
            Err(Error::Timeout {
                message: format!(
                    "no session with {} within {timeout:?}; still trying in the background",
                    self.inner.api.base()
                ),
                dedupe_key: None,
            })
        })
    }

    /// Waits until no session is open.
    pub async fn wait_disconnected(&self, timeout: Duration) -> Result<()> {
        let mut rx = self.inner.state.subscribe();
        let waited = tokio::time::timeout(timeout, async { rx.wait_for(|s| !s.connected).await.map(|_| ()) }).await;
        match waited {
            Ok(_) => Ok(()),
            Err(_) => Err(Error::Timeout {
                message: format!("the session did not close within {timeout:?}"),
                dedupe_key: None,
            }),
        }
    }

    /// Drops the open socket without a close handshake, as a network failure would; the client
    /// reconnects. For tests and for callers who know the link is dead.
    pub fn drop_connection(&self) {
        if let Some(kill) = self.inner.kill.lock().unwrap().as_ref() {
            kill.cancel();
        }
    }

    /// Flushes the acks still buffered, closes the session (1000) and stops every background
    /// task. Calls still waiting fail with `Closed` or `Transport`; a signal handled but not
    /// acked (the flush failed) comes back next time.
    pub async fn close(&self) {
        if !self.inner.shutdown.is_cancelled() {
            crate::acks::flush_before_close(&self.inner).await;
        }
        self.inner.state.send_modify(|s| s.closed = true);
        self.inner.shutdown.cancel();
        let tasks: Vec<_> = std::mem::take(&mut *self.inner.tasks.lock().unwrap());
        for task in tasks {
            let abort = task.abort_handle();
            if tokio::time::timeout(Duration::from_secs(3), task).await.is_err() {
                abort.abort();
            }
        }
        self.inner.fail_pending();
        self.inner.asks.lock().unwrap().clear();
    }
}
