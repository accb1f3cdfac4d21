//! Connections a client opens and does nothing with: a request head must arrive within the
//! header timeout, a keep-alive connection must start a request within the idle timeout, and
//! past the connection cap a new connection is answered 503 — while WebSocket sessions keep
//! their own liveness rules and still count against the cap.

use std::time::Duration;

use gateway::ConnLimits;
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::support::{Bus, ADMIN, WAIT};

/// Deadlines short enough for a test; far shorter than the defaults (10 s and 60 s).
fn limits(max_connections: usize) -> ConnLimits {
    ConnLimits {
        max_connections,
        header_read_timeout: Duration::from_millis(300),
        idle_timeout: Duration::from_millis(500),
        tls: None,
    }
}

async fn dial(bus: &Bus) -> TcpStream {
    TcpStream::connect(bus.base.trim_start_matches("http://")).await.unwrap()
}

/// Reads until the server closes the connection (or `wait` passes: `None`); returns what came.
async fn read_to_close(tcp: &mut TcpStream, wait: Duration) -> Option<String> {
    let mut got = Vec::new();
    match tokio::time::timeout(wait, tcp.read_to_end(&mut got)).await {
        Ok(_) => Some(String::from_utf8_lossy(&got).into_owned()),
        Err(_) => None,
    }
}

const HEALTHZ: &[u8] = b"GET /healthz HTTP/1.1\r\nhost: bus\r\n\r\n";

#[tokio::test]
async fn silent_and_slow_connections_are_closed_at_the_header_timeout() {
    let bus = Bus::with(|c| c.connections = limits(64)).await;
    let mut silent = dial(&bus).await;
    let mut slow = dial(&bus).await;
    slow.write_all(b"GET /healthz HTTP/1.1\r\nhost: b").await.unwrap();
    assert_eq!(read_to_close(&mut silent, WAIT).await.as_deref(), Some(""), "silent: closed, nothing said");
    assert_eq!(read_to_close(&mut slow, WAIT).await.as_deref(), Some(""), "an unfinished head: closed");
    // A client that sends its request in time is served as before.
    let mut ok = dial(&bus).await;
    ok.write_all(b"GET /healthz HTTP/1.1\r\nhost: bus\r\nconnection: close\r\n\r\n").await.unwrap();
    let answer = read_to_close(&mut ok, WAIT).await.unwrap();
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
}

#[tokio::test]
async fn an_idle_keep_alive_connection_is_closed_at_the_idle_timeout() {
    let bus = Bus::with(|c| c.connections = limits(64)).await;
    let mut tcp = dial(&bus).await;
    for _ in 0..2 {
        tcp.write_all(HEALTHZ).await.unwrap();
        let mut buf = [0u8; 1024];
        let n = tcp.read(&mut buf).await.unwrap();
        assert!(String::from_utf8_lossy(&buf[..n]).starts_with("HTTP/1.1 200"));
        // Busy is not idle: a request well inside the idle timeout keeps the connection.
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(read_to_close(&mut tcp, WAIT).await.as_deref(), Some(""), "closed once idle");
}

#[tokio::test]
async fn past_the_cap_a_connection_is_answered_503_and_sessions_count() {
    let bus = Bus::with(|c| c.connections = limits(3)).await;
    // Registered over a keep-alive connection of the test's own, left idle: the sessions below
    // fill the cap only once the server has closed it at the idle timeout. (The test runs on
    // one thread, so a place is free again once its socket is seen closed.)
    let mut registration = dial(&bus).await;
    let body = json!({"tenant": "default", "identity": "alice"}).to_string();
    let head = format!(
        "POST /v1/agents HTTP/1.1\r\nhost: bus\r\nauthorization: Bearer {ADMIN}\r\n\
         content-type: application/json\r\ncontent-length: {}\r\n\r\n",
        body.len()
    );
    registration.write_all(format!("{head}{body}").as_bytes()).await.unwrap();
    let answer = read_to_close(&mut registration, WAIT).await.expect("the registration's connection idles out");
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    let registered: Value =
        serde_json::from_str(&answer[answer.find('{').unwrap()..=answer.rfind('}').unwrap()]).unwrap();
    let alice = registered["token"].as_str().unwrap().to_string();
    // Two WebSocket sessions and one silent socket fill the cap of three.
    let mut ws = bus.connect(&alice).await;
    let _ws2 = bus.connect(&alice).await;
    let mut silent = dial(&bus).await;
    let mut extra = dial(&bus).await;
    let answer = read_to_close(&mut extra, WAIT).await.unwrap();
    assert!(answer.starts_with("HTTP/1.1 503"), "{answer}");
    assert!(answer.contains(r#""code":"unavailable""#), "{answer}");

    // Sessions outlive the HTTP deadlines: they have their own heartbeat rules. The silent
    // socket, dialled after them, is closed at the header timeout (silently: it had been let
    // in, not refused); a keep-alive connection in its freed place then idles out. Both
    // deadlines have passed for the sessions too.
    assert_eq!(read_to_close(&mut silent, WAIT).await.as_deref(), Some(""), "silent: closed, nothing said");
    let mut idle = dial(&bus).await;
    idle.write_all(HEALTHZ).await.unwrap();
    let mut buf = [0u8; 1024];
    let n = idle.read(&mut buf).await.unwrap();
    assert!(String::from_utf8_lossy(&buf[..n]).starts_with("HTTP/1.1 200"), "{}", String::from_utf8_lossy(&buf[..n]));
    assert_eq!(read_to_close(&mut idle, WAIT).await.as_deref(), Some(""), "closed once idle");
    let r = ws.request(json!({"op": "recall", "signal_id": "nope"})).await;
    assert_eq!(r["ok"], true, "{r}");
    // The idle connection freed its place; a real client gets in again.
    let mut ok = dial(&bus).await;
    ok.write_all(b"GET /healthz HTTP/1.1\r\nhost: bus\r\nconnection: close\r\n\r\n").await.unwrap();
    let answer = read_to_close(&mut ok, WAIT).await.unwrap();
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
}
