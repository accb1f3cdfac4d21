//! `Gateway`: the cheap-to-clone handle every handler shares — configuration, stream, command
//! store, read-model queries, the session tables, the quotas — and the narrow handles built over
//! them once (`Deliverer`, `Lifecycle`) for the parts that must not see the rest.
//!
//! Deliberately data only: it starts no task and runs no logic. `app.rs` starts the background
//! tasks and shuts them down; handlers live in `api/`.

use std::sync::Arc;
use std::time::Duration;

use axum::extract::FromRef;
use bus::log::SharedLog;
use bus::store::SignalStore;
use projector::queries::Queries;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::acks::{self, AckBatcher};
use crate::agent_registry::AgentRegistry;
use crate::announcers::Announcers;
use crate::applied::Applied;
use crate::auth::Authenticator;
use crate::backpressure::Backpressure;
use crate::config::GatewayConfig;
use crate::delivery::confirm::Confirmations;
use crate::delivery::Deliverer;
use crate::ratelimit::SendLimiter;
use crate::sends::{self, SendBatcher};
use crate::sessions::heartbeats::Heartbeats;
use crate::sessions::hub::Hub;
use crate::sessions::lifecycle::Lifecycle;
use crate::sessions::presence::Presence;
use crate::waits::Waits;

#[derive(Debug)]
struct Inner {
    config: Arc<GatewayConfig>,
    store: SignalStore,
    queries: Arc<dyn Queries>,
    /// Shared with the stream tail, which applies the stream to them.
    registry: Arc<AgentRegistry>,
    /// The admin token and `registry`, for the auth extractors (`FromRef`).
    authenticator: Authenticator,
    presence: Arc<Presence>,
    hub: Arc<Hub>,
    heartbeats: Arc<Heartbeats>,
    /// Who the stream tail tells of each `signal.sent` (the MCP routers add themselves).
    announcers: Arc<Announcers>,
    /// Cancelled when the process stops accepting work: sessions close, the tail stops.
    shutdown: CancellationToken,
    /// Every session task and background task, so `run` can wait for them.
    tasks: TaskTracker,
    applied: Applied,
    limiter: Arc<SendLimiter>,
    fact_limiter: Arc<SendLimiter>,
    confirmations: Arc<Confirmations>,
    backpressure: Arc<Backpressure>,
    /// Built once: the hot path (a push per `signal.sent`) clones an `Arc`, not seven.
    deliverer: Arc<Deliverer>,
    /// Callers of `GET /v1/directives/{id}?wait=S`, woken by the tail when a directive ends.
    directive_ends: Arc<Waits<uuid::Uuid>>,
    /// Callers of `GET /v1/inbox?wait=S` (and MCP `check_inbox` with `wait_seconds`), by
    /// (tenant, identity): woken by the tail when something may have become pending for them.
    inbox_waits: Arc<Waits<(String, String)>>,
    lifecycle: Lifecycle,
    /// Where sessions hand their checked ack batches (`acks.rs`), one event per tenant per batch.
    acks: AckBatcher,
    /// Where the send flow hands the sends it may gather (`sends.rs`): one event per tenant and
    /// send window per batch.
    sends: SendBatcher,
}

/// The shared gateway handle.
#[derive(Debug, Clone)]
pub struct Gateway {
    inner: Arc<Inner>,
}

impl Gateway {
    /// The handle over empty session tables, the sender the stream tail reports its applied
    /// stream position through, and what the ack and send batchers read. Nothing runs yet:
    /// `Gateway::start` (in `app.rs`) starts it.
    pub(crate) fn new(
        log: SharedLog,
        queries: Arc<dyn Queries>,
        config: GatewayConfig,
    ) -> (Gateway, watch::Sender<u64>, acks::Inbox, sends::Inbox) {
        let (acks, acks_inbox) = AckBatcher::new();
        let (applied_tx, applied) = Applied::channel();
        let config = Arc::new(config);
        let store = SignalStore::new(log);
        let (sends, sends_inbox) = SendBatcher::new(store.clone());
        let presence = Arc::new(Presence::default());
        let hub = Arc::new(Hub::default());
        let heartbeats = Arc::new(Heartbeats::default());
        let tasks = TaskTracker::new();
        let deliverer = Arc::new(Deliverer {
            store: store.clone(),
            queries: queries.clone(),
            hub: hub.clone(),
            presence: presence.clone(),
            applied: applied.clone(),
            tasks: tasks.clone(),
            config: config.clone(),
            scheduled: Default::default(),
        });
        let lifecycle = Lifecycle {
            store: store.clone(),
            presence: presence.clone(),
            heartbeats: heartbeats.clone(),
            node: config.node.clone(),
            heartbeat_interval: config.heartbeat_interval(),
        };
        let registry: Arc<AgentRegistry> = Arc::default();
        let authenticator = Authenticator {
            admin_token: config.admin_token.as_str().into(),
            registry: registry.clone(),
            jwt: config.jwt.clone(),
        };
        let inner = Inner {
            limiter: Arc::new(SendLimiter::new(config.send_rate)),
            fact_limiter: Arc::new(SendLimiter::for_facts(config.fact_rate)),
            config,
            store,
            queries,
            registry,
            authenticator,
            presence,
            hub,
            heartbeats,
            announcers: Arc::default(),
            shutdown: CancellationToken::new(),
            tasks,
            applied,
            confirmations: Default::default(),
            backpressure: Default::default(),
            deliverer,
            directive_ends: Arc::default(),
            inbox_waits: Arc::default(),
            lifecycle,
            acks,
            sends,
        };
        (Gateway { inner: Arc::new(inner) }, applied_tx, acks_inbox, sends_inbox)
    }

