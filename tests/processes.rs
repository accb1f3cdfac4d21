//! The `signalbus` binary as operators run it: embedded `serve`, refused half-configurations,
//! and several single-role processes (`gateway` ×2, `projector`, `sweeper`) sharing one NATS and
//! one PostgreSQL, where a signal sent through one gateway is pushed by the other.
//!
//! Deliberately black-box: only the command line, HTTP and WebSocket, as a user sees them.

use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use futures::{SinkExt, StreamExt};
use serde_json::{json, Value};
use tokio_tungstenite::tungstenite::Message;

const BIN: &str = env!("CARGO_BIN_EXE_signalbus");
const ADMIN: &str = "sba_test_admin_token";

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// A bus process, killed when dropped.
struct Proc {
    child: Child,
    base: String,
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn spawn(role: &str, extra: &[&str], data_dir: &std::path::Path) -> Proc {
    let port = free_port();
    let listen = format!("127.0.0.1:{port}");
    let child = Command::new(BIN)
        .arg(role)
        .args(["--listen", &listen, "--admin-token", ADMIN, "--stale-after", "2s"])
        .arg("--data-dir")
        .arg(data_dir)
        .args(extra)
        .env("RUST_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("spawn signalbus");
    Proc { child, base: format!("http://{listen}") }
}

async fn wait_ready(p: &mut Proc) {
    let deadline = Instant::now() + Duration::from_secs(30);
    let client = reqwest::Client::new();
    loop {
        if let Ok(Some(status)) = p.child.try_wait() {
            panic!("{} exited early: {status}", p.base);
        }
        if let Ok(r) = client.get(format!("{}/readyz", p.base)).send().await {
            if r.status().is_success() {
                return;
            }
        }
        assert!(Instant::now() < deadline, "{} never became ready", p.base);
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn post(base: &str, token: &str, path: &str, body: Value) -> (u16, Value) {
    let r = reqwest::Client::new().post(format!("{base}{path}")).bearer_auth(token).json(&body).send().await.unwrap();
    let status = r.status().as_u16();
    (status, r.json().await.unwrap_or(Value::Null))
}

async fn register(base: &str, identity: &str) -> String {
    let (status, body) = post(base, ADMIN, "/v1/agents", json!({"tenant": "default", "identity": identity})).await;
    assert_eq!(status, 200, "{body}");
    body["token"].as_str().unwrap().to_string()
}

#[tokio::test]
async fn embedded_serve_answers_health_and_metrics() {
    let dir = tempfile::tempdir().unwrap();
    let mut p = spawn("serve", &[], dir.path());
    wait_ready(&mut p).await;
    let health = reqwest::get(format!("{}/healthz", p.base)).await.unwrap();
    assert!(health.status().is_success());
    let token = register(&p.base, "alice").await;
    assert!(token.starts_with("sb_"));
    let metrics = reqwest::get(format!("{}/metrics", p.base)).await.unwrap().text().await.unwrap();
    assert!(metrics.contains("signalbus_event_append_seconds_bucket"), "{metrics}");
    assert!(dir.path().join("events.sqlite").exists());
}

#[test]
fn half_a_distributed_configuration_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    for flag in ["--nats-url", "--database-url"] {
        let out = Command::new(BIN)
            .args(["serve", "--listen", "127.0.0.1:0", flag, "x://unused"])
            .arg("--data-dir")
            .arg(dir.path())
            .output()
            .unwrap();
        assert!(!out.status.success());
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("needs"), "{err}");
    }
}

#[test]
fn an_unreachable_service_is_a_clear_failure() {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(BIN)
        .args(["serve", "--listen", "127.0.0.1:0", "--nats-url", "nats://127.0.0.1:1"])
        .args(["--database-url", "postgres://postgres@127.0.0.1:1/none"])
        .arg("--data-dir")
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("cannot reach NATS"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_signal_sent_through_one_gateway_is_pushed_by_another() {
    let nats = testkit::NatsServer::start().await;
    let db = testkit::TestDb::create().await;
    let dir = tempfile::tempdir().unwrap();
    let services = ["--nats-url", &nats.url(), "--database-url", db.url()];
    let mut projector = spawn("projector", &services, dir.path());
    let mut sweeper = spawn("sweeper", &services, dir.path());
    let mut gw_a = spawn("gateway", &services, dir.path());
    let mut gw_b = spawn("gateway", &services, dir.path());
    for p in [&mut projector, &mut sweeper, &mut gw_a, &mut gw_b] {
        wait_ready(p).await;
    }

    let alice = register(&gw_a.base, "alice").await;
    let bob = register(&gw_a.base, "bob").await;

    // Bob connects to gateway B, which learned his token from the stream.
    let ws_url = format!("{}/v1/ws?token={bob}&kind=daemon", gw_b.base.replace("http://", "ws://"));
    let deadline = Instant::now() + Duration::from_secs(10);
    let (mut ws, _) = loop {
        match tokio_tungstenite::connect_async(&ws_url).await {
            Ok(c) => break c,
            Err(e) if Instant::now() < deadline => {
                let _ = e;
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(e) => panic!("bob cannot connect to gateway b: {e}"),
        }
    };
    let welcome = next_json(&mut ws).await;
    assert_eq!(welcome["op"], "welcome", "{welcome}");

    // Gateway A must see bob as available before an async send is pushed_to_ws.
    let deadline = Instant::now() + Duration::from_secs(10);
    let sent = loop {
        let (status, body) =
            post(&gw_a.base, &alice, "/v1/signals", json!({"to": "bob", "type": "TaskAssigned", "payload": {"n": 1}}))
                .await;
        assert_eq!(status, 200, "{body}");
        if body["publish_path"] == "pushed_to_ws" || Instant::now() > deadline {
            break body;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert_eq!(sent["publish_path"], "pushed_to_ws", "{sent}");

    // Every signal sent so far reaches bob through gateway B, the last one included.
    let want = sent["signal_id"].as_str().unwrap().to_string();
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let frame = tokio::time::timeout(deadline.saturating_duration_since(Instant::now()), next_json(&mut ws))
            .await
            .expect("bob never received the signal");
        if frame["op"] == "signal" && frame["signal"]["id"] == want.as_str() {
            assert_eq!(frame["signal"]["from"], "alice");
            break;
        }
    }
    drop(sweeper);
}

async fn next_json<S>(ws: &mut S) -> Value
where
    S: futures::Stream<Item = Result<Message, tokio_tungstenite::tungstenite::Error>> + Unpin + SinkExt<Message>,
{
    loop {
        match ws.next().await.expect("socket closed").expect("socket error") {
            Message::Text(t) => return serde_json::from_str(t.as_str()).unwrap(),
            Message::Ping(p) => {
                let _ = ws.send(Message::Pong(p)).await;
            }
            _ => {}
        }
    }
}
