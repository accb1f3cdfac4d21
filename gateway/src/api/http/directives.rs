//! `POST /v1/directives`, `GET /v1/directives/{id}[?wait=S]`, `GET /v1/directives?role=&status=
//! &type=&limit=&before=`, and `POST /v1/directives/{id}/{action}` (CONTRACT §14).
//!
//! Deliberately thin: the commands live in `directives.rs`, shared with the WebSocket and MCP.

use std::collections::HashMap;

use axum::body::Bytes;
use axum::extract::rejection::{BytesRejection, PathRejection};
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::Json;
use serde_json::Value;

use crate::api::http::extract::{json_object, wait_param, PathId};
use crate::auth::AgentAuth;
use crate::directives::{self, ListRequest, MAX_WAIT};
use crate::error::ApiError;
use crate::openapi::directive_schemas::{
    CompleteBody, DirectiveBody, DirectiveCreateBody, DirectivePage, FailBody, ProgressBody, ReasonBody, StartBody,
};
use crate::state::Gateway;
use crate::wire::directives::{parse_action, parse_create};

/// Creates a directive as the authenticated agent (its issuer).
#[utoipa::path(post, path = "/v1/directives", tag = "directives", operation_id = "create_directive",
    request_body = DirectiveCreateBody,
    responses((status = 201, description = "created", body = DirectiveBody),
              (status = 200, description = "the directive this idempotency_key already names, as it is now", body = DirectiveBody)))]
pub async fn create(
    State(gw): State<Gateway>,
    AgentAuth(agent): AgentAuth,
    body: Result<Bytes, BytesRejection>,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    let req = parse_create(&json_object(body)?)?;
    let created = directives::create(&gw, &agent.tenant, &agent.identity, req).await?;
    let status = if created.created { StatusCode::CREATED } else { StatusCode::OK };
    Ok((status, Json(created.directive)))
}

/// One directive, for its issuer or a candidate; with `wait`, answered once it has ended.
#[utoipa::path(get, path = "/v1/directives/{id}", tag = "directives", operation_id = "get_directive",
    params(("id" = String, Path, description = "the directive id"),
           ("wait" = Option<u32>, Query, minimum = 0, maximum = 60, description = "answer once the directive has ended, or after this many seconds")),
    responses((status = 200, description = "the directive", body = DirectiveBody)))]
pub async fn show(
    State(gw): State<Gateway>,
    AgentAuth(agent): AgentAuth,
    PathId(id): PathId,
    Query(q): Query<HashMap<String, String>>,
) -> Result<Json<Value>, ApiError> {
    let wait = wait_param(&q, MAX_WAIT)?;
    Ok(Json(directives::get(&gw, &agent.tenant, &agent.identity, id, wait).await?))
}

/// The caller's directives, newest first.
#[utoipa::path(get, path = "/v1/directives", tag = "directives", operation_id = "list_directives",
    params(("role" = Option<String>, Query, description = "issued or assigned (default both)"),
           ("status" = Option<String>, Query, description = "open, or one status"),
           ("type" = Option<String>, Query, description = "one directive type"),
           ("limit" = Option<u32>, Query, minimum = 1, maximum = 1000, description = "page size (default 100)"),
           ("before" = Option<String>, Query, description = "next_before of the previous page")),
    responses((status = 200, description = "a page, newest first", body = DirectivePage)))]
pub async fn list(
    State(gw): State<Gateway>,
    AgentAuth(agent): AgentAuth,
    Query(q): Query<HashMap<String, String>>,
) -> Result<Json<Value>, ApiError> {
    let req = ListRequest::from_query(&q)?;
    Ok(Json(directives::list(&gw, &agent.tenant, &agent.identity, req).await?))
}

/// Carries out `action` on the directive of the path (every action handler below).
async fn act(
    gw: Gateway,
    agent: crate::agent::Agent,
    path: Result<Path<String>, PathRejection>,
    action: &str,
    body: Result<Bytes, BytesRejection>,
) -> Result<Json<Value>, ApiError> {
    let Path(id) = path.map_err(|_| ApiError::invalid("the path parameter could not be read"))?;
    let action = parse_action(action, &json_object(body)?, &[])?;
    let Some(id) = crate::wire::canonical_uuid(&id) else {
        return Err(ApiError::invalid(
            "the id in the path must be a uuid written as 8-4-4-4-12 hex digits with hyphens",
        ));
    };
    Ok(Json(directives::act(&gw, &agent.tenant, &agent.identity, id, action).await?))
}

/// One handler per action, so the document gives each its own body.
macro_rules! action {
    ($name:ident, $action:literal, $op:literal, $body:ty, $doc:literal) => {
        #[doc = $doc]
        #[utoipa::path(post, path = concat!("/v1/directives/{id}/", $action), tag = "directives", operation_id = $op,
            params(("id" = String, Path, description = "the directive id")),
            request_body(content = $body, description = "the action's body (a body may be empty or `{}` where every field is optional)"),
            responses((status = 200, description = "the directive after the action", body = DirectiveBody)))]
        pub async fn $name(
            State(gw): State<Gateway>,
            AgentAuth(agent): AgentAuth,
            path: Result<Path<String>, PathRejection>,
            body: Result<Bytes, BytesRejection>,
        ) -> Result<Json<Value>, ApiError> {
            act(gw, agent, path, $action, body).await
        }
    };
}

action!(start, "start", "start_directive", StartBody, "Claims a directive (a group's: the first member to start it).");
action!(
    progress,
    "progress",
    "report_directive_progress",
    ProgressBody,
    "Reports progress on a started directive (its claimer)."
);
action!(complete, "complete", "complete_directive", CompleteBody, "Completes a directive with its result.");
action!(fail, "fail", "fail_directive", FailBody, "Fails a directive with a code and message.");
action!(reject, "reject", "reject_directive", ReasonBody, "Declines a directive (a group member: for itself).");
action!(cancel, "cancel", "cancel_directive", ReasonBody, "Cancels a directive (its issuer).");
