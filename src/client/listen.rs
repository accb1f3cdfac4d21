//! `signalbus listen`: one WebSocket session as the token's agent (CONTRACT §7), printing each
//! signal as it arrives — pending ones first (the startup drain), then live pushes — as a line
//! of text, or with `--json` as one JSON object per line. `--ack` acks each once printed.
//!
//! Deliberately a plain client of the protocol: it heartbeats at the interval the welcome names
//! and never decides anything. Signals it does not ack are redelivered on the agent's next
//! session, which is the point of acking only what was shown.

use std::time::Duration;

use futures::{SinkExt, StreamExt};
use serde_json::{json, Value};
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::http::HeaderValue;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::Message;

use super::args::{Conn, ListenArgs};
use super::http::{base_url, token, unreachable, Failure};

/// Heartbeat interval when the welcome frame does not name one.
const DEFAULT_HEARTBEAT: Duration = Duration::from_secs(20);

/// The socket settings of the CLI's sessions (`listen`, and the MCP server's inbox): a 16 KiB
/// read buffer, since tungstenite zeroes `read_buffer_size` bytes before every read (128 KiB by
/// default); TCP_NODELAY is asked for at connect.
pub(crate) fn ws_config() -> tokio_tungstenite::tungstenite::protocol::WebSocketConfig {
    tokio_tungstenite::tungstenite::protocol::WebSocketConfig::default().read_buffer_size(16 * 1024)
}

pub async fn run(args: ListenArgs) -> (Conn, Result<(), Failure>) {
    let result = listen(&args).await;
    (args.conn, result)
}

async fn listen(args: &ListenArgs) -> Result<(), Failure> {
    let conn = &args.conn;
    let base = base_url(conn)?;
    let mut url = base.clone();
    let scheme = if base.scheme() == "https" { "wss" } else { "ws" };
    url.set_scheme(scheme).map_err(|()| Failure::Usage(format!("cannot make a websocket url of {base}")))?;
    url.set_path(&format!("{}/v1/ws", base.path().trim_end_matches('/')));
    url.set_query(Some(&format!("kind={}", args.kind)));
    let mut request = url
        .as_str()
        .into_client_request()
        .map_err(|e| Failure::Usage(format!("cannot make a websocket request to {url}: {e}")))?;
    let Some(token) = token(conn) else {
        return Err(Failure::Usage("listen needs an agent token: pass --token or set SIGNALBUS_TOKEN".into()));
    };
    let bearer = HeaderValue::from_str(&format!("Bearer {token}"))
        .map_err(|_| Failure::Usage("the token holds characters a header cannot carry".into()))?;
    request.headers_mut().insert("authorization", bearer);
    let (ws, _) = match tokio_tungstenite::connect_async_with_config(request, Some(ws_config()), true).await {
        Ok(ok) => ok,
        Err(tokio_tungstenite::tungstenite::Error::Http(resp)) => {
            let status = resp.status().as_u16();
            let body = resp.body().as_deref().and_then(|b| serde_json::from_slice(b).ok()).unwrap_or(Value::Null);
            return Err(Failure::Bus { status, body, hint: None });
        }
        Err(e) => return Err(Failure::Unreachable(unreachable(&base, &e))),
    };
    let (mut sink, mut stream) = ws.split();
    let mut heartbeat = tokio::time::interval(DEFAULT_HEARTBEAT);
    heartbeat.reset();
    let mut shown = 0u64;
    let interrupted = tokio::signal::ctrl_c();
    tokio::pin!(interrupted);
    loop {
        let msg = tokio::select! {
            _ = &mut interrupted => {
                let _ = sink.send(Message::Close(None)).await;
                closing_handshake(&mut stream).await;
                return Ok(());
            }
            _ = heartbeat.tick() => {
                let _ = sink.send(Message::text(json!({"op": "ping"}).to_string())).await;
                continue;
            }
            msg = stream.next() => msg,
        };
        let frame: Value = match msg {
            Some(Ok(Message::Text(t))) => serde_json::from_str(t.as_str()).unwrap_or(Value::Null),
            Some(Ok(Message::Close(frame))) => {
                let (code, reason) = frame.map_or((1005, String::new()), |f| (u16::from(f.code), f.reason.to_string()));
                return closed(code, &reason);
            }
            Some(Ok(_)) => continue,
            Some(Err(e)) => return Err(Failure::Unreachable(format!("the session ended: {e}"))),
            None => return Err(Failure::Unreachable("the bus closed the connection".into())),
        };
        match frame["op"].as_str() {
            Some("welcome") => {
                let every = frame["heartbeat_interval_ms"].as_u64().map_or(DEFAULT_HEARTBEAT, Duration::from_millis);
                heartbeat = tokio::time::interval(every.max(Duration::from_millis(100)));
                heartbeat.reset();
                eprintln!(
                    "listening as {} in tenant {} (session {}); ctrl-c to stop",
                    frame["identity"].as_str().unwrap_or("?"),
                    frame["tenant"].as_str().unwrap_or("?"),
                    frame["session_id"].as_str().unwrap_or("?"),
                );
            }
            Some("signal") => {
                let signal = &frame["signal"];
                if args.conn.json {
                    println!("{signal}");
                } else {
                    println!("{}", line(signal));
                }
                if args.ack {
                    let ack = json!({"op": "ack", "signal_ids": [signal["id"]]});
                    let _ = sink.send(Message::text(ack.to_string())).await;
                }
                shown += 1;
                if args.count.is_some_and(|n| shown >= n) {
                    // Give the ack its round trip before closing, so it is recorded.
                    if args.ack {
                        let _ = tokio::time::timeout(Duration::from_secs(2), until_result(&mut stream)).await;
                    }
                    let _ = sink.send(Message::Close(None)).await;
                    closing_handshake(&mut stream).await;
                    return Ok(());
                }
            }
            Some("result") if frame["ok"] == json!(false) => {
                eprintln!("error from the bus: {}", frame["error"]);
            }
            _ => {}
        }
    }
}

