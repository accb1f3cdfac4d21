//! The wire shapes of CONTRACT §17: the scopes a token may hold, the request that issues an
//! agent another token, and the answers of the token calls (an issued token, an agent's token
//! list, a tenant admin token, the admin token list).
//!
//! Deliberately data only: which scope a call needs, who may issue what and when a token stops
//! working are the bus's decisions. The calls are `tokens.rs`. A secret (`token`) is left out of
//! every `Debug`, so a logged answer never leaks it.

use std::time::Duration;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};

use crate::error::{Error, Result};

/// A scope of CONTRACT §17: what a token may do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Scope {
    /// Send signals (also to groups).
    Send,
    /// WebSocket pushes, the inbox (and its waits), drain, ack, piggyback sessions.
    Receive,
    /// Recall signals.
    Recall,
    /// Append plugin facts.
    Facts,
    /// Create and act on directives; join and leave groups.
    Directives,
    /// The roster, your own signals, plugin state and facts, groups, directives.
    Read,
}

impl Scope {
    /// Every scope, in the order the bus lists them (a token issued without scopes holds all).
    pub const ALL: [Scope; 6] =
        [Scope::Send, Scope::Receive, Scope::Recall, Scope::Facts, Scope::Directives, Scope::Read];

    /// The wire name (`send`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            Scope::Send => "send",
            Scope::Receive => "receive",
            Scope::Recall => "recall",
            Scope::Facts => "facts",
            Scope::Directives => "directives",
            Scope::Read => "read",
        }
    }
}

/// The id under which an agent's token list shows its registration token (rotated, never revoked).
pub const REGISTRATION_TOKEN_ID: &str = "registration";

/// What `AdminClient::issue_token` asks for. `Default` is a token with every scope that never
/// expires.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TokenRequest {
    /// The scopes it holds (`None`: every scope; an empty list is the bus's `InvalidRequest`).
    pub scopes: Option<Vec<Scope>>,
    /// It stops working this long after now (rounded up to whole seconds; zero is
    /// `Error::Usage`). `None`: never.
    pub expires_in: Option<Duration>,
    /// A name to tell it by in the token list (at most 128 characters).
    pub label: Option<String>,
}

impl TokenRequest {
    /// A token holding only `scopes`.
    pub fn scopes(scopes: impl IntoIterator<Item = Scope>) -> Self {
        TokenRequest { scopes: Some(scopes.into_iter().collect()), ..Default::default() }
    }
    /// It stops working `after` from now.
    pub fn expires_in(mut self, after: Duration) -> Self {
        self.expires_in = Some(after);
        self
    }
    /// A name to tell it by.
    pub fn label(mut self, label: impl Into<String>) -> Self {
        self.label = Some(label.into());
        self
    }

    /// The request body: what was given, nothing else.
    pub(crate) fn body(&self) -> Result<Value> {
        let mut b = Map::new();
        if let Some(s) = &self.scopes {
            b.insert("scopes".into(), json!(s));
        }
        if let Some(d) = self.expires_in {
            if d.is_zero() {
                return Err(Error::Usage("expires_in must be a positive duration".into()));
            }
            b.insert("expires_in_seconds".into(), json!(d.as_secs() + u64::from(d.subsec_nanos() > 0)));
        }
        if let Some(l) = &self.label {
            b.insert("label".into(), json!(l));
        }
        Ok(Value::Object(b))
    }
}

/// `issue_token` answer: `token` is the secret, shown this once.
#[derive(Clone, PartialEq, Eq, Deserialize)]
pub struct IssuedToken {
    pub token_id: String,
    pub token: String,
    pub scopes: Vec<Scope>,
    /// `None`: it does not expire.
    pub expires_at: Option<DateTime<Utc>>,
    #[serde(default)]
    pub label: Option<String>,
}

impl std::fmt::Debug for IssuedToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IssuedToken")
            .field("token_id", &self.token_id)
            .field("scopes", &self.scopes)
            .field("expires_at", &self.expires_at)
            .field("label", &self.label)
            .finish_non_exhaustive()
    }
}

/// One of an agent's tokens as `tokens` lists it (never its secret); `expired` once `expires_at`
/// has passed (it is listed until revoked).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct TokenInfo {
    pub token_id: String,
    #[serde(default)]
    pub label: Option<String>,
    pub scopes: Vec<Scope>,
    #[serde(default)]
    pub expires_at: Option<DateTime<Utc>>,
    #[serde(default)]
    pub issued_at: Option<DateTime<Utc>>,
    #[serde(default)]
    pub expired: bool,
}

impl TokenInfo {
    /// Whether this is the registration token (`token_id` `registration`).
    pub fn is_registration(&self) -> bool {
        self.token_id == REGISTRATION_TOKEN_ID
    }
}

/// `create_admin_token` answer: an admin inside `tenant` only; `token` is the secret, shown once.
#[derive(Clone, PartialEq, Eq, Deserialize)]
pub struct AdminToken {
    pub token_id: String,
    pub token: String,
    pub tenant: String,
    #[serde(default)]
    pub label: Option<String>,
}

impl std::fmt::Debug for AdminToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AdminToken")
            .field("token_id", &self.token_id)
            .field("tenant", &self.tenant)
            .field("label", &self.label)
            .finish_non_exhaustive()
    }
}

/// A tenant admin token as `admin_tokens` lists it (never its secret).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct AdminTokenInfo {
    pub token_id: String,
    pub tenant: String,
    #[serde(default)]
    pub label: Option<String>,
    #[serde(default)]
    pub issued_at: Option<DateTime<Utc>>,
}

/// The `{"tokens": [...]}` of both lists.
#[derive(Debug, Deserialize)]
pub(crate) struct Tokens<T> {
    #[serde(default = "Vec::new")]
    pub tokens: Vec<T>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_sends_what_was_given_and_nothing_else() {
        assert_eq!(TokenRequest::default().body().unwrap(), json!({}));
        let req = TokenRequest::scopes([Scope::Send, Scope::Read]).expires_in(Duration::from_millis(1500)).label("ci");
        assert_eq!(req.body().unwrap(), json!({"scopes": ["send", "read"], "expires_in_seconds": 2, "label": "ci"}));
        let zero = TokenRequest::default().expires_in(Duration::ZERO).body();
        assert!(matches!(zero, Err(Error::Usage(_))), "{zero:?}");
    }

    #[test]
    fn answers_read_and_never_show_a_secret() {
        let issued: IssuedToken = serde_json::from_value(json!({"token_id": "t1", "token": "sb_secret",
            "scopes": ["send", "read"], "expires_at": null, "label": null}))
        .unwrap();
        assert_eq!(issued.scopes, vec![Scope::Send, Scope::Read]);
        assert!(!format!("{issued:?}").contains("sb_secret"));
        let listed: Tokens<TokenInfo> = serde_json::from_value(json!({"tokens": [{"token_id": "registration",
            "label": "registration", "scopes": Scope::ALL, "expires_at": null, "issued_at": "2026-01-01T00:00:00Z",
            "expired": false}]}))
        .unwrap();
        assert!(listed.tokens[0].is_registration() && listed.tokens[0].scopes == Scope::ALL);
        let admin: AdminToken =
            serde_json::from_value(json!({"token_id": "a1", "token": "sb_secret", "tenant": "acme", "label": "ops"}))
                .unwrap();
        assert!(!format!("{admin:?}").contains("sb_secret"));
    }
}
