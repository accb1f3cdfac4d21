//! Authentication: bearer tokens, how tokens are made and hashed, and the axum extractors that
//! turn a request into a principal — the global admin, a tenant admin, or an agent with the
//! scopes of the token it presented (CONTRACT §17).
//!
//! Deliberately does not decide what a principal may do beyond being one: which scope a call
//! needs is `scopes` (one table, checked before any handler runs); a tenant admin's tenant is
//! checked here, by `AdminAuth::tenant`, the one way an admin handler learns its tenant. A
//! leaf: the extractors ask the router state for an `Authenticator` only.

use std::sync::Arc;

use axum::extract::{FromRef, FromRequestParts};
use axum::http::request::Parts;
use axum::http::HeaderMap;
use chrono::{DateTime, Utc};
use rand::RngCore;
use sha2::{Digest, Sha256};

use crate::agent::{Agent, TokenKind};
use crate::agent_registry::{AgentRegistry, Credential};
use crate::close::CloseReason;
use crate::error::ApiError;
use crate::metrics::{self, AuthFailure};

/// Who an admin token speaks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AdminRole {
    /// The deployment's admin token: every tenant.
    Global,
    /// A tenant admin token: inside this tenant only.
    Tenant(String),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Principal {
    Admin(AdminRole),
    Agent(Agent),
}

impl Principal {
    /// The tenant a call of this principal acts in: an agent's own (naming another is
    /// refused), an admin's as `AdminAuth::tenant` rules.
    pub fn tenant(&self, named: Option<&str>, default: &str) -> Result<String, ApiError> {
        match self {
            Principal::Admin(role) => AdminAuth(role.clone()).tenant(named, default),
            Principal::Agent(a) => match named {
                Some(t) if t != a.tenant => {
                    metrics::auth_failure(AuthFailure::Tenant);
                    Err(ApiError::Forbidden("agents may only use their own tenant".into()))
                }
                _ => Ok(a.tenant.clone()),
            },
        }
    }
}

/// A new token: `sb_` and 256 random bits in hex.
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

/// A refusal, counted by its reason.
fn refuse(reason: AuthFailure, message: &str) -> ApiError {
    metrics::auth_failure(reason);
    ApiError::Unauthorized(message.into())
}

/// What authenticating a token needs, and nothing else: the admin token, the registry of token
/// hashes, and the JWT verifier if one is configured. Extractors take it from any router state
/// that provides one (`FromRef`).
#[derive(Clone)]
pub struct Authenticator {
    pub admin_token: Arc<str>,
    pub registry: Arc<AgentRegistry>,
    pub jwt: Option<Arc<crate::jwt::JwtVerifier>>,
}

impl std::fmt::Debug for Authenticator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Authenticator").field("jwt", &self.jwt.is_some()).finish_non_exhaustive()
    }
}

impl Authenticator {
    /// Resolves a token to a principal, now.
    pub fn authenticate(&self, token: &str) -> Result<Principal, ApiError> {
        self.authenticate_at(token, Utc::now())
    }

    pub fn authenticate_at(&self, token: &str, now: DateTime<Utc>) -> Result<Principal, ApiError> {
        let admin = &self.admin_token;
        if !admin.is_empty() && constant_time_eq(admin.as_bytes(), token.as_bytes()) {
            return Ok(Principal::Admin(AdminRole::Global));
        }
        if let Some(jwt) = self.jwt.as_ref().filter(|_| crate::jwt::JwtVerifier::looks_like_jwt(token)) {
            return self.from_jwt(jwt, token);
        }
        let token_hash = hash_token(token);
        match self.registry.credential(&token_hash) {
            Some(Credential::TenantAdmin { tenant, .. }) => Ok(Principal::Admin(AdminRole::Tenant(tenant))),
            Some(Credential::Agent { expires_at: Some(at), .. }) if at <= now => {
                Err(refuse(AuthFailure::Expired, "token expired"))
            }
            Some(Credential::Agent { tenant, identity, token_id, scopes, expires_at }) => {
                let token = token_id.map_or(TokenKind::Registration, TokenKind::Issued);
                Ok(Principal::Agent(Agent { tenant, identity, token_hash, scopes, token, expires_at }))
            }
            None if self.registry.is_retired(&token_hash) => Err(refuse(AuthFailure::Revoked, "token revoked")),
            None => Err(refuse(AuthFailure::BadToken, "the token is not valid")),
        }
    }

    /// A JWT from the team's identity provider, as a token of the registered agent it names.
    fn from_jwt(&self, jwt: &crate::jwt::JwtVerifier, token: &str) -> Result<Principal, ApiError> {
        use crate::jwt::JwtRejection;
        let claims = match jwt.verify(token) {
            Ok(c) => c,
            Err(JwtRejection::Expired) => return Err(refuse(AuthFailure::Expired, "token expired")),
            Err(e) => {
                tracing::debug!(error = %e, "jwt refused");
                return Err(refuse(AuthFailure::BadToken, "the token is not valid"));
            }
        };
        if !self.registry.is_registered(&claims.tenant, &claims.sub) {
            return Err(refuse(AuthFailure::BadToken, "the token is not valid"));
        }
        let scopes = claims.scope.as_deref().map_or_else(bus::scope::ScopeSet::all, bus::scope::ScopeSet::from_claim);
        Ok(Principal::Agent(Agent {
            tenant: claims.tenant,
            identity: claims.sub,
            token_hash: hash_token(token),
            scopes,
            token: TokenKind::Jwt,
            expires_at: DateTime::from_timestamp(claims.exp, 0),
        }))
    }

