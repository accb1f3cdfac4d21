//! One HTTP call to the bus, classified into the CLI's exit codes.
//!
//! Deliberately does not print: `render.rs` does.

use reqwest::Method;
use serde_json::Value;

use super::Conn;

/// Why a verb failed, and the exit code it maps to.
#[derive(Debug)]
pub enum Failure {
    /// The bus answered with an error body (exit 1).
    Bus { status: u16, body: Value },
    /// The bus could not be reached (exit 3).
    Unreachable(String),
    /// The invocation itself is wrong (exit 2).
    Usage(String),
}

impl Failure {
    pub fn exit_code(&self) -> i32 {
        match self {
            Failure::Bus { .. } => 1,
            Failure::Usage(_) => 2,
            Failure::Unreachable(_) => 3,
        }
    }
}

fn default_token() -> Option<String> {
    let path = std::path::Path::new("./signalbus-data").join(crate::admin_token::FILE_NAME);
    std::fs::read_to_string(path).ok().map(|t| t.trim().to_string()).filter(|t| !t.is_empty())
}

/// Sends one request and returns the JSON body of a 2xx answer.
pub async fn call(conn: &Conn, method: Method, path: &str, body: Option<Value>) -> Result<Value, Failure> {
    let url = format!("{}{}", conn.url.trim_end_matches('/'), path);
    let client = reqwest::Client::new();
    let mut req = client.request(method, &url);
    if let Some(token) = conn.token.clone().or_else(default_token) {
        req = req.bearer_auth(token);
    }
    if let Some(b) = body {
        req = req.json(&b);
    }
    let resp = req.send().await.map_err(|e| Failure::Unreachable(format!("cannot reach {url}: {e}")))?;
    let status = resp.status();
    let text = resp.text().await.map_err(|e| Failure::Unreachable(format!("reading answer from {url}: {e}")))?;
    let value = serde_json::from_str(&text).unwrap_or(Value::String(text));
    if status.is_success() {
        Ok(value)
    } else {
        Err(Failure::Bus { status: status.as_u16(), body: value })
    }
}

/// Percent-encodes one path segment (plugin names carry `/`).
pub fn segment(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~' | b':' | b'@') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}
