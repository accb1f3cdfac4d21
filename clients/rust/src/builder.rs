//! [`ClientBuilder`]: a client's options with their defaults, and building the shared state
//! of a [`Client`] from them.
//!
//! Deliberately starts nothing: `Client::connect` (or `start`) does, so a client built only for
//! HTTP calls or a spool replay opens no session.

use std::collections::HashMap;
use std::future::Future;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{mpsc, watch, Notify};
use tokio_util::sync::CancellationToken;

use crate::client::{Client, Handler};
use crate::error::Result;
use crate::http::{segment, HttpApi};
use crate::shared::{usage, HandlerError, Inner, ReplayCallback, Seen, SessionState};
use crate::spool::{Spool, SpoolEntry, DEFAULT_MAX_AGE_SECONDS, DEFAULT_MAX_BYTES};
use crate::types::Signal;
use crate::types_send::SendResult;

impl Client {
    /// Options for a client of the bus at `url` (`http(s)://host:port`) with an agent `token`.
    pub fn builder(url: impl Into<String>, token: impl Into<String>) -> ClientBuilder {
        ClientBuilder {
            url: url.into(),
            token: token.into(),
            kind: None,
            handler: None,
            auto_ack: true,
            max_concurrent_handlers: 1,
            spool_dir: None,
            spool_max_bytes: DEFAULT_MAX_BYTES,
            spool_max_age_seconds: DEFAULT_MAX_AGE_SECONDS,
            replay_rate: 20.0,
            replay_interval: Duration::from_secs(5),
            on_replay: None,
            identity: None,
            request_timeout: Duration::from_secs(15),
            connect_timeout: Duration::from_secs(10),
            reconnect_initial: Duration::from_millis(500),
            reconnect_max: Duration::from_secs(30),
            dedupe_window: 10_000,
            ack_max: 100,
            ack_interval: Duration::from_millis(20),
        }
    }
}

/// Options of a [`Client`]; start with [`Client::builder`].
pub struct ClientBuilder {
    url: String,
    token: String,
    kind: Option<String>,
    handler: Option<Handler>,
    auto_ack: bool,
    max_concurrent_handlers: usize,
    spool_dir: Option<PathBuf>,
    spool_max_bytes: u64,
    spool_max_age_seconds: u64,
    replay_rate: f64,
    replay_interval: Duration,
    on_replay: Option<ReplayCallback>,
    identity: Option<String>,
    request_timeout: Duration,
    connect_timeout: Duration,
    reconnect_initial: Duration,
    reconnect_max: Duration,
    dedupe_window: usize,
    ack_max: usize,
    ack_interval: Duration,
}

impl std::fmt::Debug for ClientBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientBuilder").field("url", &self.url).field("kind", &self.kind).finish_non_exhaustive()
    }
}

