//! Talking to a bus as its users do: registering agents and making groups over HTTP with the
//! admin token, and opening WebSocket sessions (waiting out the moment between registering a token and the
//! gateway having read it from the stream).
//!
//! Deliberately no protocol logic beyond that: what a client does on its socket is the
//! scenario's business. Registration goes through the client library; the sockets stay raw
//! tungstenite streams, so the measured hot path carries no client bookkeeping.

use std::time::Duration;

use anyhow::{bail, Context};
use futures::StreamExt;
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

use crate::bed::Target;

pub type Ws = WebSocketStream<MaybeTlsStream<TcpStream>>;

/// A run-unique prefix for identities, so repeated runs against one `--url` bus never collide.
pub fn run_prefix() -> String {
    format!("bench-{}", &uuid::Uuid::new_v4().simple().to_string()[..8])
}

/// Registers `identities` (16 at a time) and returns their tokens in the same order.
pub async fn register_all(
    http: &reqwest::Client,
    target: &Target,
    identities: &[String],
) -> anyhow::Result<Vec<String>> {
    let calls = identities.iter().map(|id| register(http, target, id));
    let tokens: Vec<anyhow::Result<String>> = futures::stream::iter(calls).buffered(16).collect().await;
    tokens.into_iter().collect()
}

/// One registration through the client library's `AdminClient` (sharing `http`'s pool).
async fn register(http: &reqwest::Client, target: &Target, identity: &str) -> anyhow::Result<String> {
    let api = signalbus_client::HttpApi::with_client(&target.base, &target.admin_token, None, http.clone())?;
    let reg = signalbus_client::AdminClient::from_api(api)
        .register(identity, Some("default"), Some("daemon"))
        .await
        .with_context(|| format!("registering {identity}"))?;
    Ok(reg.token)
}

/// Creates group `@name` in tenant `default` through the admin API, without announcements (a
/// benchmark's setup should not send every member a `PeerJoined` per member), and adds
/// `members` to it one at a time: adds to one group race for its subject, and the bus answers a
/// race lost too often with 503 (nothing accepted), which is retried.
pub async fn create_group(
    http: &reqwest::Client,
    target: &Target,
    name: &str,
    members: &[String],
) -> anyhow::Result<()> {
    let url = format!("{}/v1/groups/{name}", target.base);
    let body = serde_json::json!({"tenant": "default", "announce": false});
    let r = http.put(&url).bearer_auth(&target.admin_token).json(&body).send().await.context("create group")?;
    if !r.status().is_success() {
        bail!("creating @{name}: {} {}", r.status(), r.text().await.unwrap_or_default());
    }
    for member in members {
        let mut attempt = 0;
        loop {
            let req = http.put(format!("{url}/members/{member}?tenant=default")).bearer_auth(&target.admin_token);
            let r = req.send().await.context("add member")?;
            let status = r.status();
            if status.is_success() {
                break;
            }
            attempt += 1;
            if status != reqwest::StatusCode::SERVICE_UNAVAILABLE || attempt >= 5 {
                bail!("adding {member} to @{name}: {status} {}", r.text().await.unwrap_or_default());
            }
            tokio::time::sleep(Duration::from_millis(50 * attempt)).await;
        }
    }
    Ok(())
}

/// A client session's socket settings. tungstenite zeroes `read_buffer_size` bytes of buffer
/// before every read call; its default (128 KiB) made that memset 5 % of a flat-out bench
/// process's CPU, billed to the bus it shares the cores with. 16 KiB still takes a burst of
/// ~25 signal frames per read.
fn ws_config() -> tokio_tungstenite::tungstenite::protocol::WebSocketConfig {
    tokio_tungstenite::tungstenite::protocol::WebSocketConfig::default().read_buffer_size(16 * 1024)
}

/// Opens a session and reads its welcome frame. A fresh token may not be known to the gateway
/// yet (it learns tokens from the stream), so 401s are retried for a few seconds.
pub async fn connect(ws_url: &str, token: &str) -> anyhow::Result<Ws> {
    let url = format!("{ws_url}?token={token}&kind=daemon");
    let mut delay = Duration::from_millis(20);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        // TCP_NODELAY: without it, Nagle holds small frames back waiting for delayed ACKs,
        // which would be billed to the bus as tens of milliseconds of latency.
        match tokio_tungstenite::connect_async_with_config(url.as_str(), Some(ws_config()), true).await {
            Ok((mut ws, _)) => {
                let welcome = tokio::time::timeout(Duration::from_secs(10), ws.next())
                    .await
                    .context("no welcome frame")?
                    .context("closed before the welcome frame")??;
                match welcome {
                    Message::Text(t) if t.as_str().contains("\"welcome\"") => return Ok(ws),
                    other => bail!("unexpected first frame {other:?}"),
                }
            }
            Err(e) if tokio::time::Instant::now() < deadline => {
                tracing::debug!(error = %e, "connect failed; retrying");
                tokio::time::sleep(delay).await;
                delay = (delay * 2).min(Duration::from_millis(500));
            }
            Err(e) => return Err(e).context("websocket connect"),
        }
    }
}
