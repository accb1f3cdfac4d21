//! The HTTP edge of `/mcp`, in front of rmcp's transport: every request is authenticated by
//! the agent's bearer token (a bad one is answered 401 with the CONTRACT §8 body before rmcp
//! sees it, so it never opens a session); a request naming an MCP session must be that agent's
//! and heartbeats the session's bus session; an `initialize` that opened an MCP session opens
//! its bus session (`surface: piggyback`, `kind: shim`); an open GET stream keeps heartbeating
//! until the client goes away. Oversized bodies and other methods get JSON errors too.
//!
//! Deliberately leaves the MCP protocol itself to rmcp: it reads no JSON-RPC.

use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{header, HeaderValue, Method};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::Json;
use bus::event::SessionKind;
use futures::StreamExt;
use rmcp::transport::streamable_http_server::session::SessionManager;
use serde_json::json;
use tokio_util::sync::CancellationToken;

use crate::agent::Agent;
use crate::api::mcp::bindings::{self, Caller, CallerScopes, Manager, McpSessions};
use crate::auth::{bearer, Principal};
use crate::close::CloseReason;
use crate::error::ApiError;
use crate::state::Gateway;

/// The header naming an MCP session (MCP Streamable HTTP).
const SESSION_HEADER: &str = "mcp-session-id";

/// What the edge needs: the gateway, this router's MCP sessions, rmcp's session manager, and
/// the body limit.
#[derive(Clone)]
pub(crate) struct Mcp {
    pub gw: Gateway,
    pub sessions: Arc<McpSessions>,
    pub manager: Arc<Manager>,
    pub max_body: usize,
}

pub async fn middleware(State(mcp): State<Mcp>, req: Request, next: Next) -> Response {
    match handle(&mcp, req, next).await {
        Ok(r) => r,
        Err(e) => e.into_response(),
    }
}

async fn handle(mcp: &Mcp, req: Request, next: Next) -> Result<Response, ApiError> {
    let gw = &mcp.gw;
    if !matches!(*req.method(), Method::POST | Method::GET | Method::DELETE) {
        let mut r =
            ApiError::MethodNotAllowed(format!("method {} is not allowed on /mcp", req.method())).into_response();
        r.headers_mut().insert(header::ALLOW, HeaderValue::from_static("GET, POST, DELETE"));
        return Ok(r);
    }
    if gw.shutdown_token().is_cancelled() {
        return Err(ApiError::Unavailable("the server is shutting down".into()));
    }
    let agent = authenticate(gw, &req)?;
    let req = limit_body(req, mcp.max_body).await?;
    let session = req.headers().get(SESSION_HEADER).map(|v| v.to_str().unwrap_or("").to_string());
    let Some(mcp_id) = session else {
        if req.method() != Method::POST {
            return Err(ApiError::invalid("Mcp-Session-Id is required: POST initialize first"));
        }
        return open(mcp, agent, req, next).await;
    };
    let binding = mcp
        .sessions
        .get(&mcp_id)
        .filter(|b| b.agent.tenant == agent.tenant && b.agent.identity == agent.identity)
        .ok_or_else(|| {
            ApiError::NotFound("no open mcp session with that id for this agent; initialize a new one".into())
        })?;
    if binding.agent.receives() && !gw.presence().is_open(binding.bus_session) {
        // The reaper closed its bus session (silence) before the sweep caught up.
        bindings::unbind(gw, &mcp.sessions, &mcp_id, CloseReason::Timeout).await;
        let _ = mcp.manager.close_session(&mcp_id.clone().into()).await;
        return Err(ApiError::NotFound("the mcp session ended after a silence; initialize a new one".into()));
    }
    if binding.agent.receives() {
        gw.lifecycle().piggyback_called(binding.bus_session, &agent).await;
    }
    let method = req.method().clone();
    let mut req = req;
    req.extensions_mut().insert(Caller(binding.clone()));
    // The scopes of this request's token, which may differ from the opener's.
    req.extensions_mut().insert(CallerScopes(agent.scopes));
    let response = next.run(req).await;
    if !response.status().is_success() {
        return Ok(response);
    }
    Ok(match method {
        Method::GET => heartbeat_while_open(mcp, binding.bus_session, agent, response),
        // rmcp's bare 202 is answered like `DELETE /v1/sessions/{id}`: 200 and what closed
        // (clients count 200 and 204 as success).
        Method::DELETE => {
            let body = json!({ "mcp_session_id": mcp_id, "session_id": binding.bus_session, "closed": true });
            Json(body).into_response()
        }
        _ => response,
    })
}

