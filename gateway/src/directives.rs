//! The directive commands (CONTRACT §14), shared by HTTP, WebSocket and MCP: create, get (with
//! `wait`), list, and the actions; each answered with the directive object as the stream has it.
//!
//! Deliberately thin: `bus::directive` decides, `SignalStore::try_directive` appends with its
//! compare-and-set, `send_lifecycle` records the lifecycle signals and recalls. This file adds
//! what only the edge knows — who `to` is (registry, the group's subject), the issuers policy's
//! group reads, presence for the lifecycle sends, waiting, metrics — and the error shapes.

use std::time::Duration;

use bus::directive::{directive_id_for, CreateDirective, DirectiveCommand, DirectiveState};
use bus::names::is_group;
use bus::store::{DirectiveExecuted, DirectiveRefused};
use bus::DomainError;
use chrono::{DateTime, Utc};
use futures::StreamExt;
use projector::queries::{DirectiveFilter, DirectiveRole, ListDirectives};
use serde_json::{json, Value};
use uuid::Uuid;

use crate::error::ApiError;
use crate::state::Gateway;
use crate::wire::directives::{Action, CreateRequest};
use crate::{metrics, reads};

/// Longest `wait` of a `get` (CONTRACT §14: 60 s over HTTP; MCP allows 50).
pub const MAX_WAIT: Duration = Duration::from_secs(60);

/// A create's answer: whether it created the directive (201) or found it (200), and the object.
#[derive(Debug)]
pub struct Created {
    pub created: bool,
    pub directive: Value,
}

/// Creates a directive from `issuer`, or answers the one its idempotency key already names.
pub async fn create(gw: &Gateway, tenant: &str, issuer: &str, req: CreateRequest) -> Result<Created, ApiError> {
    if let Err(wait) = gw.limiter().check(tenant, issuer) {
        metrics::rate_limited();
        let message = format!("{issuer} is over its send rate; retry in {} ms", wait.as_millis().max(1));
        return Err(ApiError::rate_limited(message, wait));
    }
    gw.backpressure().admit().await;
    let directive_id = directive_id_for(tenant, issuer, &req.idempotency_key);
    let members = match resolve_to(gw, tenant, &req.to).await {
        Ok(members) => {
            check_policy(gw, tenant, issuer, &req.directive_type).await?;
            members
        }
        // A repeat is answered from the stream whatever became of its assignee since (the
        // common path reads nothing: `execute_directive` tries a create unread).
        Err(e @ (ApiError::UnknownRecipient | ApiError::UnknownGroup(_))) => {
            match gw.store().load_directive(tenant, directive_id).await?.0.requested {
                Some(_) => Vec::new(),
                None => return Err(e),
            }
        }
        Err(e) => return Err(e),
    };
    let cfg = gw.config();
    let create = CreateDirective {
        directive_id,
        issuer: issuer.to_string(),
        to: req.to,
        members,
        directive_type: req.directive_type,
        params: req.params,
        idempotency_key: req.idempotency_key,
        deadline_seconds: req.deadline_seconds.unwrap_or(cfg.directive_default_deadline.as_secs().max(1)),
        correlation_id: req.correlation_id,
    };
    let executed = gw
        .store()
        .execute_directive(tenant, directive_id, &DirectiveCommand::Create(Box::new(create)), issuer, Utc::now())
        .await?;
    let created = executed.appended.is_some();
    if created {
        metrics::directive_created(directive_type(&executed.state));
    }
    carry_out(gw, tenant, &executed).await;
    Ok(Created { created, directive: executed.state.object() })
}

/// The members of group `to` now, or nothing for a registered identity.
async fn resolve_to(gw: &Gateway, tenant: &str, to: &str) -> Result<Vec<String>, ApiError> {
    if is_group(to) {
        bus::names::validate_group(to)?;
        let (group, _) = gw.store().load_group(tenant, to).await?;
        if !group.exists {
            return Err(ApiError::UnknownGroup(to.to_string()));
        }
        return Ok(group.members.into_iter().collect());
    }
    bus::names::validate_identity(to)?;
    if !gw.registry().is_registered(tenant, to) {
        return Err(ApiError::UnknownRecipient);
    }
    Ok(Vec::new())
}

