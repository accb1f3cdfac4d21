//! `Gateway`: the cheap-to-clone handle every handler and task shares — stream, command store,
//! read-model queries, registry, presence, local sessions — and its start and shutdown.
//!
//! Deliberately holds no per-request logic: handlers live in `http/` and `ws/`.

use std::sync::Arc;
use std::time::Duration;

use bus::log::SharedLog;
use bus::store::SignalStore;
use projector::queries::Queries;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::config::GatewayConfig;
use crate::hub::Hub;
use crate::presence::Presence;
use crate::registry::Registry;
use crate::{follower, StartError};

/// How long `start` waits to catch up with the stream before giving up.
const CATCH_UP_TIMEOUT: Duration = Duration::from_secs(120);

#[derive(Debug)]
struct Inner {
    config: GatewayConfig,
    store: SignalStore,
    queries: Arc<dyn Queries>,
    registry: Registry,
    presence: Presence,
    hub: Hub,
    piggyback: crate::piggyback::Tracker,
    /// The MCP sessions this process holds, each bound to a piggyback bus session.
    mcp: crate::mcp::Registry,
    /// Cancelled when the process stops accepting work: sessions close, the tail stops.
    shutdown: CancellationToken,
    /// Every session task and background task, so `run` can wait for them.
    tasks: TaskTracker,
    applied: watch::Receiver<u64>,
    limiter: crate::ratelimit::SendLimiter,
    confirmations: Arc<crate::confirm::Confirmations>,
    fact_limiter: crate::ratelimit::SendLimiter,
}

/// The shared gateway handle.
#[derive(Debug, Clone)]
pub struct Gateway {
    inner: Arc<Inner>,
}

impl Gateway {
    /// Starts following the stream (registry, presence, cross-process push) and returns once
    /// everything stored at the time of the call has been applied, so the first request already
    /// knows every agent and session.
    pub async fn start(
        log: SharedLog,
        queries: Arc<dyn Queries>,
        config: GatewayConfig,
    ) -> Result<Gateway, StartError> {
        let target = log.last_seq().await?;
        let (applied_tx, applied) = watch::channel(0u64);
        let gw = Gateway {
            inner: Arc::new(Inner {
                limiter: crate::ratelimit::SendLimiter::new(config.send_rate),
                fact_limiter: crate::ratelimit::SendLimiter::for_facts(config.fact_rate),
                config,
                store: SignalStore::new(log),
                queries,
                registry: Registry::default(),
                presence: Presence::default(),
                hub: Hub::default(),
                piggyback: Default::default(),
                mcp: Default::default(),
                shutdown: CancellationToken::new(),
                tasks: TaskTracker::new(),
                applied,
                confirmations: Default::default(),
            }),
        };
        follower::spawn(gw.clone(), applied_tx);
        let mut rx = gw.inner.applied.clone();
        let caught_up = tokio::time::timeout(CATCH_UP_TIMEOUT, rx.wait_for(|seq| *seq >= target)).await;
        if !matches!(caught_up, Ok(Ok(_))) {
            gw.inner.shutdown.cancel();
            return Err(StartError::CatchUp(target));
        }
        crate::reaper::spawn(gw.clone());
        crate::reaper::spawn_node_watch(gw.clone());
        tracing::info!(node = %gw.config().node, seq = target, "gateway caught up with the stream");
        Ok(gw)
    }

    pub fn config(&self) -> &GatewayConfig {
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
    pub(crate) fn registry(&self) -> &Registry {
        &self.inner.registry
    }
    pub(crate) fn presence(&self) -> &Presence {
        &self.inner.presence
    }
    pub(crate) fn limiter(&self) -> &crate::ratelimit::SendLimiter {
        &self.inner.limiter
    }
    pub(crate) fn fact_limiter(&self) -> &crate::ratelimit::SendLimiter {
        &self.inner.fact_limiter
    }
    pub(crate) fn hub(&self) -> &Hub {
        &self.inner.hub
    }
    pub(crate) fn piggyback(&self) -> &crate::piggyback::Tracker {
        &self.inner.piggyback
    }
    pub(crate) fn mcp(&self) -> &crate::mcp::Registry {
        &self.inner.mcp
    }
    pub(crate) fn shutdown_token(&self) -> &CancellationToken {
        &self.inner.shutdown
    }
    pub(crate) fn confirmations(&self) -> &Arc<crate::confirm::Confirmations> {
        &self.inner.confirmations
    }
    pub(crate) fn tasks(&self) -> &TaskTracker {
        &self.inner.tasks
    }

    /// The newest stream sequence this process has applied to registry and presence.
    pub fn applied_seq(&self) -> u64 {
        *self.inner.applied.borrow()
    }

    /// Waits until this process has applied the stream up to `seq` (or `timeout` passes).
    pub async fn wait_applied(&self, seq: u64, timeout: Duration) -> bool {
        let mut rx = self.inner.applied.clone();
        let reached = tokio::time::timeout(timeout, rx.wait_for(|s| *s >= seq)).await;
        matches!(reached, Ok(Ok(_)))
    }

    /// Number of sessions this process holds.
    pub fn local_sessions(&self) -> usize {
        self.inner.hub.len()
    }

    /// Ack ids this process's sessions received and have not recorded yet (bounded per session).
    pub fn acks_pending(&self) -> usize {
        self.inner.hub.acks_pending()
    }

    /// Stops accepting work and asks every session to close; `run` waits for them.
    pub fn begin_shutdown(&self) {
        self.inner.shutdown.cancel();
        self.inner.hub.close_all(crate::hub::CloseReason::Shutdown);
    }

    /// Waits (up to `shutdown_grace`) for every session and background task to finish.
    pub async fn drained(&self) {
        self.inner.tasks.close();
        if tokio::time::timeout(self.inner.config.shutdown_grace, self.inner.tasks.wait()).await.is_err() {
            tracing::warn!(sessions = self.inner.hub.len(), "shutdown grace elapsed with sessions still open");
        }
    }
}
