//! One HTTP call to the bus, classified into the CLI's exit codes, and where a call's URL and
//! token come from: `--url` (with its scheme checked), `--token`, else the admin token
//! `signalbus serve` keeps in its data dir.
//!
//! Deliberately does not print: `render.rs` does. The hints a failure carries say what to do
//! next (where the token was looked for, whether a server is running here).

use std::path::PathBuf;

use reqwest::{Method, Url};
use serde_json::Value;
use signalbus_client::HttpApi;

use super::args::Conn;

/// Why a verb failed, and the exit code it maps to.
#[derive(Debug)]
pub enum Failure {
    /// The bus answered with an error body (exit 1); `hint` says what to try next.
    Bus { status: u16, body: Value, hint: Option<String> },
    /// The bus answered, and what it said is a failure that is not an HTTP error, e.g. doctor
    /// checks that failed (exit 1).
    Failed(String),
    /// The bus could not be reached (exit 3).
    Unreachable(String),
    /// The invocation itself is wrong (exit 2).
    Usage(String),
    /// The bus answered, and what it said ends the verb with its own exit code: a directive
    /// waited for that ended other than `completed`, or was still open when the wait ended
    /// (`wait::exit_code`).
    Ended { exit: i32, message: String },
}

impl Failure {
    pub fn exit_code(&self) -> i32 {
        match self {
            Failure::Bus { .. } | Failure::Failed(_) => 1,
            Failure::Usage(_) => 2,
            Failure::Unreachable(_) => 3,
            Failure::Ended { exit, .. } => *exit,
        }
    }

    /// The error code of a `Bus` failure's body.
    pub fn code(&self) -> Option<&str> {
        match self {
            Failure::Bus { body, .. } => body.pointer("/error/code").and_then(Value::as_str),
            _ => None,
        }
    }

    /// Adds a hint to a `Bus` failure (others are returned as they are).
    pub fn with_hint(self, hint: String) -> Failure {
        match self {
            Failure::Bus { status, body, .. } => Failure::Bus { status, body, hint: Some(hint) },
            other => other,
        }
    }
}

/// Where `signalbus serve` keeps its admin token: `$SIGNALBUS_DATA_DIR` (the variable `serve`
/// reads for --data-dir), else serve's default `./signalbus-data`.
pub fn admin_token_file() -> PathBuf {
    let dir = std::env::var_os("SIGNALBUS_DATA_DIR").map_or_else(|| PathBuf::from("./signalbus-data"), PathBuf::from);
    let file = dir.join(crate::admin_token::FILE_NAME);
    std::path::absolute(&file).unwrap_or(file)
}

fn admin_token_from_file() -> Option<String> {
    std::fs::read_to_string(admin_token_file()).ok().map(|t| t.trim().to_string()).filter(|t| !t.is_empty())
}

/// The token a call sends: `--token`/`SIGNALBUS_TOKEN`, else the kept admin token.
pub fn token(conn: &Conn) -> Option<String> {
    conn.token.clone().filter(|t| !t.is_empty()).or_else(admin_token_from_file)
}

/// `--url` as a URL; one without an `http://` or `https://` scheme is a usage error.
pub fn base_url(conn: &Conn) -> Result<Url, Failure> {
    let usage = || {
        Failure::Usage(format!(
            "--url {:?} is not an http:// or https:// URL (e.g. http://{})",
            conn.url,
            conn.url.trim_start_matches("//")
        ))
    };
    match Url::parse(&conn.url) {
        Ok(url) if matches!(url.scheme(), "http" | "https") && url.host().is_some() => Ok(url),
        _ => Err(usage()),
    }
}

/// Sends one request and returns the JSON body of a 2xx answer. The HTTP exchange is the
/// client library's (`signalbus_client::HttpApi`); the exit codes and hints are the CLI's.
pub async fn call(conn: &Conn, method: Method, path: &str, body: Option<Value>) -> Result<Value, Failure> {
    call_with_status(conn, method, path, body).await.map(|(_, v)| v)
}

