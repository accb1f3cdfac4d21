//! Bus processes for black-box tests: spawn a role of the `signalbus` binary on a free port,
//! wait until it answers, talk HTTP and WebSocket to it, and signal it (SIGTERM, SIGINT,
//! kill -9) — killed when dropped.
//!
//! Deliberately knows nothing about what a test checks.
#![allow(dead_code)]

use std::net::TcpListener;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use futures::{SinkExt, StreamExt};
use serde_json::Value;
use tokio_tungstenite::tungstenite::Message;

pub const BIN: &str = env!("CARGO_BIN_EXE_signalbus");
pub const ADMIN: &str = "sba_test_admin_token";

pub type Ws = tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// A bus process, killed when dropped.
pub struct Proc {
    pub child: Child,
    pub base: String,
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Proc {
    pub fn signal(&self, name: &str) {
        testkit::signal(self.child.id(), name);
    }

    /// Waits for the process to exit, up to `within`; `None` if it is still running.
    pub async fn exited_within(&mut self, within: Duration) -> Option<ExitStatus> {
        let deadline = Instant::now() + within;
        loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Some(status);
            }
            if Instant::now() > deadline {
                return None;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    pub fn ws_url(&self, token: &str) -> String {
        format!("{}/v1/ws?token={token}&kind=daemon", self.base.replace("http://", "ws://"))
    }
}

/// Starts `signalbus <role>` with `extra` flags on a free port.
pub fn spawn(role: &str, extra: &[&str], data_dir: &std::path::Path) -> Proc {
    spawn_on(role, extra, data_dir, free_port())
}

pub fn spawn_on(role: &str, extra: &[&str], data_dir: &std::path::Path, port: u16) -> Proc {
    let listen = format!("127.0.0.1:{port}");
    let child = Command::new(BIN)
        .arg(role)
        .args(["--listen", &listen, "--admin-token", ADMIN])
        .arg("--data-dir")
        .arg(data_dir)
        .args(extra)
        .env("RUST_LOG", "error")
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("spawn signalbus");
    Proc { child, base: format!("http://{listen}") }
}

/// The distributed roles on `services` (NATS and PostgreSQL flags), each ready: projector,
/// sweeper and two gateways, in that order.
pub async fn spawn_two_gateways(services: &[&str], data_dir: &std::path::Path) -> [Proc; 4] {
    let mut roles = ["projector", "sweeper", "gateway", "gateway"].map(|role| spawn(role, services, data_dir));
    for p in roles.iter_mut() {
        wait_ready(p).await;
    }
    roles
}

pub fn port_of(p: &Proc) -> u16 {
    p.base.rsplit(':').next().unwrap().parse().unwrap()
}

pub async fn wait_ready(p: &mut Proc) {
    let deadline = Instant::now() + Duration::from_secs(30);
    let client = http();
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

/// One HTTP client for every call. Building one loads the system's root certificates, tens of
/// milliseconds of CPU in a debug build: a client per call, at a send every 25 ms, starved the
/// test's runtime until requests missed the gateway's header deadline. Nothing is pooled, so
/// every call still opens a connection of its own, as a client per call did.
pub fn http() -> &'static reqwest::Client {
    static CLIENT: std::sync::OnceLock<reqwest::Client> = std::sync::OnceLock::new();
    CLIENT.get_or_init(|| reqwest::Client::builder().pool_max_idle_per_host(0).build().expect("an HTTP client"))
}

pub async fn post(base: &str, token: &str, path: &str, body: Value) -> (u16, Value) {
    let r = http().post(format!("{base}{path}")).bearer_auth(token).json(&body).send().await.unwrap();
    let status = r.status().as_u16();
    (status, r.json().await.unwrap_or(Value::Null))
}

pub async fn get(base: &str, token: &str, path: &str) -> (u16, Value) {
    let r = http().get(format!("{base}{path}")).bearer_auth(token).send().await.unwrap();
    let status = r.status().as_u16();
    (status, r.json().await.unwrap_or(Value::Null))
}

pub async fn register(base: &str, identity: &str) -> String {
    let body = serde_json::json!({"tenant": "default", "identity": identity});
    let (status, body) = post(base, ADMIN, "/v1/agents", body).await;
    assert_eq!(status, 200, "{body}");
    body["token"].as_str().unwrap().to_string()
}

/// The roster state of `identity` as `base` answers it.
pub async fn state_of(base: &str, token: &str, identity: &str) -> String {
    let (_, body) = get(base, token, "/v1/agents").await;
    body["agents"]
        .as_array()
        .and_then(|a| a.iter().find(|e| e["identity"] == identity))
        .and_then(|e| e["state"].as_str())
        .unwrap_or("missing")
        .to_string()
}

/// Connects a WebSocket (retrying while the gateway learns the token) and reads the welcome.
pub async fn connect(url: &str) -> (Ws, Value) {
    let deadline = Instant::now() + Duration::from_secs(10);
    let (mut ws, _) = loop {
        match tokio_tungstenite::connect_async(url).await {
            Ok(c) => break c,
            Err(_) if Instant::now() < deadline => tokio::time::sleep(Duration::from_millis(100)).await,
            Err(e) => panic!("cannot connect to {url}: {e}"),
        }
    };
    let welcome = next_json(&mut ws).await.expect("welcome");
    assert_eq!(welcome["op"], "welcome", "{welcome}");
    (ws, welcome)
}

/// What a WebSocket read yields: a JSON frame, or the close code.
pub async fn next_frame(ws: &mut Ws) -> Result<Value, Option<u16>> {
    loop {
        match ws.next().await {
            Some(Ok(Message::Text(t))) => return Ok(serde_json::from_str(t.as_str()).unwrap()),
            Some(Ok(Message::Ping(p))) => {
                let _ = ws.send(Message::Pong(p)).await;
            }
            Some(Ok(Message::Close(frame))) => return Err(frame.map(|f| u16::from(f.code))),
            Some(Ok(_)) => {}
            Some(Err(_)) | None => return Err(None),
        }
    }
}

pub async fn next_json(ws: &mut Ws) -> Option<Value> {
    next_frame(ws).await.ok()
}

/// Waits until `check` holds, polling every 100 ms up to `within`; returns how long it took.
pub async fn eventually<F, Fut>(within: Duration, mut check: F) -> Option<Duration>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let started = Instant::now();
    while started.elapsed() < within {
        if check().await {
            return Some(started.elapsed());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    None
}