impl ClientBuilder {
    /// `?kind=` of the session: `daemon`, `shim` or `interactive` (the bus's default).
    pub fn kind(mut self, kind: impl Into<String>) -> Self {
        self.kind = Some(kind.into());
        self
    }
    /// Each pushed signal goes once to `handler`, which gets a clone of the client to reply
    /// with; with `auto_ack` (default) it is acked after the handler returns `Ok`.
    pub fn on_signal<F, Fut>(mut self, handler: F) -> Self
    where
        F: Fn(Signal, Client) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = std::result::Result<(), HandlerError>> + Send + 'static,
    {
        self.handler = Some(Arc::new(move |s, c| Box::pin(handler(s, c))));
        self
    }
    pub fn auto_ack(mut self, on: bool) -> Self {
        self.auto_ack = on;
        self
    }
    /// How many handler runs may be under way at once (default 1). With 1, signals are handled
    /// one after the other in the order they arrived; with more, they start in that order but
    /// may finish (and be acked) in any order — a slow handler no longer holds back the next
    /// signal. 0 is a usage error at `build`.
    pub fn max_concurrent_handlers(mut self, n: usize) -> Self {
        self.max_concurrent_handlers = n;
        self
    }
    /// Spool sends the bus cannot take here (one directory per identity).
    pub fn spool_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.spool_dir = Some(dir.into());
        self
    }
    /// Spool caps (defaults 100 MB, 24 h), evicting oldest first.
    pub fn spool_caps(mut self, max_bytes: u64, max_age: Duration) -> Self {
        self.spool_max_bytes = max_bytes;
        self.spool_max_age_seconds = max_age.as_secs().max(1);
        self
    }
    /// Replayed sends per second (default 20), so a returning bus is not flooded.
    pub fn replay_rate(mut self, per_second: f64) -> Self {
        self.replay_rate = per_second;
        self
    }
    /// How often the spool is retried besides at each new session (default 5 s).
    pub fn replay_interval(mut self, every: Duration) -> Self {
        self.replay_interval = every;
        self
    }
    pub fn on_replay(mut self, callback: impl Fn(&SpoolEntry, &Result<SendResult>) + Send + Sync + 'static) -> Self {
        self.on_replay = Some(Arc::new(callback));
        self
    }
    /// The identity the token belongs to, before a welcome says so: spool entries are stamped
    /// with it and only replayed by it.
    pub fn identity(mut self, identity: impl Into<String>) -> Self {
        self.identity = Some(identity.into());
        self
    }
    /// How long a call waits for its answer (default 15 s).
    pub fn request_timeout(mut self, t: Duration) -> Self {
        self.request_timeout = t;
        self
    }
    /// How long `connect` waits for the first session (default 10 s).
    pub fn connect_timeout(mut self, t: Duration) -> Self {
        self.connect_timeout = t;
        self
    }
    /// Reconnect backoff: starts at `initial` (0.5 s), doubles up to `max` (30 s), jittered.
    pub fn reconnect(mut self, initial: Duration, max: Duration) -> Self {
        self.reconnect_initial = initial;
        self.reconnect_max = max.max(initial);
        self
    }
    /// How many recent signal ids are remembered to drop redeliveries (default 10,000).
    pub fn dedupe_window(mut self, n: usize) -> Self {
        self.dedupe_window = n.max(1);
        self
    }

    /// Auto-acks are batched: one `ack` frame per `max` ids (default 100) or per `interval`
    /// (default 20 ms) after the first id waiting, whichever comes first.
    pub fn ack_batching(mut self, max: usize, interval: Duration) -> Self {
        self.ack_max = max.clamp(1, 1000);
        self.ack_interval = interval;
        self
    }

    pub fn build(self) -> Result<Client> {
        if self.replay_rate.is_nan() || self.replay_rate <= 0.0 {
            return Err(usage("replay_rate must be positive (sends per second)"));
        }
        if self.max_concurrent_handlers == 0 {
            return Err(usage("max_concurrent_handlers must be at least 1"));
        }
        let api = HttpApi::new(&self.url, &self.token, Some(self.request_timeout))?;
        let spool = match &self.spool_dir {
            Some(dir) => Some(Spool::open(dir, self.spool_max_bytes, self.spool_max_age_seconds)?),
            None => None,
        };
        let ws_scheme = if api.base().starts_with("https://") { "wss://" } else { "ws://" };
        let host_path = api.base().split_once("://").map_or("", |(_, rest)| rest);
        let mut ws_url = format!("{ws_scheme}{host_path}/v1/ws");
        if let Some(k) = &self.kind {
            ws_url.push_str(&format!("?kind={}", segment(k)));
        }
        let (inbox_tx, inbox_rx) = mpsc::unbounded_channel();
        let (state, _) = watch::channel(SessionState::default());
        let inner = Arc::new(Inner {
            api,
            ws_url,
            auto_ack: self.auto_ack,
            max_concurrent_handlers: self.max_concurrent_handlers,
            request_timeout: self.request_timeout,
            connect_timeout: self.connect_timeout,
            reconnect_initial: self.reconnect_initial,
            reconnect_max: self.reconnect_max,
            replay_gap: Duration::from_secs_f64(1.0 / self.replay_rate),
            replay_interval: self.replay_interval,
            on_replay: self.on_replay,
            spool,
            out: Mutex::new(None),
            kill: Mutex::new(None),
            pending: Mutex::new(HashMap::new()),
            refs: AtomicU64::new(0),
            seen: Mutex::new(Seen::new(self.dedupe_window)),
            asks: Mutex::new(HashMap::new()),
            directive_waits: Mutex::new(HashMap::new()),
            directive_workers: Mutex::new(Vec::new()),
            inbox_tx,
            inbox_rx: tokio::sync::Mutex::new(inbox_rx),
            state,
            identity: Mutex::new(self.identity),
            duplicates_dropped: AtomicU64::new(0),
            sessions_opened: AtomicU64::new(0),
            replay_wakeup: Notify::new(),
            replay_lock: tokio::sync::Mutex::new(()),
            shutdown: CancellationToken::new(),
            started: AtomicBool::new(false),
            ack_buffer: Mutex::new(Vec::new()),
            ack_wakeup: Notify::new(),
            ack_max: self.ack_max,
            ack_interval: self.ack_interval,
            ack_calls: AtomicU64::new(0),
            tasks: Mutex::new(Vec::new()),
            events: tokio::sync::broadcast::channel(64).0,
            closed_told: AtomicBool::new(false),
        });
        Ok(Client::assemble(inner, self.handler))
    }
}
