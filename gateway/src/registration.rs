//! Registering an agent and rotating its token, shared by every surface that may: the rule is
//! `bus::agent` (decided and appended with one compare-and-set per agent subject by
//! `SignalStore::execute_agent`, so of concurrent registrations across every gateway process
//! exactly one wins), and the event is applied to this process's registry at once.
//!
//! Deliberately keeps no token: only its SHA-256 goes into the event, and the token itself is
//! returned once, for the caller to show. A removed identity may be registered again: it gets a
//! new token, and the old one stays refused. Reading the request and checking the names are the
//! surface's; removing an agent is `removal`.

use bus::agent::AgentCommand;
use bus::event::SessionKind;
use chrono::Utc;

use crate::auth::{hash_token, new_token};
use crate::error::ApiError;
use crate::state::Gateway;

/// `by` of the events the admin's calls append.
const ADMIN: &str = "admin";

/// Registers `identity` in `tenant` and returns its new token, or `already_registered`.
pub async fn register(gw: &Gateway, tenant: &str, identity: &str, kind: SessionKind) -> Result<String, ApiError> {
    let already = || ApiError::AlreadyRegistered(format!("{identity} is already registered in tenant {tenant}"));
    if gw.registry().is_registered(tenant, identity) {
        return Err(already());
    }
    let token = new_token();
    let command = AgentCommand::Register { identity: identity.to_string(), kind, token_hash: hash_token(&token) };
    let (seq, event) = match gw.store().execute_agent(tenant, identity, &command, ADMIN, Utc::now()).await {
        Err(bus::Error::Domain(bus::DomainError::AlreadyRegistered(_))) => return Err(already()),
        other => other?,
    };
    gw.registry().apply(seq, &event);
    tracing::info!(tenant = %tenant, identity = %identity, "agent registered");
    Ok(token)
}

/// Rotates the token of `identity` and returns the new one: the old one stops working at once
/// and the sessions opened with it close.
pub async fn rotate(gw: &Gateway, tenant: &str, identity: &str) -> Result<String, ApiError> {
    let missing = || ApiError::NotFound(format!("no agent {identity:?} in tenant {tenant}"));
    if gw.registry().get(tenant, identity).is_none() {
        return Err(missing());
    }
    let token = new_token();
    let token_hash = hash_token(&token);
    let command = AgentCommand::RotateToken { identity: identity.to_string(), token_hash: token_hash.clone() };
    let (seq, event) = match gw.store().execute_agent(tenant, identity, &command, ADMIN, Utc::now()).await {
        Err(bus::Error::Domain(bus::DomainError::UnknownAgent(_))) => return Err(missing()),
        other => other?,
    };
    // Apply now rather than when the tail catches up: the old token must stop working at once.
    gw.registry().apply(seq, &event);
    let now = Utc::now();
    gw.hub().close_retired_tokens(tenant, identity, |agent| gw.authenticator().still_current(agent, now));
    tracing::info!(tenant = %tenant, identity = %identity, "agent token rotated");
    Ok(token)
}
