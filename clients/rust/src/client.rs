//! The agent [`Client`], the thin facade: its handles and its lifecycle — start the engine's
//! background tasks (session, handler dispatch, ack batching, spool replay), wait for a
//! session, close; and stop them all when the last handle is dropped. Its options are
//! `builder.rs`, its calls `calls.rs` and `ask.rs`.
//!
//! Deliberately not the engine: the state the tasks share is `shared.rs`, the session loop
//! `session.rs`, pushed signals `delivery.rs`, calls over it `rpc.rs`, the spool replay
//! `replay.rs`. None of those imports
//! this file: the engine never holds a `Client`, so the caller's handles alone decide its life.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};
use std::time::Duration;

use crate::error::{Error, Result};
use crate::http::HttpApi;
use crate::replay::{replay_pass, ReplayReport};
use crate::shared::{ConnectionEvent, HandlerRun, Inner};
use crate::spool::Spool;
use crate::types::{Signal, Welcome};

/// The signal handler as the caller gives it: each signal with a client handle to reply with.
pub(crate) type Handler = Arc<dyn Fn(Signal, Client) -> HandlerRun + Send + Sync>;

/// Held by the caller's handles only, never by a background task (they hold `Arc<Inner>`, and
/// at most a `Weak<Life>`): so its drop, with the last handle, is the client's end.
pub(crate) struct Life {
    inner: Arc<Inner>,
    /// The caller's signal handler; the dispatch task gets a closure over it, never a `Client`.
    pub handler: Option<Handler>,
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
        self.inner.tell_closed();
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
    pub(crate) fn assemble(inner: Arc<Inner>, handler: Option<Handler>) -> Client {
        Client { life: Arc::new(Life { inner: inner.clone(), handler }), inner }
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

    /// Replays the spool once (see `replay.rs`). The background task calls this at each new
    /// session and every `replay_interval`; callers may too.
    pub async fn replay_spool(&self) -> ReplayReport {
        replay_pass(&self.inner).await
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
        if let Some(handler) = self.life.handler.clone() {
            let (inner, life) = (self.inner.clone(), Arc::downgrade(&self.life));
            let run_handler = move |sig: Signal| Client::revive(&inner, &life).map(|client| handler(sig, client));
            tasks.push(tokio::spawn(crate::delivery::dispatch(self.inner.clone(), run_handler)));
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
        self.inner.tell_closed();
    }

    /// The connection events from now on, in order: `Connected` (the first session opened),
    /// `Disconnected` (an open session was lost; the client reconnects by itself),
    /// `Reconnected` (a session opened again after a loss), `Closed` (the client stopped for
    /// good: `close()`, its last handle dropped, or the bus refused the token). A broadcast: each
    /// receiver sees every event sent after it subscribed (a receiver 64 events behind lags).
    pub fn connection_events(&self) -> tokio::sync::broadcast::Receiver<ConnectionEvent> {
        self.inner.events.subscribe()
    }
}