/// Waits (a few seconds at most) for the bus's side of the close. The bus records the session's
/// close on the stream before it answers, so once this returns, signals the session was handed
/// and did not ack are already free for the agent's next session or inbox.
async fn closing_handshake<S>(stream: &mut S)
where
    S: futures::Stream<Item = Result<Message, tokio_tungstenite::tungstenite::Error>> + Unpin,
{
    let _ = tokio::time::timeout(Duration::from_secs(5), async {
        while let Some(Ok(msg)) = stream.next().await {
            if matches!(msg, Message::Close(_)) {
                return;
            }
        }
    })
    .await;
}

/// Reads until the next `result` frame (an ack's answer).
async fn until_result<S>(stream: &mut S)
where
    S: futures::Stream<Item = Result<Message, tokio_tungstenite::tungstenite::Error>> + Unpin,
{
    while let Some(Ok(msg)) = stream.next().await {
        if let Message::Text(t) = msg {
            if serde_json::from_str::<Value>(t.as_str()).is_ok_and(|v| v["op"] == "result") {
                return;
            }
        }
    }
}

/// A session the bus closed: normal closes end quietly, the rest say why.
fn closed(code: u16, reason: &str) -> Result<(), Failure> {
    match CloseCode::from(code) {
        CloseCode::Normal | CloseCode::Away => {
            eprintln!("the bus closed the session ({code} {reason})");
            Ok(())
        }
        _ => Err(Failure::Failed(format!("the bus closed the session: {code} {reason}"))),
    }
}

/// One signal as a line: when, priority, from, type, id, payload.
fn line(s: &Value) -> String {
    let text = |k: &str| s[k].as_str().unwrap_or("-").to_string();
    let redelivered = if s["redelivered"] == json!(true) { " (redelivered)" } else { "" };
    format!(
        "{}  p{}  {} -> {}  {}  {}{}  {}",
        text("created_at"),
        s["priority"],
        text("from"),
        text("to"),
        text("type"),
        text("id"),
        redelivered,
        s["payload"]
    )
}
