//! The HTTP half of the client (CONTRACT §8): one request with a bearer token, its answer typed
//! into a value or an [`Error`], and the [`AdminClient`] built on it.
//!
//! Deliberately knows nothing of sessions or the spool: `client.rs` decides whether a call goes
//! over the WebSocket or here, and what a failed send becomes.

use std::time::Duration;

use reqwest::{Method, StatusCode};
use serde::de::DeserializeOwned;
use serde_json::{json, Value};

use crate::error::{Error, Result};
use crate::types::{Agent, Registration, Removal, Roster};

/// Percent-encodes one path segment (a plugin name's `/` becomes `%2F`, CONTRACT §8).
pub(crate) fn segment(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// A base URL, a token and a reqwest client; cheap to clone (reqwest shares its pool).
#[derive(Debug, Clone)]
pub struct HttpApi {
    base: String,
    token: String,
    http: reqwest::Client,
    timeout: Option<Duration>,
}

impl HttpApi {
    /// `url` is the bus's `http(s)://` base URL; an empty `token` sends no Authorization
    /// header; `timeout` bounds each call (`None`: wait as long as the connection lives).
    pub fn new(url: &str, token: &str, timeout: Option<Duration>) -> Result<Self> {
        HttpApi::with_client(url, token, timeout, reqwest::Client::new())
    }

    /// `new` sharing the caller's reqwest client (and its connection pool).
    pub fn with_client(url: &str, token: &str, timeout: Option<Duration>, http: reqwest::Client) -> Result<Self> {
        if !(url.starts_with("http://") || url.starts_with("https://")) {
            return Err(Error::Protocol(format!("url must be the bus's http(s) base URL, got {url:?}")));
        }
        Ok(HttpApi { base: url.trim_end_matches('/').to_string(), token: token.to_string(), http, timeout })
    }

    pub fn base(&self) -> &str {
        &self.base
    }

    pub(crate) fn token(&self) -> &str {
        &self.token
    }

    /// The same API whose calls may take `timeout` (a call that waits on the bus's side).
    pub(crate) fn with_timeout(&self, timeout: Duration) -> HttpApi {
        HttpApi { timeout: Some(timeout), ..self.clone() }
    }

    /// One call; `query` pairs with `None` values are left out. Returns the 2xx body (or the
    /// body of a status in `ok`) as JSON.
    pub async fn request(
        &self,
        method: Method,
        path: &str,
        query: &[(&str, Option<String>)],
        body: Option<&Value>,
        ok: &[u16],
    ) -> Result<Value> {
        Ok(self.request_status(method, path, query, body, ok).await?.1)
    }

    /// `request`, answering the status too (a create's 201 vs 200).
    pub(crate) async fn request_status(
        &self,
        method: Method,
        path: &str,
        query: &[(&str, Option<String>)],
        body: Option<&Value>,
        ok: &[u16],
    ) -> Result<(u16, Value)> {
        let (status, value) = self.raw(method.clone(), path, query, body).await?;
        if status.is_success() || ok.contains(&status.as_u16()) {
            return Ok((status.as_u16(), value));
        }
        let code = status.as_u16();
        if !value.is_object() && matches!(code, 502 | 504) {
            return Err(Error::transport(format!(
                "{method} {path}: a proxy answered {code}; the bus may not have seen the request"
            )));
        }
        Err(Error::from_body(&value, Some(code)))
    }

    /// One call, answering the status and the body (JSON, or the text as a JSON string when it
    /// is not JSON); for callers that render the bus's answer as it is (the CLI).
    pub async fn raw(
        &self,
        method: Method,
        path: &str,
        query: &[(&str, Option<String>)],
        body: Option<&Value>,
    ) -> Result<(StatusCode, Value)> {
        let pairs: Vec<(&str, &str)> = query.iter().filter_map(|(k, v)| v.as_deref().map(|v| (*k, v))).collect();
        let mut req = self.http.request(method.clone(), format!("{}{}", self.base, path));
        if !self.token.is_empty() {
            req = req.bearer_auth(&self.token);
        }
        if let Some(t) = self.timeout {
            req = req.timeout(t);
        }
        if !pairs.is_empty() {
            req = req.query(&pairs);
        }
        if let Some(b) = body {
            req = req.json(b);
        }
        let resp = req.send().await.map_err(|e| {
            let cause = root_cause(&e);
            if e.is_connect() {
                let message = format!("{method} {path}: cannot connect to {} ({cause})", self.base);
                Error::Unreachable { message, cause, dedupe_key: None }
            } else if e.is_timeout() {
                Error::Timeout {
                    message: format!("{method} {path}: no answer within {:?}", self.timeout),
                    dedupe_key: None,
                }
            } else {
                let message = format!("{method} {path}: the exchange with the bus failed ({cause})");
                Error::Transport { message, cause: Some(cause), dedupe_key: None }
            }
        })?;
        let status = resp.status();
        let retry_after =
            resp.headers().get("retry-after").and_then(|v| v.to_str().ok()).and_then(|v| v.parse::<f64>().ok());
        let bytes = resp
            .bytes()
            .await
            .map_err(|e| Error::transport(format!("{method} {path}: the answer was cut off ({})", root_cause(&e))))?;
        let mut value: Value = serde_json::from_slice(&bytes)
            .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into_owned()));
        // A 429 may say when to retry only in its header: carry it as the body's field.
        if let (StatusCode::TOO_MANY_REQUESTS, Some(secs)) = (status, retry_after) {
            if value.pointer("/error/retry_after_ms").is_none() {
                if !value.get("error").is_some_and(Value::is_object) {
                    value =
                        json!({"error": {"code": "rate_limited", "message": format!("{method} {path}: rate limited")}});
                }
                value["error"]["retry_after_ms"] = json!(secs * 1000.0);
            }
        }
        Ok((status, value))
    }

    /// A call whose 2xx body is deserialized as `T`.
    pub(crate) async fn typed<T: DeserializeOwned>(
        &self,
        method: Method,
        path: &str,
        query: &[(&str, Option<String>)],
        body: Option<&Value>,
    ) -> Result<T> {
        let value = self.request(method.clone(), path, query, body, &[]).await?;
        serde_json::from_value(value).map_err(|e| Error::Protocol(format!("{method} {path}: unexpected answer: {e}")))
    }
}