    pub fn config(&self) -> &GatewayConfig {
        &self.inner.config
    }
    pub(crate) fn config_arc(&self) -> &Arc<GatewayConfig> {
        &self.inner.config
    }
    pub fn store(&self) -> &SignalStore {
        &self.inner.store
    }
    pub fn log(&self) -> &SharedLog {
        self.inner.store.log()
    }
    pub fn queries(&self) -> &Arc<dyn Queries> {
        &self.inner.queries
    }
    pub(crate) fn registry(&self) -> &Arc<AgentRegistry> {
        &self.inner.registry
    }
    pub(crate) fn presence(&self) -> &Arc<Presence> {
        &self.inner.presence
    }
    pub(crate) fn limiter(&self) -> &Arc<SendLimiter> {
        &self.inner.limiter
    }
    pub(crate) fn fact_limiter(&self) -> &Arc<SendLimiter> {
        &self.inner.fact_limiter
    }
    pub(crate) fn hub(&self) -> &Arc<Hub> {
        &self.inner.hub
    }
    pub(crate) fn heartbeats(&self) -> &Arc<Heartbeats> {
        &self.inner.heartbeats
    }
    pub(crate) fn authenticator(&self) -> &Authenticator {
        &self.inner.authenticator
    }
    pub(crate) fn announcers(&self) -> &Arc<Announcers> {
        &self.inner.announcers
    }
    pub(crate) fn shutdown_token(&self) -> &CancellationToken {
        &self.inner.shutdown
    }
    pub(crate) fn confirmations(&self) -> &Arc<Confirmations> {
        &self.inner.confirmations
    }
    pub(crate) fn backpressure(&self) -> &Arc<Backpressure> {
        &self.inner.backpressure
    }
    pub(crate) fn tasks(&self) -> &TaskTracker {
        &self.inner.tasks
    }
    pub(crate) fn directive_ends(&self) -> &Arc<Waits<uuid::Uuid>> {
        &self.inner.directive_ends
    }
    pub(crate) fn inbox_waits(&self) -> &Arc<Waits<(String, String)>> {
        &self.inner.inbox_waits
    }

    pub(crate) fn deliverer(&self) -> &Arc<Deliverer> {
        &self.inner.deliverer
    }
    pub(crate) fn lifecycle(&self) -> &Lifecycle {
        &self.inner.lifecycle
    }
    pub(crate) fn acks(&self) -> &AckBatcher {
        &self.inner.acks
    }
    pub(crate) fn sends(&self) -> &SendBatcher {
        &self.inner.sends
    }

    /// The stream position this process has applied (what back-pressure measures against).
    pub(crate) fn applied(&self) -> &Applied {
        &self.inner.applied
    }

    /// The newest stream sequence this process has applied to registry and presence.
    pub fn applied_seq(&self) -> u64 {
        self.inner.applied.get()
    }

    /// Waits until this process has applied the stream up to `seq` (or `timeout` passes).
    pub async fn wait_applied(&self, seq: u64, timeout: Duration) -> bool {
        self.inner.applied.wait(seq, timeout).await
    }

    /// Number of sessions this process holds.
    pub fn local_sessions(&self) -> usize {
        self.inner.hub.len()
    }

    /// Ack ids this process's sessions received and have not recorded yet (bounded per session).
    pub fn acks_pending(&self) -> usize {
        self.inner.hub.acks_pending()
    }
}

/// The auth extractors take only this from the gateway.
impl FromRef<Gateway> for Authenticator {
    fn from_ref(gw: &Gateway) -> Authenticator {
        gw.inner.authenticator.clone()
    }
}
