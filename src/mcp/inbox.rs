//! The shim's WebSocket session (`GET /v1/ws?kind=shim`, SPEC-071's shim): pushed signals are
//! kept in a buffer until the next tool result hands them over, and each one is announced to
//! the MCP client as it arrives. The session is reconnected when it drops; what the buffer held
//! comes back with the new session's startup drain (`redelivered: true`), and is kept once by id.
//!
//! Deliberately never acks: a signal is acked when it was handed to the agent (`shim.rs`), so
//! one the shim held when it died goes out again on the agent's next session.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::{SinkExt, StreamExt};
use serde_json::{json, Value};
use tokio::sync::futures::Notified;
use tokio::sync::Notify;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::http::{header, HeaderValue, StatusCode};
use tokio_tungstenite::tungstenite::Message;
use tokio_util::sync::CancellationToken;

/// Most signals held for the agent; past it the oldest are dropped from the buffer (they stay
/// delivered-unacked on the bus, so the agent's next session gets them again).
const MAX_BUFFERED: usize = 10_000;

/// What the buffer calls with each newly buffered signal.
pub type OnSignal = Arc<dyn Fn(&Value) + Send + Sync>;

/// Pushed signals waiting for the next tool result, and who to tell when one arrives.
#[derive(Default)]
pub struct Buffer {
    signals: Mutex<VecDeque<Value>>,
    /// Called with each newly buffered signal (the announcement to the MCP client).
    on_signal: Mutex<Option<OnSignal>>,
    /// Notified when a signal is buffered (a waiting `check_inbox`).
    arrived: Notify,
}

impl Buffer {
    /// Takes every buffered signal, to hand over now.
    pub fn take(&self) -> Vec<Value> {
        self.signals.lock().unwrap().drain(..).collect()
    }

    pub fn is_empty(&self) -> bool {
        self.signals.lock().unwrap().is_empty()
    }

    /// Resolves once a signal is buffered after it was enabled (or first polled).
    pub fn arrived(&self) -> Notified<'_> {
        self.arrived.notified()
    }

    pub fn on_signal(&self, f: OnSignal) {
        *self.on_signal.lock().unwrap() = Some(f);
    }

    fn push(&self, signal: Value) {
        {
            let mut held = self.signals.lock().unwrap();
            if held.iter().any(|s| s["id"] == signal["id"]) {
                return;
            }
            if held.len() >= MAX_BUFFERED {
                held.pop_front();
            }
            held.push_back(signal.clone());
        }
        self.arrived.notify_waiters();
        let notify = self.on_signal.lock().unwrap().clone();
        if let Some(f) = notify {
            f(&signal);
        }
    }
}

impl std::fmt::Debug for Buffer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Buffer").field("signals", &self.signals.lock().unwrap().len()).finish_non_exhaustive()
    }
}

/// Why the session could not be opened at all.
#[derive(Debug)]
pub enum OpenError {
    /// The bus answered the upgrade with an error (a bad token: 401).
    Refused {
        status: u16,
        body: String,
    },
    Unreachable(String),
}

type Socket = tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// The WebSocket URL of a bus's HTTP base URL.
pub fn ws_url(base: &str) -> String {
    let base = base.trim_end_matches('/');
    let rest = base.strip_prefix("https://").map(|r| format!("wss://{r}"));
    let url = rest.unwrap_or_else(|| format!("ws://{}", base.strip_prefix("http://").unwrap_or(base)));
    format!("{url}/v1/ws?kind=shim")
}

/// Opens the session once (so a bad token fails the start), then keeps it: reconnects with a
/// backoff until `stop`.
pub async fn open(
    url: String,
    token: String,
    buffer: Arc<Buffer>,
    stop: CancellationToken,
) -> Result<tokio::task::JoinHandle<()>, OpenError> {
    let socket = connect(&url, &token).await?;
    let task = tokio::spawn(async move {
        let mut socket = Some(socket);
        let mut backoff = Duration::from_millis(200);
        loop {
            if let Some(s) = socket.take() {
                serve(s, &buffer, &stop).await;
                backoff = Duration::from_millis(200);
            }
            if stop.is_cancelled() {
                return;
            }
            tokio::select! {
                _ = stop.cancelled() => return,
                _ = tokio::time::sleep(backoff) => {}
            }
            match connect(&url, &token).await {
                Ok(s) => socket = Some(s),
                Err(e) => {
                    tracing::warn!(error = ?e, "bus session lost; reconnecting");
                    backoff = (backoff * 2).min(Duration::from_secs(10));
                }
            }
        }
    });
    Ok(task)
}

async fn connect(url: &str, token: &str) -> Result<Socket, OpenError> {
    let mut request = url.into_client_request().map_err(|e| OpenError::Unreachable(format!("bad url {url}: {e}")))?;
    let auth = HeaderValue::from_str(&format!("Bearer {token}"))
        .map_err(|_| OpenError::Refused { status: 401, body: "the token is not a valid header value".into() })?;
    request.headers_mut().insert(header::AUTHORIZATION, auth);
    match tokio_tungstenite::connect_async_with_config(request, Some(crate::client::ws_config()), true).await {
        Ok((socket, _)) => Ok(socket),
        Err(tokio_tungstenite::tungstenite::Error::Http(response)) => {
            let status = response.status();
            let body = response.body().as_deref().map(String::from_utf8_lossy).unwrap_or_default().to_string();
            let status = if status == StatusCode::SWITCHING_PROTOCOLS { 500 } else { status.as_u16() };
            Err(OpenError::Refused { status, body })
        }
        Err(e) => Err(OpenError::Unreachable(format!("cannot reach {url}: {e}"))),
    }
}

/// Runs one session until it drops or `stop`: buffers pushes, pings at the interval the
/// welcome names, and closes cleanly on `stop` (the bus records `session.closed`).
async fn serve(mut socket: Socket, buffer: &Buffer, stop: &CancellationToken) {
    let mut every = Duration::from_secs(15);
    let mut ping = tokio::time::interval(every);
    ping.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = stop.cancelled() => {
                let _ = socket.close(None).await;
                // The bus records the close when its side of the handshake completes.
                let _ = tokio::time::timeout(Duration::from_secs(2), async { while socket.next().await.is_some() {} }).await;
                return;
            }
            _ = ping.tick() => {
                if socket.send(Message::text(json!({"op": "ping"}).to_string())).await.is_err() {
                    return;
                }
            }
            frame = socket.next() => {
                let text = match frame {
                    Some(Ok(Message::Text(t))) => t,
                    Some(Ok(Message::Close(_))) | Some(Err(_)) | None => return,
                    Some(Ok(_)) => continue,
                };
                let Ok(v) = serde_json::from_str::<Value>(text.as_str()) else { continue };
                match v["op"].as_str() {
                    Some("signal") => buffer.push(v["signal"].clone()),
                    Some("welcome") => {
                        tracing::info!(session_id = %v["session_id"], identity = %v["identity"], "bus session open");
                        if let Some(ms) = v["heartbeat_interval_ms"].as_u64().filter(|ms| *ms > 0) {
                            every = Duration::from_millis(ms);
                            ping = tokio::time::interval(every);
                        }
                    }
                    _ => {}
                }
            }
        }
    }
}
