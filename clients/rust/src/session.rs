//! The WebSocket session (CONTRACT §7): open it with the token, read the welcome, heartbeat,
//! route `result` frames to their callers and pushed signals to `delivery.rs`, and reconnect
//! with jittered exponential backoff until the client closes or the bus refuses the token.
//!
//! Deliberately does not decide what a call means (that is `calls.rs`), nor make calls (that
//! is `rpc.rs`): it moves frames. It never names the `Client`.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use futures::{SinkExt, StreamExt};
use rand::Rng;
use serde_json::Value;
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::http::HeaderValue;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::protocol::{CloseFrame, WebSocketConfig};
use tokio_tungstenite::tungstenite::Message;
use tokio_util::sync::CancellationToken;

use crate::delivery::on_push;
use crate::error::{BusError, Error, Result};
use crate::shared::{ConnectionEvent, Inner};
use crate::types::{Signal, Welcome};

/// Bytes read from the socket per read call (a burst of ~25 signal frames).
const READ_BUFFER_BYTES: usize = 16 * 1024;

/// Most queued frames written out with one flush.
const MAX_BURST: usize = 64;

/// Writes `first` and whatever else is already queued (up to `MAX_BURST` frames) with one
/// flush: a burst of sends or acks goes out in one write, not one system call per frame.
async fn write_burst<S>(sink: &mut S, rx: &mut mpsc::UnboundedReceiver<Message>, first: Message) -> Result<(), S::Error>
where
    S: futures::Sink<Message> + Unpin,
{
    sink.feed(first).await?;
    for _ in 1..MAX_BURST {
        match rx.try_recv() {
            Ok(msg) => sink.feed(msg).await?,
            Err(_) => break,
        }
    }
    sink.flush().await
}

/// Keeps a session open until the client closes or the bus refuses the token. Logging is quiet:
/// one WARN when an open session is lost, DEBUG per failed attempt, one INFO when a session opens
/// again; a refusal that `connect` returns to its caller is not also logged above DEBUG.
pub(crate) async fn supervise(inner: Arc<Inner>) {
    let mut attempt: u32 = 0;
    while !inner.shutdown.is_cancelled() {
        let opened = match run_session(&inner).await {
            Ok(opened) => opened,
            Err(e) if e.is_fatal_for_session() => {
                if inner.sessions_opened.load(Ordering::Relaxed) > 0 {
                    // In the background: nobody is waiting to be told.
                    tracing::warn!(error = %e, "the bus refused the session, not reconnecting");
                } else {
                    // `connect` / `wait_connected` returns it.
                    tracing::debug!(error = %e, "the bus refused the session, not reconnecting");
                }
                inner.state.send_modify(|s| s.fatal = Some(e));
                inner.fail_pending();
                inner.tell_closed(); // given up for good
                return;
            }
            Err(e) => {
                tracing::debug!(url = inner.api.base(), error = %e, "session failed");
                false
            }
        };
        if inner.shutdown.is_cancelled() {
            return;
        }
        if opened {
            tracing::warn!(url = inner.api.base(), "lost the session: reconnecting in the background");
        }
        attempt = if opened { 0 } else { attempt.saturating_add(1) };
        // Full doubling up to the cap, then a random point in its upper half: clients that
        // lost the same bus do not come back in lockstep.
        let ceiling = inner.reconnect_initial.saturating_mul(1 << attempt.min(20)).min(inner.reconnect_max);
        let delay = ceiling.mul_f64(rand::thread_rng().gen_range(0.5..=1.0));
        tracing::debug!(
            url = inner.api.base(),
            delay_ms = delay.as_millis() as u64,
            attempt = attempt + 1,
            "reconnecting"
        );
        tokio::select! {
            _ = inner.shutdown.cancelled() => return,
            _ = tokio::time::sleep(delay) => {}
        }
    }
}

fn unauthorized(message: String) -> Error {
    Error::Unauthorized(Box::new(BusError {
        code: "unauthorized".into(),
        message,
        status: None,
        details: Default::default(),
    }))
}