fn authenticate(gw: &Gateway, req: &Request) -> Result<Agent, ApiError> {
    let token = bearer(req.headers()).ok_or_else(|| ApiError::Unauthorized("missing bearer token".into()))?;
    match gw.authenticator().authenticate(token)? {
        Principal::Agent(a) => Ok(a),
        Principal::Admin(_) => Err(ApiError::Forbidden("mcp needs an agent token, not an admin token".into())),
    }
}

/// Reads a POST body whole (rmcp would too), so one over the limit is `payload_too_large` in
/// the JSON error body rather than rmcp's plain-text 413.
async fn limit_body(req: Request, max: usize) -> Result<Request, ApiError> {
    if req.method() != Method::POST {
        return Ok(req);
    }
    let (parts, body) = req.into_parts();
    let bytes = axum::body::to_bytes(body, max)
        .await
        .map_err(|_| ApiError::PayloadTooLarge(format!("an mcp message may be at most {max} bytes")))?;
    Ok(Request::from_parts(parts, Body::from(bytes)))
}

/// A POST without a session: rmcp answers `initialize` with a new `Mcp-Session-Id`, and that
/// MCP session becomes a bus session before the client learns its id. If the bus cannot
/// record it, the MCP session is closed again and the client hears why.
async fn open(mcp: &Mcp, agent: Agent, req: Request, next: Next) -> Result<Response, ApiError> {
    let response = next.run(req).await;
    let Some(mcp_id) = response.headers().get(SESSION_HEADER).and_then(|v| v.to_str().ok()).map(str::to_string) else {
        return Ok(response);
    };
    // A token without `receive` opens no bus session (CONTRACT §17): its MCP session makes
    // nobody available and carries no signals; its id is never recorded.
    if !agent.receives() {
        mcp.sessions.bind(mcp_id, agent, uuid::Uuid::new_v4());
        return Ok(response);
    }
    match mcp.gw.lifecycle().open_piggyback(&agent, SessionKind::Shim).await {
        Ok(bus_session) => {
            tracing::info!(session_id = %bus_session, identity = %agent.identity, "mcp session opened");
            mcp.sessions.bind(mcp_id, agent, bus_session);
            Ok(response)
        }
        Err(e) => {
            let _ = mcp.manager.close_session(&mcp_id.into()).await;
            Err(e.into())
        }
    }
}

/// An open GET stream is a connected agent waiting for announcements: its bus session is
/// heartbeat every heartbeat interval for as long as the stream lives (the SSE keep-alive
/// finds a vanished client), so it stays `available` with no calls at all.
fn heartbeat_while_open(mcp: &Mcp, bus_session: uuid::Uuid, agent: Agent, response: Response) -> Response {
    let gw = mcp.gw.clone();
    let open = CancellationToken::new();
    let stopped = open.clone();
    let every = gw.config().heartbeat_interval().max(Duration::from_millis(50));
    gw.tasks().clone().spawn(async move {
        let stop = gw.shutdown_token().clone();
        loop {
            tokio::select! {
                _ = stopped.cancelled() => return,
                _ = stop.cancelled() => return,
                _ = tokio::time::sleep(every) => {}
            }
            if !gw.presence().is_open(bus_session) {
                return;
            }
            gw.lifecycle().piggyback_called(bus_session, &agent).await;
        }
    });
    let guard = open.drop_guard();
    let (parts, body) = response.into_parts();
    let body = body.into_data_stream().map(move |chunk| {
        let _alive = &guard;
        chunk
    });
    Response::from_parts(parts, Body::from_stream(body))
}
