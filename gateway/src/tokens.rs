//! Issuing, listing and revoking tokens (CONTRACT §17), shared by every surface that may: an
//! agent's extra tokens (decided by `bus::agent` on the agent's subject) and tenant admin tokens
//! (`bus::admin_token`, a subject each). Each event is applied to this process's registry at
//! once, and a revocation closes the token's sessions here at once; every other gateway does
//! both when its tail reads the event.
//!
//! Deliberately keeps no token: only its SHA-256 goes into the event, and the token itself is
//! returned once. Who may ask (an admin of the tenant) is the surface's check, through
//! `AdminAuth`.

use bus::admin_token::AdminTokenCommand;
use bus::agent::AgentCommand;
use bus::event::AdminTokenIssued;
use bus::scope::ScopeSet;
use chrono::{DateTime, Utc};
use uuid::Uuid;

use crate::agent_registry::{AdminTokenEntry, IssuedToken};
use crate::auth::{hash_token, new_token};
use crate::error::ApiError;
use crate::state::Gateway;

/// `by` of the events the admin's calls append.
const ADMIN: &str = "admin";

/// Longest `expires_in_seconds`: ten years (longer is no expiry at all; omit it instead).
pub const MAX_EXPIRES_IN_SECONDS: u64 = 10 * 365 * 24 * 3600;

/// Longest label, in characters.
pub const MAX_LABEL_CHARS: usize = 128;

/// What an issued token's answer shows, the secret included (once).
#[derive(Debug, Clone)]
pub struct Issued {
    pub token_id: Uuid,
    pub token: String,
    pub scopes: ScopeSet,
    pub expires_at: Option<DateTime<Utc>>,
    pub label: Option<String>,
}

/// Checks a label: at most `MAX_LABEL_CHARS`, no control characters.
pub fn check_label(label: Option<&str>) -> Result<(), ApiError> {
    let Some(label) = label else { return Ok(()) };
    if label.chars().count() > MAX_LABEL_CHARS {
        return Err(ApiError::invalid(format!("label must be at most {MAX_LABEL_CHARS} characters")));
    }
    if label.chars().any(char::is_control) {
        return Err(ApiError::invalid("label must not contain control characters"));
    }
    Ok(())
}

fn missing(tenant: &str, identity: &str) -> ApiError {
    ApiError::NotFound(format!("no agent {identity:?} in tenant {tenant}"))
}

/// Issues a token of `identity` with `scopes`, expiring `expires_in` from now if given.
pub async fn issue(
    gw: &Gateway,
    tenant: &str,
    identity: &str,
    scopes: ScopeSet,
    expires_in: Option<u64>,
    label: Option<String>,
) -> Result<Issued, ApiError> {
    if !gw.registry().is_registered(tenant, identity) {
        return Err(missing(tenant, identity));
    }
    let now = Utc::now();
    let expires_at = expires_in.map(|s| now + chrono::Duration::seconds(s as i64));
    let (token, token_id) = (new_token(), Uuid::new_v4());
    let command = AgentCommand::issue(identity, token_id, hash_token(&token), scopes, expires_at, label.clone());
    let (seq, event) = match gw.store().execute_agent(tenant, identity, &command, ADMIN, now).await {
        Err(bus::Error::Domain(bus::DomainError::UnknownAgent(_))) => return Err(missing(tenant, identity)),
        other => other?,
    };
    gw.registry().apply(seq, &event);
    tracing::info!(tenant = %tenant, identity = %identity, token_id = %token_id, scopes = ?scopes, "agent token issued");
    Ok(Issued { token_id, token, scopes, expires_at, label })
}

/// The tokens of `identity` in force (expired ones included, marked by their `expires_at`).
pub fn list(gw: &Gateway, tenant: &str, identity: &str) -> Result<Vec<(Uuid, IssuedToken)>, ApiError> {
    let entry = gw.registry().get(tenant, identity).ok_or_else(|| missing(tenant, identity))?;
    let mut tokens: Vec<_> = entry.tokens.into_iter().collect();
    tokens.sort_by_key(|(id, t)| (t.issued_at, *id));
    Ok(tokens)
}

/// Revokes one token of `identity`: it stops working at once here, and on every gateway once
/// its tail reads the event; its sessions close with 1008. A token revoked already is done.
pub async fn revoke(gw: &Gateway, tenant: &str, identity: &str, token_id: Uuid) -> Result<(), ApiError> {
    let command = AgentCommand::RevokeToken { identity: identity.to_string(), token_id };
    let (seq, event) = match gw.store().execute_agent(tenant, identity, &command, ADMIN, Utc::now()).await {
        Err(bus::Error::Domain(bus::DomainError::TokenRevoked(_))) => return Ok(()),
        Err(bus::Error::Domain(bus::DomainError::UnknownAgent(_))) => return Err(missing(tenant, identity)),
        other => other?,
    };
    gw.registry().apply(seq, &event);
    let now = Utc::now();
    gw.hub().close_retired_tokens(tenant, identity, |agent| gw.authenticator().still_current(agent, now));
    tracing::info!(tenant = %tenant, identity = %identity, token_id = %token_id, "agent token revoked");
    Ok(())
}

/// Issues a tenant admin token for `tenant`.
pub async fn issue_admin(gw: &Gateway, tenant: &str, label: Option<String>) -> Result<(Uuid, String), ApiError> {
    let (token, token_id) = (new_token(), Uuid::new_v4());
    let command =
        AdminTokenCommand::Issue(AdminTokenIssued { token_id, token_hash: hash_token(&token), label: label.clone() });
    let (seq, event) = gw.store().execute_admin_token(tenant, token_id, &command, ADMIN, Utc::now()).await?;
    gw.registry().apply(seq, &event);
    tracing::info!(tenant = %tenant, token_id = %token_id, "tenant admin token issued");
    Ok((token_id, token))
}

pub fn list_admin(gw: &Gateway, tenant: Option<&str>) -> Vec<(Uuid, AdminTokenEntry)> {
    gw.registry().admin_tokens(tenant)
}

/// Revokes a tenant admin token; one revoked already is done.
pub async fn revoke_admin(gw: &Gateway, token_id: Uuid) -> Result<(), ApiError> {
    let Some(entry) = gw.registry().admin_token(token_id) else {
        return Err(ApiError::NotFound(format!("no tenant admin token {token_id}")));
    };
    let command = AdminTokenCommand::Revoke { token_id };
    match gw.store().execute_admin_token(&entry.tenant, token_id, &command, ADMIN, Utc::now()).await {
        Err(bus::Error::Domain(bus::DomainError::TokenRevoked(_))) => Ok(()),
        Err(e) => Err(e.into()),
        Ok((seq, event)) => {
            gw.registry().apply(seq, &event);
            tracing::info!(tenant = %entry.tenant, token_id = %token_id, "tenant admin token revoked");
            Ok(())
        }
    }
}
