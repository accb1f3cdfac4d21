//! MCP sessions bound to bus sessions: one `Binding` per MCP session of this process (its agent,
//! its piggyback bus session, the peer to notify), the rmcp session manager that records
//! `session.closed` when an MCP session ends (`DELETE /mcp` or its worker stopping), the sweep
//! that ends MCP sessions whose bus session ended (silence, found by the piggyback reaper; a
//! rotated token), the close of every session at shutdown, and the announcement of a new signal
//! to the recipient's sessions.
//!
//! Deliberately decides no silence of its own: a bus session's life is the piggyback reaper's,
//! and an MCP session only follows it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use bus::event::{PublishPath, SignalSent, Surface};
use futures::Stream;
use rmcp::model::{ClientJsonRpcMessage, ServerJsonRpcMessage};
use rmcp::service::{Peer, RoleServer};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::session::{ServerSseMessage, SessionId, SessionManager};
use serde_json::json;
use tokio_util::task::TaskTracker;
use uuid::Uuid;

use crate::agent::Agent;
use crate::api::mcp::catalog;
use crate::close::CloseReason;
use crate::metrics;
use crate::state::Gateway;

/// The MCP session a request belongs to, put on the request by the edge for the server.
#[derive(Debug, Clone)]
pub(crate) struct Caller(pub Arc<Binding>);

/// The scopes of the token a request to an MCP session presented (each call is checked
/// against its own token, which need not be the one that opened the session).
#[derive(Debug, Clone, Copy)]
pub(crate) struct CallerScopes(pub bus::scope::ScopeSet);

/// Attempts at recording a close that keeps losing its compare-and-set to heartbeats.
const MAX_CLOSE_ATTEMPTS: usize = 8;

/// One MCP session and the bus session it is.
#[derive(Debug)]
pub struct Binding {
    /// The `Mcp-Session-Id` rmcp gave it.
    pub mcp_id: String,
    pub agent: Agent,
    /// Its `surface: piggyback`, `kind: shim` bus session.
    pub bus_session: Uuid,
    /// How to reach the client between its requests (its GET stream); known from its first
    /// notification or request after `initialize`.
    peer: Mutex<Option<Peer<RoleServer>>>,
    /// Announcements stop when the client asked (`logging/setLevel`) for less than `notice`.
    quiet: Mutex<bool>,
}

impl Binding {
    pub fn set_peer(&self, peer: &Peer<RoleServer>) {
        let mut held = self.peer.lock().unwrap();
        if held.is_none() {
            *held = Some(peer.clone());
        }
    }

    pub fn set_quiet(&self, quiet: bool) {
        *self.quiet.lock().unwrap() = quiet;
    }
}

/// The MCP sessions of this process, by id and by agent (the announcement runs for every
/// `signal.sent` on the tail, so it must not scan them all).
#[derive(Debug, Default)]
pub struct McpSessions {
    inner: Mutex<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    by_id: HashMap<String, Arc<Binding>>,
    by_agent: HashMap<(String, String), Vec<Arc<Binding>>>,
}

impl McpSessions {
    pub fn bind(&self, mcp_id: String, agent: Agent, bus_session: Uuid) -> Arc<Binding> {
        let key = (agent.tenant.clone(), agent.identity.clone());
        let b = Arc::new(Binding {
            mcp_id: mcp_id.clone(),
            agent,
            bus_session,
            peer: Mutex::new(None),
            quiet: Mutex::new(false),
        });
        let mut inner = self.inner.lock().unwrap();
        inner.by_id.insert(mcp_id, b.clone());
        inner.by_agent.entry(key).or_default().push(b.clone());
        b
    }

    pub fn get(&self, mcp_id: &str) -> Option<Arc<Binding>> {
        self.inner.lock().unwrap().by_id.get(mcp_id).cloned()
    }

    fn take(&self, mcp_id: &str) -> Option<Arc<Binding>> {
        let mut inner = self.inner.lock().unwrap();
        let b = inner.by_id.remove(mcp_id)?;
        let key = (b.agent.tenant.clone(), b.agent.identity.clone());
        if let Some(list) = inner.by_agent.get_mut(&key) {
            list.retain(|x| x.mcp_id != mcp_id);
            if list.is_empty() {
                inner.by_agent.remove(&key);
            }
        }
        Some(b)
    }

    fn all(&self) -> Vec<Arc<Binding>> {
        self.inner.lock().unwrap().by_id.values().cloned().collect()
    }

    fn of_agent(&self, tenant: &str, identity: &str) -> Vec<Arc<Binding>> {
        let inner = self.inner.lock().unwrap();
        inner.by_agent.get(&(tenant.to_string(), identity.to_string())).cloned().unwrap_or_default()
    }
}

/// Ends the binding of `mcp_id`, recording its bus session's `session.closed` with `reason`
/// (unless something closed it already). Returns the binding it ended.
pub async fn unbind(gw: &Gateway, sessions: &McpSessions, mcp_id: &str, reason: CloseReason) -> Option<Arc<Binding>> {
    let b = sessions.take(mcp_id)?;
    let a = &b.agent;
    // A heartbeat appended meanwhile (an open GET stream, an owed beat) loses us the
    // compare-and-set; the close must still stick, so try again while the session is open.
    for _ in 0..MAX_CLOSE_ATTEMPTS {
        match gw.lifecycle().close(&a.tenant, &a.identity, b.bus_session, reason, None).await {
            Ok(true) => {
                metrics::session_closed(bus::event::SessionKind::Shim, Surface::Piggyback, reason.label());
                tracing::info!(session_id = %b.bus_session, identity = %a.identity, reason = reason.label(), "mcp session closed");
                break;
            }
            Ok(false) if gw.presence().is_open(b.bus_session) => continue,
            Ok(false) => break,
            // Left open on the stream: the reaper closes it once it is silent long enough.
            Err(e) => {
                tracing::warn!(error = %e, session_id = %b.bus_session, "mcp session close not recorded");
                break;
            }
        }
    }
    Some(b)
}

