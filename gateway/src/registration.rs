//! Registering an agent and rotating its token, shared by every surface that may: the
//! `agent.registered` / `token.rotated` event, appended so that of concurrent registrations
//! across every gateway process exactly one wins, and applied to this process's registry at once.
//!
//! Deliberately keeps no token: only its SHA-256 goes into the event, and the token itself is
//! returned once, for the caller to show. A removed identity may be registered again: it gets a
//! new token, and the old one stays refused. Reading the request and checking the names are the
//! surface's; removing an agent is `removal`.

use bus::event::{AgentRegistered, Entity, Event, EventBody, SessionKind, TokenRotated};
use bus::log::Expect;
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
    let body = EventBody::AgentRegistered(AgentRegistered {
        identity: identity.to_string(),
        kind,
        token_hash: hash_token(&token),
    });
    let event = Event::new(tenant, Some(ADMIN.to_string()), Utc::now(), body);
    let seq = append_registration(gw, &event, identity).await?.ok_or_else(already)?;
    gw.registry().apply(seq, &event);
    tracing::info!(tenant = %tenant, identity = %identity, "agent registered");
    Ok(token)
}

/// Appends a registration expecting the agent's subject to end where this process last saw it
/// (empty, or an `agent.removed`), so of concurrent registrations across every gateway process
/// exactly one wins. `None`: the identity is registered. A process whose tail is behind re-reads
/// the subject once: a removal it has not applied yet still lets the registration through.
async fn append_registration(gw: &Gateway, event: &Event, identity: &str) -> Result<Option<u64>, ApiError> {
    let subject = gw.log().subjects().of(&event.tenant, Entity::Agent(identity));
    let mut expected = gw.registry().last_seq(&event.tenant, identity);
    for _ in 0..2 {
        match gw.store().append(event, Expect::LastSubjectSeq(expected)).await {
            Ok(a) => return Ok(Some(a.seq)),
            Err(bus::Error::Conflict { .. }) => {}
            Err(e) => return Err(e.into()),
        }
        match gw.log().last_on_subject(&subject).await? {
            Some(last) if matches!(last.event.body, EventBody::AgentRemoved(_)) && last.seq != expected => {
                expected = last.seq;
            }
            _ => return Ok(None),
        }
    }
    Ok(None)
}

/// Rotates the token of `identity` and returns the new one: the old one stops working at once
/// and the sessions opened with it close.
pub async fn rotate(gw: &Gateway, tenant: &str, identity: &str) -> Result<String, ApiError> {
    if gw.registry().get(tenant, identity).is_none() {
        return Err(ApiError::NotFound(format!("no agent {identity:?} in tenant {tenant}")));
    }
    let token = new_token();
    let token_hash = hash_token(&token);
    let body = EventBody::TokenRotated(TokenRotated { identity: identity.to_string(), token_hash: token_hash.clone() });
    let event = Event::new(tenant, Some(ADMIN.to_string()), Utc::now(), body);
    debug_assert_eq!(gw.log().subjects().for_event(&event), gw.log().subjects().of(tenant, Entity::Agent(identity)));
    let appended = gw.store().append(&event, Expect::Any).await?;
    // Apply now rather than when the tail catches up: the old token must stop working at once.
    gw.registry().apply(appended.seq, &event);
    gw.hub().close_stale_tokens(tenant, identity, &token_hash);
    tracing::info!(tenant = %tenant, identity = %identity, "agent token rotated");
    Ok(token)
}
