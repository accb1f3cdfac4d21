//! The MCP server of `signalbus mcp`: the same tools as the gateway's `/mcp` (its catalog and
//! argument parsing), each forwarded as the matching HTTP call to the bus with the agent's
//! token. Signals the shim's WebSocket session buffered ride on the next tool result and are
//! acked once handed over.
//!
//! Deliberately decides nothing: the bus validates, decides and answers; the shim only
//! carries the answer back, as `/mcp` would shape it.

#![allow(deprecated)] // logging: see `gateway::mcp::server` (the revisions served define it)

use std::borrow::Cow;
use std::sync::{Arc, Mutex};

use gateway::mcp::call::{self, Call};
use gateway::mcp::{catalog, server};
use reqwest::Method;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, ListToolsResult, LoggingLevel, LoggingMessageNotificationParam,
    PaginatedRequestParams, ProtocolVersion, ServerConfig, SetLevelRequestParams, Tool,
};
use rmcp::service::{NotificationContext, Peer, RequestContext, RoleServer};
use rmcp::{ErrorData, ServerHandler};
use serde_json::{json, Value};

use super::inbox::Buffer;
use crate::client::http::segment;

/// The shim's state: where the bus is, the buffer of pushed signals, and the client to
/// announce new ones to.
#[derive(Debug, Clone)]
pub struct Shim {
    pub base: String,
    /// The HTTP half of the client library, with the agent's token and a call timeout.
    pub api: signalbus_client::HttpApi,
    pub buffer: Arc<Buffer>,
    pub peer: Arc<Mutex<Option<Peer<RoleServer>>>>,
    pub quiet: Arc<Mutex<bool>>,
}

impl Shim {
    /// Announces each newly buffered signal to the client (once it is known).
    pub fn announce_pushes(&self) {
        let (peer, quiet) = (self.peer.clone(), self.quiet.clone());
        self.buffer.on_signal(Arc::new(move |signal: &Value| {
            let Some(peer) = peer.lock().unwrap().clone() else { return };
            if *quiet.lock().unwrap() {
                return;
            }
            let note = LoggingMessageNotificationParam::new(LoggingLevel::Notice, catalog::announcement(signal))
                .with_logger(catalog::LOGGER);
            tokio::spawn(async move {
                if let Err(e) = peer.notify_logging_message(note).await {
                    tracing::debug!(error = %e, "announcement not sent");
                }
            });
        }));
    }

    /// One HTTP call to the bus: `Ok` with a 2xx body, `Err` with the error body. A bus that
    /// was never reached is `unavailable` (nothing was sent); one that took the request and
    /// did not answer is `internal`, since it may have accepted it.
    async fn http(&self, method: Method, path: &str, body: Option<Value>) -> (u16, Result<Value, Value>) {
        match self.api.raw(method, path, &[], body.as_ref()).await {
            Ok((status, value)) => {
                // A body that is not a JSON document (a proxy's page) reads as `{}`.
                let value = if matches!(value, Value::String(_) | Value::Null) { json!({}) } else { value };
                (status.as_u16(), if status.is_success() { Ok(value) } else { Err(value) })
            }
            Err(e) => {
                let (code, message) = if matches!(e, signalbus_client::Error::Unreachable { .. }) {
                    ("unavailable", format!("cannot reach the bus at {}; nothing was sent", self.base))
                } else {
                    (
                        "internal",
                        "the bus did not answer; the request may have been accepted: retry with the same dedupe_key"
                            .to_string(),
                    )
                };
                tracing::warn!(error = %e, path, "bus call failed");
                (0, Err(json!({ "error": { "code": code, "message": message } })))
            }
        }
    }