    /// Why a session of `agent`, opened earlier, must close now, if it must: its agent was
    /// removed, its token rotated away or revoked, or past its expiry.
    pub fn still_current(&self, agent: &Agent, now: DateTime<Utc>) -> Result<(), CloseReason> {
        if !self.registry.is_registered(&agent.tenant, &agent.identity) {
            return Err(CloseReason::AgentRemoved);
        }
        if agent.expires_at.is_some_and(|at| at <= now) {
            return Err(CloseReason::TokenExpired);
        }
        match agent.token {
            TokenKind::Jwt => Ok(()),
            _ if self.registry.credential(&agent.token_hash).is_some() => Ok(()),
            TokenKind::Registration => Err(CloseReason::TokenRotated),
            TokenKind::Issued(_) => Err(CloseReason::TokenRevoked),
        }
    }

    /// The principal of a request: the one the HTTP guard put there, else from its header.
    fn principal_of(&self, parts: &Parts) -> Result<Principal, ApiError> {
        if let Some(p) = parts.extensions.get::<Principal>() {
            return Ok(p.clone());
        }
        let token = bearer(&parts.headers).ok_or_else(|| ApiError::Unauthorized("missing bearer token".into()))?;
        self.authenticate(token)
    }
}

/// Any authenticated caller.
#[derive(Debug, Clone)]
pub struct Authed(pub Principal);

/// An authenticated agent (an admin token is refused: an admin is nobody's sender).
#[derive(Debug, Clone)]
pub struct AgentAuth(pub Agent);

/// An admin: the global one or a tenant admin.
#[derive(Debug, Clone)]
pub struct AdminAuth(pub AdminRole);

impl AdminAuth {
    /// The tenant an admin call acts in: the one it names (or `default`), which a tenant admin
    /// may only name as its own (naming none means its own).
    pub fn tenant(&self, named: Option<&str>, default: &str) -> Result<String, ApiError> {
        let tenant = match (&self.0, named) {
            (AdminRole::Global, named) => named.unwrap_or(default).to_string(),
            (AdminRole::Tenant(own), None) => own.clone(),
            (AdminRole::Tenant(own), Some(t)) if t == own => own.clone(),
            (AdminRole::Tenant(own), Some(t)) => {
                metrics::auth_failure(AuthFailure::Tenant);
                return Err(ApiError::Forbidden(format!("this admin token is for tenant {own:?} only, not {t:?}")));
            }
        };
        bus::names::validate_tenant(&tenant)?;
        Ok(tenant)
    }

    /// Refuses a tenant admin: for calls that span every tenant.
    pub fn global(&self) -> Result<(), ApiError> {
        match &self.0 {
            AdminRole::Global => Ok(()),
            AdminRole::Tenant(_) => {
                metrics::auth_failure(AuthFailure::Tenant);
                Err(ApiError::Forbidden("this call needs the global admin token, not a tenant admin token".into()))
            }
        }
    }
}

impl<S> FromRequestParts<S> for Authed
where
    Authenticator: FromRef<S>,
    S: Send + Sync,
{
    type Rejection = ApiError;
    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        Authenticator::from_ref(state).principal_of(parts).map(Authed)
    }
}

impl<S> FromRequestParts<S> for AgentAuth
where
    Authenticator: FromRef<S>,
    S: Send + Sync,
{
    type Rejection = ApiError;
    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        match Authenticator::from_ref(state).principal_of(parts)? {
            Principal::Agent(a) => Ok(AgentAuth(a)),
            Principal::Admin(_) => {
                Err(ApiError::Forbidden("this call needs an agent token, not an admin token".into()))
            }
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
        match Authenticator::from_ref(state).principal_of(parts)? {
            Principal::Admin(role) => Ok(AdminAuth(role)),
            Principal::Agent(_) => Err(ApiError::Forbidden("this call needs an admin token".into())),
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

    #[test]
    fn a_tenant_admin_acts_in_its_own_tenant_only() {
        let acme = AdminAuth(AdminRole::Tenant("acme".into()));
        assert_eq!(acme.tenant(None, "default").unwrap(), "acme");
        assert_eq!(acme.tenant(Some("acme"), "default").unwrap(), "acme");
        assert!(matches!(acme.tenant(Some("other"), "default"), Err(ApiError::Forbidden(_))));
        assert!(acme.global().is_err());
        let global = AdminAuth(AdminRole::Global);
        assert_eq!(global.tenant(None, "default").unwrap(), "default");
        assert_eq!(global.tenant(Some("other"), "default").unwrap(), "other");
        assert!(global.global().is_ok());
    }
}
