//! Authentication: bearer tokens, how agent tokens are made and hashed, and the axum
//! extractors that turn a request into an admin or an agent principal.
//!
//! Deliberately does not decide what a principal may do: each handler checks its own rule
//! (sender is the caller, tenant scoping, ownership). A leaf: the extractors ask the router
//! state for an `Authenticator` only, never for the whole gateway.

use std::sync::Arc;

use axum::extract::{FromRef, FromRequestParts};
use axum::http::request::Parts;
use axum::http::HeaderMap;
use rand::RngCore;
use sha2::{Digest, Sha256};

use crate::agent::Agent;
use crate::agent_registry::AgentRegistry;
use crate::error::ApiError;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Principal {
    Admin,
    Agent(Agent),
}

/// A new agent token: `sb_` and 256 random bits in hex.
pub fn new_token() -> String {
    let mut bytes = [0u8; 32];
    rand::rngs::OsRng.fill_bytes(&mut bytes);
    format!("sb_{}", hex::encode(bytes))
}

/// SHA-256 of a token, hex: the only form in which a token is ever stored.
pub fn hash_token(token: &str) -> String {
    hex::encode(Sha256::digest(token.as_bytes()))
}

/// The token of an `Authorization: Bearer` header, if any.
pub fn bearer(headers: &HeaderMap) -> Option<&str> {
    let value = headers.get(axum::http::header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = value.split_once(' ')?;
    scheme.eq_ignore_ascii_case("bearer").then(|| token.trim()).filter(|t| !t.is_empty())
}

/// Compares without an early exit, so response timing does not reveal a prefix of the secret.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// What authenticating a token needs, and nothing else: the admin token and the agents' token
/// hashes. Extractors take it from any router state that provides one (`FromRef`).
#[derive(Debug, Clone)]
pub struct Authenticator {
    pub admin_token: Arc<str>,
    pub registry: Arc<AgentRegistry>,
}

impl Authenticator {
    /// Resolves a token to a principal.
    pub fn authenticate(&self, token: &str) -> Result<Principal, ApiError> {
        let admin = &self.admin_token;
        if !admin.is_empty() && constant_time_eq(admin.as_bytes(), token.as_bytes()) {
            return Ok(Principal::Admin);
        }
        let token_hash = hash_token(token);
        match self.registry.lookup(&token_hash) {
            Some((tenant, identity)) => Ok(Principal::Agent(Agent { tenant, identity, token_hash })),
            None => Err(ApiError::Unauthorized("the token is not valid".into())),
        }
    }

    fn principal_of(&self, headers: &HeaderMap) -> Result<Principal, ApiError> {
        let token = bearer(headers).ok_or_else(|| ApiError::Unauthorized("missing bearer token".into()))?;
        self.authenticate(token)
    }
}

/// Any authenticated caller.
#[derive(Debug, Clone)]
pub struct Authed(pub Principal);

/// An authenticated agent (the admin token is refused: the admin is nobody's sender).
#[derive(Debug, Clone)]
pub struct AgentAuth(pub Agent);

/// The admin.
#[derive(Debug, Clone, Copy)]
pub struct AdminAuth;

impl<S> FromRequestParts<S> for Authed
where
    Authenticator: FromRef<S>,
    S: Send + Sync,
{
    type Rejection = ApiError;
    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        let auth = Authenticator::from_ref(state);
        auth.principal_of(&parts.headers).map(Authed)
    }
}

impl<S> FromRequestParts<S> for AgentAuth
where
    Authenticator: FromRef<S>,
    S: Send + Sync,
{
    type Rejection = ApiError;
    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        let auth = Authenticator::from_ref(state);
        match auth.principal_of(&parts.headers)? {
            Principal::Agent(a) => Ok(AgentAuth(a)),
            Principal::Admin => Err(ApiError::Forbidden("this call needs an agent token, not the admin token".into())),
        }
    }
}

impl<S> FromRequestParts<S> for AdminAuth
where
    Authenticator: FromRef<S>,
    S: Send + Sync,
{
    type Rejection = ApiError;
    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        let auth = Authenticator::from_ref(state);
        match auth.principal_of(&parts.headers)? {
            Principal::Admin => Ok(AdminAuth),
            Principal::Agent(_) => Err(ApiError::Forbidden("this call needs the admin token".into())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_long_random_and_hash_stably() {
        let a = new_token();
        let b = new_token();
        assert_ne!(a, b);
        assert_eq!(a.len(), 3 + 64);
        assert_eq!(hash_token(&a), hash_token(&a));
        assert_ne!(hash_token(&a), hash_token(&b));
    }

    #[test]
    fn bearer_parsing() {
        let mut h = HeaderMap::new();
        assert_eq!(bearer(&h), None);
        h.insert("authorization", "Bearer abc".parse().unwrap());
        assert_eq!(bearer(&h), Some("abc"));
        h.insert("authorization", "Basic abc".parse().unwrap());
        assert_eq!(bearer(&h), None);
        assert!(constant_time_eq(b"x", b"x"));
        assert!(!constant_time_eq(b"x", b"xy"));
    }
}