    async fn forward(&self, call: &Call) -> Result<Value, Value> {
        match call {
            Call::Send { body, .. } => {
                self.http(Method::POST, "/v1/signals", Some(Value::Object(body.clone()))).await.1
            }
            Call::Recall { signal_id } => {
                let path = format!("/v1/signals/{}/recall", segment(signal_id));
                match self.http(Method::POST, &path, None).await {
                    // An outcome, not an error, as `/mcp` answers it.
                    (404, Err(body)) if body.get("outcome").is_some() => Ok(body),
                    (_, r) => r,
                }
            }
            Call::CheckInbox { drain, limit, wait_seconds } => {
                if *wait_seconds > 0 {
                    self.wait_for_signal(*wait_seconds).await;
                }
                self.http(Method::GET, &format!("/v1/inbox?drain={drain}&limit={limit}"), None).await.1
            }
            Call::ListSignals { query } => {
                let q: Vec<String> = query.iter().map(|(k, v)| format!("{k}={}", segment(v))).collect();
                self.http(Method::GET, &format!("/v1/signals?{}", q.join("&")), None).await.1
            }
            Call::Ack { signal_ids } => {
                self.http(Method::POST, "/v1/inbox/ack", Some(json!({ "signal_ids": signal_ids }))).await.1
            }
            Call::GetSignal { signal_id } => {
                self.http(Method::GET, &format!("/v1/signals/{}", segment(signal_id)), None).await.1
            }
            Call::ListAgents => self.http(Method::GET, "/v1/agents", None).await.1,
            Call::RecordFact { plugin, fact_type, state } => {
                let body = json!({ "fact_type": fact_type, "state": state });
                self.http(Method::POST, &format!("/v1/plugins/{}/facts", segment(plugin)), Some(body)).await.1
            }
            Call::PluginState { plugin } => {
                self.http(Method::GET, &format!("/v1/plugins/{}/state", segment(plugin)), None).await.1
            }
            Call::RecallMany { body, .. } => {
                self.http(Method::POST, "/v1/signals/recall", Some(Value::Object(body.clone()))).await.1
            }
            Call::CreateDirective { body, .. } => {
                self.http(Method::POST, "/v1/directives", Some(Value::Object(body.clone()))).await.1
            }
            Call::GetDirective { directive_id, wait_seconds } => {
                let path = format!("/v1/directives/{}?wait={wait_seconds}", segment(directive_id));
                self.http(Method::GET, &path, None).await.1
            }
            Call::ListDirectives { query } => {
                let q: Vec<String> = query.iter().map(|(k, v)| format!("{k}={}", segment(v))).collect();
                self.http(Method::GET, &format!("/v1/directives?{}", q.join("&")), None).await.1
            }
            Call::UpdateDirective { directive_id, name, body, .. } => {
                let path = format!("/v1/directives/{}/{name}", segment(directive_id));
                self.http(Method::POST, &path, Some(Value::Object(body.clone()))).await.1
            }
            Call::ListGroups => self.http(Method::GET, "/v1/groups", None).await.1,
        }
    }

    /// Waits up to `secs` for a signal for the agent: pushed to the shim's session (the
    /// buffer), or pending on the bus (`GET /v1/inbox?wait=`, which only looks, so cutting it
    /// short loses nothing). Returns at once when the buffer already holds one.
    async fn wait_for_signal(&self, secs: u64) {
        let arrived = self.buffer.arrived();
        tokio::pin!(arrived);
        arrived.as_mut().enable();
        if !self.buffer.is_empty() {
            return;
        }
        let path = format!("/v1/inbox?limit=1&wait={secs}");
        let pending = self.http(Method::GET, &path, None);
        tokio::select! {
            _ = arrived => {}
            _ = pending => {}
        }
    }

    /// Acks what was just handed to the agent (in the background: the result goes out now).
    fn ack(&self, handed: &[Value]) {
        let ids: Vec<Value> = handed.iter().map(|s| s["id"].clone()).filter(Value::is_string).collect();
        if ids.is_empty() {
            return;
        }
        let shim = self.clone();
        tokio::spawn(async move {
            for chunk in ids.chunks(1000) {
                if let (_, Err(e)) =
                    shim.http(Method::POST, "/v1/inbox/ack", Some(json!({ "signal_ids": chunk }))).await
                {
                    // Unacked, they come back (redelivered) on the agent's next session.
                    tracing::warn!(error = %e, "handed-over signals not acked");
                }
            }
        });
    }
}

impl ServerHandler for Shim {
    fn get_info(&self) -> ServerConfig {
        server::info()
    }

    fn supported_protocol_versions(&self) -> Cow<'static, [ProtocolVersion]> {
        server::revisions()
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(catalog::tools()))
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        catalog::tools().into_iter().find(|t| t.name == name)
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        self.peer.lock().unwrap().get_or_insert_with(|| context.peer.clone());
        let parsed = call::parse(&request.name, request.arguments.as_ref())
            .ok_or_else(|| server::unknown_tool(&request.name))?;
        let call = match parsed {
            Ok(c) => c,
            Err(e) => {
                let handed = self.buffer.take();
                self.ack(&handed);
                return Ok(call::answer(Err(e.body()), handed).into());
            }
        };
        let outcome = self.forward(&call).await;
        // A list of the agent's own signals carries no others (as `/mcp` answers it).
        if matches!(call, Call::ListSignals { .. }) {
            return Ok(call::answer(outcome, Vec::new()).into());
        }
        let handed = self.buffer.take();
        self.ack(&handed);
        let result = match (call, outcome) {
            // The inbox lists its own signals: the pushed ones come first (they are older).
            (Call::CheckInbox { .. }, Ok(mut body)) => {
                let mut all = handed;
                all.extend(body["signals"].as_array().cloned().unwrap_or_default());
                body["signals"] = Value::Array(all);
                call::answer(Ok(body), Vec::new())
            }
            (_, outcome) => call::answer(outcome, handed),
        };
        Ok(result.into())
    }

    async fn set_level(
        &self,
        request: SetLevelRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        let quiet = !matches!(request.level, LoggingLevel::Debug | LoggingLevel::Info | LoggingLevel::Notice);
        *self.quiet.lock().unwrap() = quiet;
        Ok(())
    }

    async fn on_initialized(&self, context: NotificationContext<RoleServer>) {
        self.peer.lock().unwrap().get_or_insert_with(|| context.peer.clone());
    }
}
