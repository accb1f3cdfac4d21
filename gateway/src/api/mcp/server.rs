//! The MCP server of one session: lists the tools, runs a call against the same commands and
//! reads HTTP and WebSocket use (`send`, `commands`, `reads`, the piggyback drain), and hands
//! the caller's pending signals out on every result (`delivered_via: piggyback`).
//!
//! Deliberately knows nothing of HTTP: who calls, and which bus session it is, arrive as the
//! `Caller` the edge put on the request.

// rmcp marks logging deprecated for the sessionless 2026-07-28 revision; the revisions served
// here (up to 2025-11-25) define it, and it is how a waiting client hears of a new signal.
#![allow(deprecated)]

use std::borrow::Cow;

use bus::event::DeliveredVia;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, Implementation, InitializeResult, ListToolsResult, PaginatedRequestParams,
    ProtocolVersion, ServerCapabilities, ServerConfig, SetLevelRequestParams, Tool,
};
use rmcp::service::{NotificationContext, RequestContext, RoleServer};
use rmcp::{ErrorData, ServerHandler};
use serde_json::{json, Value};

use crate::api::mcp::bindings::{Binding, Caller, CallerScopes};
use crate::api::mcp::call::{self, Call};
use crate::api::mcp::catalog;
use crate::commands::{self, FactAuthor};
use crate::error::ApiError;
use crate::inbox::{self, InboxRead, Reader};
use crate::state::Gateway;
use crate::{directives, fanout, groups, reads, scopes, wire};

/// The newest MCP revision served: the last with sessions (`initialize`, `Mcp-Session-Id`).
/// CONTRACT §12 makes one MCP session one bus session; 2026-07-28 has no sessions, and its
/// clients fall back to this one when the server does not offer theirs.
pub const NEWEST_REVISION: ProtocolVersion = ProtocolVersion::V_2025_11_25;

/// The server info, capabilities and instructions both MCP surfaces answer `initialize` with.
pub fn info() -> ServerConfig {
    let capabilities = ServerCapabilities::builder().enable_tools().enable_logging().build();
    InitializeResult::new(capabilities)
        .with_server_info(Implementation::new("signalbus", env!("CARGO_PKG_VERSION")).with_title("signalbus"))
        .with_instructions(catalog::INSTRUCTIONS)
        .with_protocol_version(NEWEST_REVISION)
}

/// The revisions both MCP surfaces speak.
pub fn revisions() -> Cow<'static, [ProtocolVersion]> {
    Cow::Borrowed(ProtocolVersion::known_up_to(&NEWEST_REVISION))
}

/// The error for a tool that does not exist: a JSON-RPC error (the session stays up), which
/// lists the tools there are.
pub fn unknown_tool(name: &str) -> ErrorData {
    ErrorData::invalid_params(format!("unknown tool {name:?}; the tools are {}", catalog::TOOL_NAMES.join(", ")), None)
}

#[derive(Debug, Clone)]
pub struct Server {
    pub gw: Gateway,
}

fn caller(extensions: &rmcp::model::Extensions) -> Result<&Binding, ErrorData> {
    extensions
        .get::<axum::http::request::Parts>()
        .and_then(|p| p.extensions.get::<Caller>())
        .map(|c| c.0.as_ref())
        .ok_or_else(|| ErrorData::internal_error("the request reached no bus session", None))
}

impl ServerHandler for Server {
    fn get_info(&self) -> ServerConfig {
        info()
    }

    fn supported_protocol_versions(&self) -> Cow<'static, [ProtocolVersion]> {
        revisions()
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
        let b = caller(&context.extensions)?;
        b.set_peer(&context.peer);
        let parsed =
            call::parse(&request.name, request.arguments.as_ref()).ok_or_else(|| unknown_tool(&request.name))?;
        let lists_signals = matches!(parsed, Ok(Call::CheckInbox { .. } | Call::ListSignals { .. }));
        // This request's token, not the opener's: each call is held to its own scopes.
        let scopes = context
            .extensions
            .get::<axum::http::request::Parts>()
            .and_then(|p| p.extensions.get::<CallerScopes>())
            .map_or(b.agent.scopes, |s| s.0);
        let outcome = match (scopes::check(scopes, scopes::need_tool(&request.name)), parsed) {
            (Err(e), _) | (Ok(()), Err(e)) => Err(e),
            (Ok(()), Ok(c)) => run(&self.gw, b, c).await,
        };
        let receives = scopes.contains(bus::scope::Scope::Receive);
        let signals = if lists_signals || !receives { Vec::new() } else { ride_along(&self.gw, b).await };
        Ok(call::answer(outcome.map_err(|e| e.body()), signals).into())
    }

    async fn set_level(
        &self,
        request: SetLevelRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        let quiet = !matches!(
            request.level,
            rmcp::model::LoggingLevel::Debug | rmcp::model::LoggingLevel::Info | rmcp::model::LoggingLevel::Notice
        );
        caller(&context.extensions)?.set_quiet(quiet);
        Ok(())
    }

    async fn on_initialized(&self, context: NotificationContext<RoleServer>) {
        if let Ok(b) = caller(&context.extensions) {
            b.set_peer(&context.peer);
        }
    }
}