/// The issuers policy, with the memberships of the groups its governing rule names read from
/// their subjects.
async fn check_policy(gw: &Gateway, tenant: &str, issuer: &str, directive_type: &str) -> Result<(), ApiError> {
    let policy = &gw.config().directive_issuers;
    let mut member_of = Vec::new();
    for group in policy.names_groups(directive_type) {
        let (state, _) = gw.store().load_group(tenant, group).await?;
        if state.members.contains(issuer) {
            member_of.push(group.to_string());
        }
    }
    policy.check(directive_type, issuer, |g| member_of.iter().any(|m| m == g))?;
    Ok(())
}

/// The directive `id` as its party `caller` may see it; with `wait`, once it has ended or after
/// `wait` (at most `MAX_WAIT`), whichever is first — or at once when the gateway stops.
pub async fn get(
    gw: &Gateway,
    tenant: &str,
    caller: &str,
    id: Uuid,
    wait: Option<Duration>,
) -> Result<Value, ApiError> {
    let (state, _) = gw.store().load_directive(tenant, id).await?;
    if !state.is_party(caller) {
        return Err(DomainError::UnknownDirective.into());
    }
    let Some(wait) = wait.filter(|w| !w.is_zero() && state.status.is_open()) else { return Ok(state.object()) };
    let ended = async || gw.store().load_directive(tenant, id).await.is_ok_and(|(s, _)| !s.status.is_open());
    tokio::select! {
        _ = gw.directive_ends().wait_for(&id, wait.min(MAX_WAIT), ended) => {}
        _ = gw.shutdown_token().cancelled() => {}
    }
    Ok(gw.store().load_directive(tenant, id).await?.0.object())
}

/// Carries out `action` on directive `id` as `caller`.
pub async fn act(gw: &Gateway, tenant: &str, caller: &str, id: Uuid, action: Action) -> Result<Value, ApiError> {
    let by = caller.to_string();
    let command = match action {
        Action::Start => DirectiveCommand::Start { by },
        Action::Progress { message, percent } => DirectiveCommand::Progress { by, message, percent },
        Action::Complete { result } => DirectiveCommand::Complete { by, result },
        Action::Fail { code, message } => DirectiveCommand::Fail { by, code, message },
        Action::Reject { reason } => DirectiveCommand::Reject { by, reason },
        Action::Cancel { reason } => DirectiveCommand::Cancel { by, reason },
    };
    let executed = match gw.store().try_directive(tenant, id, &command, caller, Utc::now()).await? {
        Ok(executed) => executed,
        // The directive as the refusal found it on the stream, which is what the caller needs
        // to go on (read once: the decision's own read).
        Err(DirectiveRefused { error: e @ DomainError::InvalidTransition { .. }, state }) => {
            return Err(ApiError::InvalidTransition { message: e.to_string(), directive: Box::new(state.object()) });
        }
        Err(refused) => return Err(refused.error.into()),
    };
    if executed.appended.is_some() && executed.state.status.is_terminal() {
        finished_metrics(&executed.state);
    }
    carry_out(gw, tenant, &executed).await;
    Ok(executed.state.object())
}

/// Records the lifecycle signals and recalls an appended event causes. The directive's event is
/// on the stream whatever happens here, so a failure is logged, not answered: the signals carry
/// dedupe keys, and whoever carries the effects out again (a repeat, the sweeper's expiry)
/// records nothing twice.
async fn carry_out(gw: &Gateway, tenant: &str, executed: &DirectiveExecuted) {
    let effects = executed.effects(tenant);
    if effects.is_empty() {
        return;
    }
    let cfg = gw.config();
    let now = Utc::now();
    let view = |to: &str| reads::recipient_view(gw, tenant, to, now);
    match gw.store().send_lifecycle(tenant, &cfg.types, &effects, view, now).await {
        Ok(done) => {
            for (_, recorded) in done.sent.iter().filter(|(_, r)| r.created) {
                if let Some(s) = recorded.state.sent.as_deref() {
                    metrics::sent(&cfg.types, &s.signal_type, s.delivery_class, s.recipient_state, s.publish_path);
                }
            }
            for (_, outcome) in &done.recalled {
                metrics::recall(*outcome);
            }
        }
        Err(e) => {
            let id = executed.state.requested.as_ref().map(|r| r.directive_id);
            tracing::warn!(error = %e, directive_id = ?id, "directive lifecycle signals not all recorded");
        }
    }
}