/// One session: connect, welcome, then read and write until it ends. `Ok(true)` when a welcome
/// was received; `Err(Unauthorized)` when the bus closed it with 1008 (token rotated/removed).
async fn run_session(inner: &Arc<Inner>) -> Result<bool> {
    let mut request = inner
        .ws_url
        .as_str()
        .into_client_request()
        .map_err(|e| Error::Protocol(format!("cannot make a websocket request to {}: {e}", inner.ws_url)))?;
    let bearer = HeaderValue::from_str(&format!("Bearer {}", inner.api.token()))
        .map_err(|_| unauthorized("the token holds characters a header cannot carry".into()))?;
    request.headers_mut().insert("authorization", bearer);
    let mut config = WebSocketConfig::default();
    config.max_message_size = Some(16 << 20);
    // tungstenite zeroes `read_buffer_size` bytes before every read; its 128 KiB default made
    // that memset the largest single cost of a busy session.
    config = config.read_buffer_size(READ_BUFFER_BYTES);
    // TCP_NODELAY: small frames would otherwise wait for delayed ACKs.
    let connect = tokio_tungstenite::connect_async_with_config(request, Some(config), true);
    let ws = tokio::select! {
        _ = inner.shutdown.cancelled() => return Ok(false),
        r = tokio::time::timeout(inner.connect_timeout, connect) => r,
    };
    let mut ws = match ws {
        Err(_) => return Err(Error::transport(format!("no websocket upgrade within {:?}", inner.connect_timeout))),
        Ok(Err(tokio_tungstenite::tungstenite::Error::Http(resp))) => {
            let body = resp.body().as_deref().and_then(|b| serde_json::from_slice(b).ok()).unwrap_or(Value::Null);
            return Err(Error::from_body(&body, Some(resp.status().as_u16())));
        }
        Ok(Err(e)) => return Err(Error::transport(format!("cannot open a session with {}: {e}", inner.api.base()))),
        Ok(Ok((ws, _))) => ws,
    };
    let first = match tokio::time::timeout(inner.connect_timeout, ws.next()).await {
        Ok(Some(Ok(Message::Text(t)))) => t,
        Ok(Some(Ok(other))) => return Err(Error::Protocol(format!("expected a welcome frame first, got {other:?}"))),
        Ok(Some(Err(e))) => return Err(Error::transport(format!("the session failed before its welcome: {e}"))),
        Ok(None) | Err(_) => return Err(Error::transport("the bus sent no welcome")),
    };
    let welcome: Welcome = serde_json::from_str::<Value>(first.as_str())
        .ok()
        .filter(|v| v["op"] == "welcome")
        .and_then(|v| serde_json::from_value(v).ok())
        .ok_or_else(|| Error::Protocol(format!("expected a welcome frame first, got {}", first.as_str())))?;

    let (mut sink, mut stream) = ws.split();
    let (tx, mut rx) = mpsc::unbounded_channel::<Message>();
    let kill = CancellationToken::new();
    *inner.out.lock().unwrap() = Some(tx);
    *inner.kill.lock().unwrap() = Some(kill.clone());
    *inner.identity.lock().unwrap() = Some(welcome.identity.clone());
    let reopened = inner.sessions_opened.fetch_add(1, Ordering::Relaxed) > 0;
    if reopened {
        tracing::info!(url = inner.api.base(), session_id = %welcome.session_id, tenant = %welcome.tenant, identity = %welcome.identity, "reconnected");
    } else {
        tracing::debug!(session_id = %welcome.session_id, tenant = %welcome.tenant, identity = %welcome.identity, "session open");
    }
    let interval = Duration::from_millis(welcome.heartbeat_interval_ms.max(50));
    inner.state.send_modify(|s| {
        s.connected = true;
        s.welcome = Some(welcome);
    });
    inner.tell(if reopened { ConnectionEvent::Reconnected } else { ConnectionEvent::Connected });
    inner.replay_wakeup.notify_one(); // the bus is back: replay the spool now

    // A bus that sends nothing (not even pongs) for this long is gone without a FIN.
    let silence_limit = (interval * 2).max(Duration::from_secs(5)) + interval;
    let mut ticker = tokio::time::interval_at(Instant::now() + interval, interval);
    let mut last_rx = Instant::now();
    let mut close: Option<(u16, String)> = None;
    loop {
        tokio::select! {
            _ = inner.shutdown.cancelled() => {
                let frame = CloseFrame { code: CloseCode::Normal, reason: "client closed".into() };
                if sink.send(Message::Close(Some(frame))).await.is_ok() {
                    // Wait for the bus's close so it has recorded the session's end.
                    let _ = tokio::time::timeout(Duration::from_secs(2), async {
                        while let Some(Ok(m)) = stream.next().await {
                            if matches!(m, Message::Close(_)) { break; }
                        }
                    }).await;
                }
                break;
            }
            _ = kill.cancelled() => break, // dropping both halves aborts the socket
            Some(msg) = rx.recv() => {
                if write_burst(&mut sink, &mut rx, msg).await.is_err() { break; }
            }
            _ = ticker.tick() => {
                if last_rx.elapsed() > silence_limit {
                    tracing::debug!(silence_ms = silence_limit.as_millis() as u64, "no frame from the bus: dropping the session");
                    break;
                }
                if sink.send(Message::text(r#"{"op":"ping"}"#)).await.is_err() { break; }
            }
            frame = stream.next() => match frame {
                Some(Ok(Message::Text(t))) => {
                    last_rx = Instant::now();
                    handle_frame(inner, t.as_str());
                }
                Some(Ok(Message::Close(f))) => {
                    close = f.map(|f| (u16::from(f.code), f.reason.to_string()));
                    let _ = sink.flush().await; // completes the close handshake
                    break;
                }
                Some(Ok(_)) => last_rx = Instant::now(),
                Some(Err(e)) => {
                    tracing::debug!(error = %e, "session read failed");
                    break;
                }
                None => break,
            },
        }
    }
    *inner.out.lock().unwrap() = None;
    *inner.kill.lock().unwrap() = None;
    drop(rx); // before failing the waiters: a call that races the end then fails its send
    inner.fail_pending();
    inner.state.send_modify(|s| s.connected = false);
    if !inner.shutdown.is_cancelled() {
        inner.tell(ConnectionEvent::Disconnected);
    }
    tracing::debug!(
        code = close.as_ref().map(|c| c.0),
        reason = close.as_ref().map(|c| c.1.as_str()),
        "session closed"
    );
    match close {
        Some((1008, reason)) => Err(unauthorized(format!(
            "the bus closed the session with 1008 ({})",
            if reason.is_empty() { "token rotated or agent removed" } else { &reason }
        ))),
        Some((1009, _)) => {
            tracing::error!(
                "the bus closed the session with 1009: a frame was over its size limit; send smaller frames"
            );
            Ok(true)
        }
        _ => Ok(true),
    }
}

fn handle_frame(inner: &Arc<Inner>, text: &str) {
    let Ok(frame) = serde_json::from_str::<Value>(text) else {
        tracing::error!(frame = %text.chars().take(200).collect::<String>(), "the bus sent a frame that is not JSON; ignored");
        return;
    };
    match frame["op"].as_str() {
        Some("result") => {
            let r = frame["ref"].as_str().unwrap_or_default().to_string();
            match inner.pending.lock().unwrap().remove(&r) {
                Some(tx) => {
                    let _ = tx.send(frame);
                }
                None => tracing::warn!(r#ref = %r, "a result for an unknown ref"),
            }
        }
        Some("signal") => match serde_json::from_value::<Signal>(frame["signal"].clone()) {
            Ok(sig) => on_push(inner, sig),
            Err(e) => tracing::error!(error = %e, "a signal frame this client cannot read, not acked"),
        },
        Some("pong") => {}
        other => tracing::debug!(op = ?other, "ignoring frame"),
    }
}