/// The innermost cause of a reqwest error, in one line (reqwest wraps hyper wraps io).
fn root_cause(e: &(dyn std::error::Error + 'static)) -> String {
    let mut cur = e;
    while let Some(next) = cur.source() {
        cur = next;
    }
    cur.to_string()
}

/// Admin calls with the admin token: register, rotate, remove, roster, rebuild; and the
/// groups' (`create_group`, ..., in `groups.rs`).
#[derive(Debug, Clone)]
pub struct AdminClient {
    pub(crate) api: HttpApi,
}

impl AdminClient {
    pub fn new(url: &str, admin_token: &str) -> Result<Self> {
        Ok(AdminClient { api: HttpApi::new(url, admin_token, Some(Duration::from_secs(15)))? })
    }

    /// An admin client on an `HttpApi` built by the caller (its own reqwest client, timeout).
    pub fn from_api(api: HttpApi) -> Self {
        AdminClient { api }
    }

    /// Registers `identity` in `tenant` (default `default`) as `kind` (default `interactive`).
    pub async fn register(&self, identity: &str, tenant: Option<&str>, kind: Option<&str>) -> Result<Registration> {
        let mut body = json!({"identity": identity});
        if let Some(t) = tenant {
            body["tenant"] = json!(t);
        }
        if let Some(k) = kind {
            body["kind"] = json!(k);
        }
        self.api.typed(Method::POST, "/v1/agents", &[], Some(&body)).await
    }

    /// A new token for `identity`; the old one stops working at once (its sessions close 1008).
    pub async fn rotate(&self, identity: &str, tenant: Option<&str>) -> Result<Registration> {
        let path = format!("/v1/agents/{}/token", segment(identity));
        let mut reg: Registration =
            self.api.typed(Method::POST, &path, &[("tenant", tenant.map(str::to_string))], None).await?;
        if reg.identity.is_empty() {
            reg.identity = identity.to_string();
        }
        Ok(reg)
    }

    /// Removes `identity`: its token fails, its sessions close, its pending signals expire.
    pub async fn remove(&self, identity: &str, tenant: Option<&str>) -> Result<Removal> {
        let path = format!("/v1/agents/{}", segment(identity));
        self.api.typed(Method::DELETE, &path, &[("tenant", tenant.map(str::to_string))], None).await
    }

    /// The roster of `tenant` (default `default`) with each agent's recipient state.
    pub async fn agents(&self, tenant: Option<&str>) -> Result<Vec<Agent>> {
        let roster: Roster =
            self.api.typed(Method::GET, "/v1/agents", &[("tenant", tenant.map(str::to_string))], None).await?;
        Ok(with_tenant(roster))
    }

    /// Rebuilds every read model from the stream.
    pub async fn rebuild(&self) -> Result<Value> {
        self.api.request(Method::POST, "/v1/admin/rebuild", &[], None, &[]).await
    }
}

pub(crate) fn with_tenant(roster: Roster) -> Vec<Agent> {
    roster
        .agents
        .into_iter()
        .map(|mut a| {
            if a.tenant.is_empty() {
                a.tenant = roster.tenant.clone();
            }
            a
        })
        .collect()
}
