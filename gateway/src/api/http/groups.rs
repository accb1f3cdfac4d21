//! `PUT|DELETE /v1/groups/{name}`, `PUT|DELETE /v1/groups/{name}/members/{identity}` (admin),
//! `POST /v1/groups/{name}/join|leave` (agent), `GET /v1/groups[/{name}]`, and
//! `POST /v1/signals/recall` by fan-out or conversation (CONTRACT §15).
//!
//! Deliberately thin: the commands live in `groups.rs` and `fanout.rs`, shared with MCP.

use std::collections::HashMap;

use axum::body::Bytes;
use axum::extract::rejection::{BytesRejection, PathRejection};
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::Json;
use bus::group::GroupCommand;
use serde_json::{Map, Value};

use crate::api::http::agents::admin_tenant;
use crate::api::http::extract::{json_object, only_fields};
use crate::auth::{AdminAuth, AgentAuth, Authed, Principal};
use crate::error::ApiError;
use crate::groups::{self, ADMIN_ACTOR};
use crate::openapi::directive_schemas::{GroupBody, GroupList, GroupUpsertBody, RecallManyAnswer, RecallManyBody};
use crate::state::Gateway;
use crate::{fanout, groups::Changed};

/// The group named by the `{name}` path segment (without its `@`, or with it).
fn group_of(path: Result<Path<String>, PathRejection>) -> Result<String, ApiError> {
    let Path(name) = path.map_err(|_| ApiError::invalid("the group name in the path could not be read"))?;
    groups::name(&name)
}

fn bool_field(map: &Map<String, Value>, key: &str, default: bool) -> Result<bool, ApiError> {
    match map.get(key) {
        None | Some(Value::Null) => Ok(default),
        Some(Value::Bool(b)) => Ok(*b),
        Some(_) => Err(ApiError::invalid(format!("{key} must be true or false"))),
    }
}

fn answer(changed: Changed) -> (StatusCode, Json<Value>) {
    (if changed.created { StatusCode::CREATED } else { StatusCode::OK }, Json(changed.group))
}

/// Creates a group, or changes its settings.
#[utoipa::path(put, path = "/v1/groups/{name}", tag = "groups", operation_id = "put_group",
    params(("name" = String, Path, description = "the group's name without its @")),
    request_body = GroupUpsertBody,
    responses((status = 201, description = "created", body = GroupBody), (status = 200, description = "updated (or unchanged)", body = GroupBody)))]
pub async fn upsert(
    State(gw): State<Gateway>,
    admin: AdminAuth,
    name: Result<Path<String>, PathRejection>,
    body: Result<Bytes, BytesRejection>,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    let group = group_of(name)?;
    let map = json_object(body)?;
    only_fields(&map, &["tenant", "self_join", "announce"])?;
    let tenant = admin_tenant(&gw, &admin, crate::api::http::extract::opt_str(&map, "tenant")?)?;
    let command = GroupCommand::Upsert {
        group,
        self_join: bool_field(&map, "self_join", false)?,
        announce: bool_field(&map, "announce", true)?,
    };
    Ok(answer(groups::execute(&gw, &tenant, command, ADMIN_ACTOR).await?))
}

/// Deletes a group with its memberships (signals already sent are untouched).
#[utoipa::path(delete, path = "/v1/groups/{name}", tag = "groups", operation_id = "delete_group",
    params(("name" = String, Path, description = "the group's name without its @"), ("tenant" = Option<String>, Query)),
    responses((status = 200, description = "deleted", body = GroupBody)))]
pub async fn delete(
    State(gw): State<Gateway>,
    admin: AdminAuth,
    name: Result<Path<String>, PathRejection>,
    Query(q): Query<HashMap<String, String>>,
) -> Result<Json<Value>, ApiError> {
    let group = group_of(name)?;
    let tenant = admin_tenant(&gw, &admin, q.get("tenant").map(String::as_str))?;
    Ok(Json(groups::execute(&gw, &tenant, GroupCommand::Delete { group }, ADMIN_ACTOR).await?.group))
}

/// The `{name}` and `{identity}` of a member path.
fn member_of(path: Result<Path<(String, String)>, PathRejection>) -> Result<(String, String), ApiError> {
    let Path((name, identity)) = path.map_err(|_| ApiError::invalid("the path parameters could not be read"))?;
    bus::names::validate_identity(&identity)?;
    Ok((groups::name(&name)?, identity))
}

/// Adds a member (idempotent).
#[utoipa::path(put, path = "/v1/groups/{name}/members/{identity}", tag = "groups", operation_id = "add_group_member",
    params(("name" = String, Path), ("identity" = String, Path), ("tenant" = Option<String>, Query)),
    responses((status = 200, description = "the group with the member", body = GroupBody)))]