/// Runs one call for the session's agent; the answer is the HTTP answer's body.
async fn run(gw: &Gateway, b: &Binding, call: Call) -> Result<Value, ApiError> {
    let a = &b.agent;
    match call {
        Call::Send { request, .. } => {
            fanout::send_any(gw, &a.tenant, &a.identity, request).await.map(|a| a.into_json())
        }
        Call::Recall { signal_id } => {
            let outcome = commands::recall_id(gw, &a.tenant, &a.identity, &signal_id).await?;
            Ok(json!({ "outcome": outcome.as_str() }))
        }
        Call::CheckInbox { drain, limit, wait_seconds } => {
            // Drained into this session, so what it never acks is redelivered on the next one;
            // a wait heartbeats it, so the agent stays available while it waits.
            let reader = Reader { agent: a, drain_into: Some(b.bus_session), keep_alive: Some(b.bus_session) };
            let wait = std::time::Duration::from_secs(wait_seconds);
            let signals = inbox::read(gw, reader, InboxRead { drain, limit, wait }).await?;
            Ok(json!({ "signals": signals }))
        }
        Call::ListSignals { query } => {
            let req = wire::SignalList::from_query(&query.into_iter().collect())?;
            reads::signals(gw, a, req).await
        }
        Call::Ack { signal_ids } => {
            commands::ack(gw, &a.tenant, &a.identity, None, &signal_ids).await;
            Ok(json!({ "acked": signal_ids.len() }))
        }
        Call::GetSignal { signal_id } => reads::signal(gw, a, &signal_id).await,
        Call::ListAgents => Ok(reads::roster(gw, &a.tenant)),
        Call::RecordFact { plugin, fact_type, state } => {
            commands::fact(gw, &a.tenant, FactAuthor::Agent(&a.identity), &plugin, &fact_type, state)
                .await
                .map(|r| wire::fact_recorded(&r))
        }
        Call::PluginState { plugin } => reads::plugin_state(gw, &a.tenant, &plugin).await,
        Call::RecallMany { what, .. } => fanout::recall_many(gw, &a.tenant, &a.identity, what).await,
        Call::CreateDirective { request, .. } => {
            directives::create(gw, &a.tenant, &a.identity, request).await.map(|c| c.directive)
        }
        Call::GetDirective { directive_id, wait_seconds } => {
            let id = wire::canonical_uuid(&directive_id).ok_or(bus::DomainError::UnknownDirective)?;
            let wait = Some(std::time::Duration::from_secs(wait_seconds));
            directives::get(gw, &a.tenant, &a.identity, id, wait).await
        }
        Call::ListDirectives { query } => {
            let q: std::collections::HashMap<String, String> = query.into_iter().collect();
            let req = directives::ListRequest::from_query(&q)?;
            directives::list(gw, &a.tenant, &a.identity, req).await
        }
        Call::UpdateDirective { directive_id, action, .. } => {
            let id = wire::canonical_uuid(&directive_id).ok_or(bus::DomainError::UnknownDirective)?;
            directives::act(gw, &a.tenant, &a.identity, id, action).await
        }
        Call::ListGroups => groups::list(gw, &a.tenant).await,
    }
}

/// What was pending for the caller, delivered to its session by this result (the piggyback
/// drain HTTP answers use). A failed drain leaves them pending and the result goes out anyway.
async fn ride_along(gw: &Gateway, b: &Binding) -> Vec<Value> {
    if !gw.presence().is_open(b.bus_session) {
        return Vec::new();
    }
    match gw.deliverer().drain(&b.agent, Some(b.bus_session), DeliveredVia::Piggyback, gw.config().drain_batch).await {
        Ok(signals) => signals.iter().filter_map(|s| serde_json::to_value(s).ok()).collect(),
        Err(e) => {
            tracing::warn!(error = %e, session_id = %b.bus_session, "mcp piggyback drain failed; signals stay pending");
            Vec::new()
        }
    }
}