fn directive_type(state: &DirectiveState) -> &str {
    state.requested.as_deref().map_or("", |r| r.directive_type.as_str())
}

fn finished_metrics(state: &DirectiveState) {
    let Some(req) = state.requested.as_deref() else { return };
    let seconds = state.finished_at.map_or(0.0, |f| (f - req.created_at).num_milliseconds().max(0) as f64 / 1000.0);
    metrics::directive_finished(&req.directive_type, state.status.as_str(), seconds);
}

/// A page request of `list`, as asked.
#[derive(Debug, Clone, Default)]
pub struct ListRequest {
    pub role: Option<String>,
    pub status: Option<String>,
    pub directive_type: Option<String>,
    pub limit: u32,
    pub before: Option<(DateTime<Utc>, Uuid)>,
}

impl ListRequest {
    /// Reads `role`, `status`, `type`, `limit` (1–1000, default 100) and `before` from query
    /// parameters (HTTP) or tool arguments (MCP), refusing any other.
    pub fn from_query(q: &std::collections::HashMap<String, String>) -> Result<Self, ApiError> {
        if let Some(k) = q.keys().find(|k| !matches!(k.as_str(), "role" | "status" | "type" | "limit" | "before")) {
            let k: String = k.chars().take(64).collect();
            return Err(ApiError::invalid(format!("unknown parameter {k:?} (role, status, type, limit, before)")));
        }
        let limit = match q.get("limit") {
            None => 100,
            Some(l) => l
                .parse::<u32>()
                .ok()
                .filter(|l| (1..=1000).contains(l))
                .ok_or_else(|| ApiError::invalid("limit must be a whole number between 1 and 1000"))?,
        };
        Ok(ListRequest {
            role: q.get("role").cloned(),
            status: q.get("status").cloned(),
            directive_type: q.get("type").cloned(),
            limit,
            before: q.get("before").map(|c| crate::wire::cursor::decode(c)).transpose()?,
        })
    }
}

/// The caller's directives, newest first: `{"directives": [...], "next_before": cursor|null}`.
/// Rows are found in the read model and each answered from its stream (so every object is
/// exactly what `get` would say).
pub async fn list(gw: &Gateway, tenant: &str, caller: &str, req: ListRequest) -> Result<Value, ApiError> {
    let role = match req.role.as_deref() {
        None => None,
        Some("issued") => Some(DirectiveRole::Issued),
        Some("assigned") => Some(DirectiveRole::Assigned),
        Some(_) => return Err(ApiError::invalid("role must be issued or assigned")),
    };
    let status = match req.status.as_deref() {
        None => None,
        Some(s) => Some(DirectiveFilter::parse(s).ok_or_else(|| {
            ApiError::invalid(
                "status must be open, requested, started, completed, failed, rejected, canceled or expired",
            )
        })?),
    };
    if let Some(t) = &req.directive_type {
        bus::names::validate_signal_type(t)?;
    }
    reads::consistent(gw).await;
    let query = ListDirectives {
        tenant: tenant.to_string(),
        caller: caller.to_string(),
        role,
        status,
        directive_type: req.directive_type,
        limit: req.limit,
        before: req.before,
    };
    let rows = gw.queries().list_directives(&query).await?;
    let next_before = match rows.last() {
        Some(last) if rows.len() as u32 >= req.limit => {
            Some(crate::wire::cursor::encode(last.created_at, last.directive_id))
        }
        _ => None,
    };
    let objects: Vec<Value> = futures::stream::iter(rows)
        .map(|row| async move {
            match gw.store().load_directive(tenant, row.directive_id).await {
                Ok((state, _)) if state.requested.is_some() => Ok(Some(state.object())),
                Ok(_) => Ok(None),
                Err(e) => Err(e),
            }
        })
        .buffered(16)
        .collect::<Vec<_>>()
        .await
        .into_iter()
        .filter_map(Result::transpose)
        .collect::<Result<_, _>>()?;
    Ok(json!({ "directives": objects, "next_before": next_before }))
}