/// `call`, with the status of the 2xx answer (201 created vs 200 found or updated).
pub async fn call_with_status(
    conn: &Conn,
    method: Method,
    path: &str,
    body: Option<Value>,
) -> Result<(u16, Value), Failure> {
    let base = base_url(conn)?;
    let token = token(conn);
    let url = base.as_str().trim_end_matches('/');
    // No timeout: the CLI waits as long as the connection lives, as curl would.
    let api = HttpApi::new(url, token.as_deref().unwrap_or(""), None).map_err(|e| Failure::Usage(e.to_string()))?;
    let (status, value) = api.raw(method, path, &[], body.as_ref()).await.map_err(|e| {
        Failure::Unreachable(match e.transport_cause() {
            Some(cause) => unreachable_cause(&base, cause),
            None => format!("cannot reach {url}: {e}"),
        })
    })?;
    if status.is_success() {
        return Ok((status.as_u16(), value));
    }
    let hint = (status.as_u16() == 401 && token.is_none()).then(|| {
        format!(
            "no token: pass --token or set SIGNALBUS_TOKEN; the admin token of `signalbus serve` was not found at {} \
             (set SIGNALBUS_DATA_DIR to serve's --data-dir)",
            admin_token_file().display()
        )
    });
    Err(Failure::Bus { status: status.as_u16(), body: value, hint })
}

/// Why `base` could not be reached, in one line: the cause (not reqwest's layers of context)
/// and whether a `signalbus serve` runs on this machine.
pub fn unreachable(base: &Url, e: &(dyn std::error::Error + 'static)) -> String {
    unreachable_cause(base, &root_cause(e))
}

/// `unreachable` given the innermost cause as text.
pub fn unreachable_cause(base: &Url, cause: &str) -> String {
    let cause = cause.to_lowercase();
    let url = base.as_str().trim_end_matches('/');
    if cause.contains("refused") {
        return format!("cannot reach {url}: connection refused; {}", local_serve());
    }
    if cause.contains("timed out") || cause.contains("deadline") {
        return format!("cannot reach {url}: timed out; {}", local_serve());
    }
    // rustls reading a plain-HTTP answer as a TLS record.
    if cause.contains("invalidcontenttype") || cause.contains("corrupt message") {
        return format!("cannot reach {url}: it does not answer TLS ({cause}); for a plain listener use http://");
    }
    format!("cannot reach {url}: {cause}")
}

fn root_cause(e: &(dyn std::error::Error + 'static)) -> String {
    let mut cur = e;
    while let Some(next) = cur.source() {
        cur = next;
    }
    cur.to_string().to_lowercase()
}

/// Whether a `signalbus serve` (or `gateway`) process runs here, and where it listens.
fn local_serve() -> String {
    match find_local_serve() {
        Some((pid, listen)) => format!(
            "`signalbus serve` is running here (pid {pid}) and listens on {listen}: point --url or SIGNALBUS_URL at it"
        ),
        None => "no `signalbus serve` is running on this machine: start one with `signalbus serve`, or point --url \
                 or SIGNALBUS_URL at a running bus"
            .to_string(),
    }
}

/// Scans `/proc` for a server process of this binary (Linux; elsewhere nothing is found).
fn find_local_serve() -> Option<(u32, String)> {
    let entries = std::fs::read_dir("/proc").ok()?;
    for entry in entries.flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else { continue };
        let Ok(raw) = std::fs::read(entry.path().join("cmdline")) else { continue };
        let args: Vec<String> =
            raw.split(|b| *b == 0).filter(|a| !a.is_empty()).map(|a| String::from_utf8_lossy(a).into_owned()).collect();
        let is_bus = args.first().is_some_and(|a| a.rsplit('/').next() == Some("signalbus"));
        if !is_bus || !args.iter().skip(1).any(|a| a == "serve" || a == "gateway") {
            continue;
        }
        let listen = args
            .iter()
            .position(|a| a == "--listen")
            .and_then(|i| args.get(i + 1).cloned())
            .or_else(|| args.iter().find_map(|a| a.strip_prefix("--listen=").map(str::to_string)))
            .or_else(|| env_of(&entry.path(), "SIGNALBUS_LISTEN"))
            .unwrap_or_else(|| "127.0.0.1:7400 (the default)".to_string());
        return Some((pid, listen));
    }
    None
}

/// One variable of a process's environment (readable for the user's own processes).
fn env_of(proc_dir: &std::path::Path, name: &str) -> Option<String> {
    let raw = std::fs::read(proc_dir.join("environ")).ok()?;
    raw.split(|b| *b == 0).find_map(|kv| {
        let kv = String::from_utf8_lossy(kv);
        kv.strip_prefix(name).and_then(|rest| rest.strip_prefix('=')).map(str::to_string)
    })
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