/// Called by the stream tail for every `signal.sent`: tells the recipient's MCP sessions on
/// this process that a signal waits (`notifications/message`, level `notice`, logger
/// `signalbus`), on their GET stream when one is open; it is delivered by their next call.
/// A signal pushed to a WebSocket session is not announced: it is not waiting.
pub fn announce(sessions: &McpSessions, tasks: &TaskTracker, tenant: &str, sent: &SignalSent) {
    if sent.publish_path == PublishPath::PushedToWs {
        return;
    }
    let peers: Vec<Peer<RoleServer>> = sessions
        .of_agent(tenant, &sent.to)
        .into_iter()
        .filter(|b| b.agent.receives() && !*b.quiet.lock().unwrap())
        .filter_map(|b| b.peer.lock().unwrap().clone())
        .collect();
    if peers.is_empty() {
        return;
    }
    let data = catalog::announcement(&json!({
        "id": sent.signal_id,
        "from": sent.from,
        "type": sent.signal_type,
        "category": sent.category.as_str(),
        "priority": sent.priority,
        "delivery_class": sent.delivery_class.as_str(),
        "expires_at": crate::wire::ts(sent.expires_at),
        "correlation_id": sent.correlation_id,
    }));
    for peer in peers {
        let data = data.clone();
        tasks.spawn(async move {
            // Logging is the one server-to-client message the session revisions (up to
            // 2025-11-25, the ones served here) deliver without a subscription step; rmcp marks
            // it deprecated for the sessionless 2026-07-28 revision only.
            #[allow(deprecated)]
            let note = rmcp::model::LoggingMessageNotificationParam::new(rmcp::model::LoggingLevel::Notice, data)
                .with_logger(catalog::LOGGER);
            #[allow(deprecated)]
            if let Err(e) = peer.notify_logging_message(note).await {
                tracing::debug!(error = %e, "mcp announcement not sent");
            }
        });
    }
}

/// rmcp's in-memory sessions, with a bus close whenever one ends.
#[derive(Debug)]
pub struct Manager {
    inner: LocalSessionManager,
    gw: Gateway,
    sessions: Arc<McpSessions>,
}

impl Manager {
    pub fn new(gw: Gateway, sessions: Arc<McpSessions>) -> Self {
        let mut inner = LocalSessionManager::default();
        // Idleness is the bus's call (the piggyback reaper, which an open GET stream keeps
        // away); rmcp's own idle timeout would end a session that waits on its GET stream.
        inner.session_config.keep_alive = None;
        Manager { inner, gw, sessions }
    }
}

impl SessionManager for Manager {
    type Error = <LocalSessionManager as SessionManager>::Error;
    type Transport = <LocalSessionManager as SessionManager>::Transport;

    async fn create_session(&self) -> Result<(SessionId, Self::Transport), Self::Error> {
        self.inner.create_session().await
    }

    async fn initialize_session(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<ServerJsonRpcMessage, Self::Error> {
        self.inner.initialize_session(id, message).await
    }

    async fn has_session(&self, id: &SessionId) -> Result<bool, Self::Error> {
        self.inner.has_session(id).await
    }

    async fn close_session(&self, id: &SessionId) -> Result<(), Self::Error> {
        let closed = self.inner.close_session(id).await;
        unbind(&self.gw, &self.sessions, id, CloseReason::ClientClosed).await;
        closed
    }

    async fn create_stream(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        self.inner.create_stream(id, message).await
    }

    async fn accept_message(&self, id: &SessionId, message: ClientJsonRpcMessage) -> Result<(), Self::Error> {
        self.inner.accept_message(id, message).await
    }

    async fn create_standalone_stream(
        &self,
        id: &SessionId,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        self.inner.create_standalone_stream(id).await
    }

    async fn resume(
        &self,
        id: &SessionId,
        last_event_id: String,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        self.inner.resume(id, last_event_id).await
    }
}

/// Until shutdown, every heartbeat interval: ends the MCP sessions whose bus session is closed
/// (the reaper found it silent, or its agent was removed) or whose token was rotated. At
/// shutdown, records the close of every MCP session while the stream is still open.
pub fn spawn_sweep(gw: Gateway, manager: Arc<Manager>) {
    let tasks = gw.tasks().clone();
    tasks.spawn(async move {
        let stop = gw.shutdown_token().clone();
        let mut tick = tokio::time::interval(gw.config().heartbeat_interval());
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = stop.cancelled() => break,
                _ = tick.tick() => {}
            }
            let now = chrono::Utc::now();
            for b in manager.sessions.all() {
                let reason = if let Err(reason) = gw.authenticator().still_current(&b.agent, now) {
                    reason
                } else if b.agent.receives() && !gw.presence().is_open(b.bus_session) {
                    CloseReason::Timeout
                } else {
                    continue;
                };
                unbind(&gw, &manager.sessions, &b.mcp_id, reason).await;
                let id: SessionId = b.mcp_id.clone().into();
                if let Err(e) = manager.inner.close_session(&id).await {
                    tracing::debug!(error = %e, "mcp session already gone");
                }
            }
        }
        for b in manager.sessions.all() {
            unbind(&gw, &manager.sessions, &b.mcp_id, CloseReason::Shutdown).await;
        }
    });
}
