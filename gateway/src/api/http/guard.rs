//! The HTTP guard: authenticates every `/v1` call once and holds it to the scope table
//! (`scopes::HTTP`) before any handler or the piggyback middleware runs, so a call outside its
//! token's scopes touches nothing — not even a piggyback session's heartbeat.
//!
//! Deliberately checks only what the table says: admin tenancy is the admin extractor's
//! (`AdminAuth::tenant`), ownership the handler's. The principal it found rides on the request
//! for the extractors, so a token is hashed and looked up once per call.

use axum::extract::{MatchedPath, Request, State};
use axum::http::{header, HeaderValue};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::auth::{bearer, AdminAuth, Principal};
use crate::error::ApiError;
use crate::scopes::{self, Need};
use crate::state::Gateway;

pub async fn middleware(
    State(gw): State<Gateway>,
    matched: Option<MatchedPath>,
    mut req: Request,
    next: Next,
) -> Response {
    match admit(&gw, matched.as_ref().map(MatchedPath::as_str), &req) {
        Ok(principal) => {
            req.extensions_mut().insert(principal);
            next.run(req).await
        }
        Err(e) => refuse(req, e).await,
    }
}

/// Most of a refused call's body read before answering, so the connection stays usable.
const DRAIN_BYTES: usize = 64 * 1024;

/// Answers a refused call. Its body is read first (up to `DRAIN_BYTES`, for at most a second):
/// a client that is still writing it when the answer goes out would otherwise see its
/// keep-alive connection dropped under its next call. A larger or slower body gets
/// `Connection: close` instead.
async fn refuse(req: Request, e: ApiError) -> Response {
    let drained =
        tokio::time::timeout(std::time::Duration::from_secs(1), axum::body::to_bytes(req.into_body(), DRAIN_BYTES))
            .await;
    let mut response = e.into_response();
    if !matches!(drained, Ok(Ok(_))) {
        response.headers_mut().insert(header::CONNECTION, HeaderValue::from_static("close"));
    }
    response
}

fn admit(gw: &Gateway, path: Option<&str>, req: &Request) -> Result<Principal, ApiError> {
    let token = bearer(req.headers()).ok_or_else(|| ApiError::Unauthorized("missing bearer token".into()))?;
    let principal = gw.authenticator().authenticate(token)?;
    let Some(need) = path.and_then(|p| scopes::need_http(req.method(), p)) else {
        // Fail closed: a route missing from the table is a bug, never an open door.
        tracing::error!(method = %req.method(), path = ?path, "route missing from the scope table");
        return Err(ApiError::Forbidden("this call is not permitted".into()));
    };
    match (&principal, need) {
        (Principal::Agent(agent), need) => scopes::check(agent.scopes, need)?,
        (Principal::Admin(role), Need::GlobalAdmin) => AdminAuth(role.clone()).global()?,
        (Principal::Admin(_), _) => {}
    }
    Ok(principal)
}