pub async fn add_member(
    State(gw): State<Gateway>,
    admin: AdminAuth,
    path: Result<Path<(String, String)>, PathRejection>,
    Query(q): Query<HashMap<String, String>>,
) -> Result<Json<Value>, ApiError> {
    let (group, identity) = member_of(path)?;
    let tenant = admin_tenant(&gw, &admin, q.get("tenant").map(String::as_str))?;
    let command = GroupCommand::AddMember { group, identity, by: ADMIN_ACTOR.into() };
    Ok(Json(groups::execute(&gw, &tenant, command, ADMIN_ACTOR).await?.group))
}

/// Removes a member (idempotent).
#[utoipa::path(delete, path = "/v1/groups/{name}/members/{identity}", tag = "groups", operation_id = "remove_group_member",
    params(("name" = String, Path), ("identity" = String, Path), ("tenant" = Option<String>, Query)),
    responses((status = 200, description = "the group without the member", body = GroupBody)))]
pub async fn remove_member(
    State(gw): State<Gateway>,
    admin: AdminAuth,
    path: Result<Path<(String, String)>, PathRejection>,
    Query(q): Query<HashMap<String, String>>,
) -> Result<Json<Value>, ApiError> {
    let (group, identity) = member_of(path)?;
    let tenant = admin_tenant(&gw, &admin, q.get("tenant").map(String::as_str))?;
    let command = GroupCommand::RemoveMember { group, identity, by: ADMIN_ACTOR.into() };
    Ok(Json(groups::execute(&gw, &tenant, command, ADMIN_ACTOR).await?.group))
}

/// The caller joins a self-join group.
#[utoipa::path(post, path = "/v1/groups/{name}/join", tag = "groups", operation_id = "join_group",
    params(("name" = String, Path)),
    responses((status = 200, description = "the group with the caller", body = GroupBody)))]
pub async fn join(
    State(gw): State<Gateway>,
    AgentAuth(agent): AgentAuth,
    name: Result<Path<String>, PathRejection>,
) -> Result<Json<Value>, ApiError> {
    let command = GroupCommand::Join { group: group_of(name)?, identity: agent.identity.clone() };
    Ok(Json(groups::execute(&gw, &agent.tenant, command, &agent.identity).await?.group))
}

/// The caller leaves a self-join group.
#[utoipa::path(post, path = "/v1/groups/{name}/leave", tag = "groups", operation_id = "leave_group",
    params(("name" = String, Path)),
    responses((status = 200, description = "the group without the caller", body = GroupBody)))]
pub async fn leave(
    State(gw): State<Gateway>,
    AgentAuth(agent): AgentAuth,
    name: Result<Path<String>, PathRejection>,
) -> Result<Json<Value>, ApiError> {
    let command = GroupCommand::Leave { group: group_of(name)?, identity: agent.identity.clone() };
    Ok(Json(groups::execute(&gw, &agent.tenant, command, &agent.identity).await?.group))
}

/// The tenant a read is about: an agent's own; the admin's `?tenant=`.
fn read_tenant(gw: &Gateway, principal: Principal, q: &HashMap<String, String>) -> Result<String, ApiError> {
    principal.tenant(q.get("tenant").map(String::as_str), &gw.config().tenant_default)
}

/// The tenant's groups with their members.
#[utoipa::path(get, path = "/v1/groups", tag = "groups", operation_id = "list_groups",
    params(("tenant" = Option<String>, Query, description = "admin only; default `default`")),
    responses((status = 200, description = "the groups, by name", body = GroupList)))]
pub async fn list(
    State(gw): State<Gateway>,
    Authed(principal): Authed,
    Query(q): Query<HashMap<String, String>>,
) -> Result<Json<Value>, ApiError> {
    let tenant = read_tenant(&gw, principal, &q)?;
    Ok(Json(groups::list(&gw, &tenant).await?))
}

/// One group with each member's recipient state.
#[utoipa::path(get, path = "/v1/groups/{name}", tag = "groups", operation_id = "get_group",
    params(("name" = String, Path), ("tenant" = Option<String>, Query, description = "admin only")),
    responses((status = 200, description = "the group", body = GroupBody)))]
pub async fn show(
    State(gw): State<Gateway>,
    Authed(principal): Authed,
    name: Result<Path<String>, PathRejection>,
    Query(q): Query<HashMap<String, String>>,
) -> Result<Json<Value>, ApiError> {
    let group = group_of(name)?;
    let tenant = read_tenant(&gw, principal, &q)?;
    Ok(Json(groups::show(&gw, &tenant, &group).await?))
}

/// Recalls the caller's signals of one fan-out or one conversation, each on its own.
#[utoipa::path(post, path = "/v1/signals/recall", tag = "signals", operation_id = "recall_many_signals",
    request_body = RecallManyBody,
    responses((status = 200, description = "one outcome per signal", body = RecallManyAnswer)))]
pub async fn recall_many(
    State(gw): State<Gateway>,
    AgentAuth(agent): AgentAuth,
    body: Result<Bytes, BytesRejection>,
) -> Result<Json<Value>, ApiError> {
    let what = crate::wire::parse_recall_many(&json_object(body)?)?;
    Ok(Json(fanout::recall_many(&gw, &agent.tenant, &agent.identity, what).await?))
}
