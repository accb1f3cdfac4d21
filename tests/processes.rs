//! The `signalbus` binary as operators run it: embedded `serve`, refused half-configurations,
//! and several single-role processes (`gateway` ×2, `projector`, `sweeper`) sharing one NATS and
//! one PostgreSQL, where a signal sent through one gateway is pushed by the other; `/metrics` on
//! its own listener, and the embedded data files kept private (0700 dir, 0600 files).
//!
//! Deliberately black-box: only the command line, HTTP and WebSocket, as a user sees them.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use futures::{SinkExt, StreamExt};
use serde_json::{json, Value};
use tokio_tungstenite::tungstenite::protocol::frame::{coding, Frame};
use tokio_tungstenite::tungstenite::Message;

mod roles;

use roles::*;

/// Every process here runs with a 2 s stale threshold, so presence changes show quickly.
fn spawn(role: &str, extra: &[&str], data_dir: &std::path::Path) -> Proc {
    let mut args = vec!["--stale-after", "2s"];
    args.extend_from_slice(extra);
    roles::spawn(role, &args, data_dir)
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
    let [_projector, sweeper, gw_a, gw_b] = spawn_two_gateways(&services, dir.path()).await;

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

#[tokio::test]
async fn metrics_on_their_own_listener_and_data_files_kept_private() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("fresh/data");
    let metrics = format!("127.0.0.1:{}", free_port());
    let port = free_port();
    // No --admin-token: the generated one must land in a private file too.
    let child = Command::new(BIN)
        .args(["serve", "--listen", &format!("127.0.0.1:{port}"), "--data-dir"])
        .arg(&data)
        .env("SIGNALBUS_METRICS_LISTEN", &metrics)
        .env("RUST_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let mut p = Proc { child, base: format!("http://127.0.0.1:{port}") };
    wait_ready(&mut p).await;

    // The API listener no longer publishes metrics (their labels name identities).
    let r = reqwest::get(format!("{}/metrics", p.base)).await.unwrap();
    assert_eq!(r.status().as_u16(), 404);
    assert_eq!(r.json::<Value>().await.unwrap()["error"]["code"], "not_found");

    // A text frame that is not UTF-8 is closed with 1007 and counted as a protocol error.
    let admin = std::fs::read_to_string(data.join("admin_token")).unwrap();
    let (status, body) = post(&p.base, admin.trim(), "/v1/agents", json!({"identity": "alice"})).await;
    assert_eq!(status, 200, "{body}");
    let url = format!("{}/v1/ws?token={}", p.base.replace("http://", "ws://"), body["token"].as_str().unwrap());
    let (mut ws, _) = tokio_tungstenite::connect_async(&url).await.unwrap();
    assert_eq!(next_json(&mut ws).await["op"], "welcome");
    let frame = Frame::message(vec![0xc3, 0x28], coding::OpCode::Data(coding::Data::Text), true);
    ws.send(Message::Frame(frame)).await.unwrap();
    let code = loop {
        match tokio::time::timeout(Duration::from_secs(5), ws.next()).await.expect("no close frame") {
            Some(Ok(Message::Close(Some(f)))) => break u16::from(f.code),
            Some(Ok(_)) => continue,
            other => panic!("no close frame: {other:?}"),
        }
    };
    assert_eq!(code, 1007);
    let scrape = format!("http://{metrics}/metrics");
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let text = reqwest::get(&scrape).await.unwrap().text().await.unwrap();
        assert!(text.contains("signalbus_event_append_seconds_bucket"), "{text}");
        if text.contains(r#"signalbus_disconnects_total{reason="protocol_error"} 1"#) {
            break;
        }
        assert!(Instant::now() < deadline, "no protocol_error disconnect in:\n{text}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&data), 0o700, "data dir");
        let files: Vec<_> = std::fs::read_dir(&data).unwrap().map(|e| e.unwrap().path()).collect();
        for name in ["admin_token", "events.sqlite", "events.sqlite-wal", "readmodels.sqlite", "readmodels.sqlite-wal"]
        {
            assert!(files.contains(&data.join(name)), "{name} missing from {files:?}");
        }
        for f in &files {
            assert_eq!(mode(f), 0o600, "{}", f.display());
        }
    }
}
