//! Test harness: a real gateway on 127.0.0.1:0 over the embedded stream and SQLite read
//! models with a running projector, an HTTP helper, and a WebSocket client.
//!
//! Deliberately mocks nothing: every test talks to the same code the binary runs.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use bus::event::{Entity, EventBody};
use bus::log::embedded::EmbeddedLog;
use bus::log::SharedLog;
use futures::{SinkExt, StreamExt};
use gateway::{Gateway, GatewayConfig};
use projector::{Projector, ProjectorConfig, ReadModels};
use serde_json::{json, Value};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};
use tokio_util::sync::CancellationToken;

pub const ADMIN: &str = "admin-secret-for-tests";
pub const WAIT: Duration = Duration::from_secs(5);

/// The test configuration of a node.
pub fn config(node: &str) -> GatewayConfig {
    GatewayConfig {
        node: node.into(),
        admin_token: ADMIN.into(),
        push_grace: Duration::from_millis(50),
        ..Default::default()
    }
}

/// Runs a projector until `stop` is cancelled.
pub fn spawn_projector(log: &SharedLog, models: &ReadModels, stale_after: Duration, stop: &CancellationToken) {
    let pconf = ProjectorConfig { stale_after, max_wait: Duration::from_millis(5), ..Default::default() };
    tokio::spawn(Projector::new(log.clone(), models.clone(), pconf).run(stop.clone()));
}

pub struct Bus {
    pub base: String,
    pub ws_url: String,
    pub gw: Gateway,
    pub log: SharedLog,
    pub http: reqwest::Client,
    stop: CancellationToken,
    server: Option<tokio::task::JoinHandle<std::io::Result<()>>>,
    _dir: Option<tempfile::TempDir>,
}

impl Bus {
    pub async fn start() -> Bus {
        Self::with(|_| {}).await
    }

    pub async fn with(tweak: impl FnOnce(&mut GatewayConfig)) -> Bus {
        let dir = tempfile::tempdir().unwrap();
        let log: SharedLog = Arc::new(EmbeddedLog::open(dir.path()).await.unwrap());
        let mut config = config("node-a");
        tweak(&mut config);
        let models = ReadModels::sqlite(dir.path()).await.unwrap();
        let stop = CancellationToken::new();
        spawn_projector(&log, &models, config.stale_after, &stop);
        Bus::node(log, models, config, stop, Some(dir)).await
    }

    /// A gateway node over an existing stream and read models (the projector runs elsewhere).
    pub async fn node(
        log: SharedLog,
        models: ReadModels,
        config: GatewayConfig,
        stop: CancellationToken,
        dir: Option<tempfile::TempDir>,
    ) -> Bus {
        let gw = Gateway::start(log.clone(), Arc::new(models), config).await.unwrap();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let s = stop.clone();
        let server = tokio::spawn(gateway::run(listener, gw.clone(), async move { s.cancelled().await }));
        Bus {
            base: format!("http://{addr}"),
            ws_url: format!("ws://{addr}/v1/ws"),
            gw,
            log,
            http: reqwest::Client::new(),
            stop,
            server: Some(server),
            _dir: dir,
        }
    }

    /// Stops the server and waits for `run` to return.
    pub async fn shutdown(&mut self) {
        self.stop.cancel();
        if let Some(s) = self.server.take() {
            tokio::time::timeout(Duration::from_secs(15), s).await.unwrap().unwrap().unwrap();
        }
    }

    pub async fn call(&self, method: &str, token: Option<&str>, path: &str, body: Option<Value>) -> (u16, Value) {
        let url = format!("{}{}", self.base, path);
        let mut req = match method {
            "GET" => self.http.get(url),
            "POST" => self.http.post(url),
            "DELETE" => self.http.delete(url),
            "PUT" => self.http.put(url),
            m => panic!("method {m}"),
        };
        if let Some(t) = token {
            req = req.bearer_auth(t);
        }
        if let Some(b) = body {
            req = req.json(&b);
        }
        let resp = req.send().await.unwrap();
        let status = resp.status().as_u16();
        let text = resp.text().await.unwrap();
        (status, serde_json::from_str(&text).unwrap_or(Value::String(text)))
    }

    pub async fn register_in(&self, tenant: &str, identity: &str) -> String {
        let (s, v) =
            self.call("POST", Some(ADMIN), "/v1/agents", Some(json!({"tenant": tenant, "identity": identity}))).await;
        assert_eq!(s, 200, "{v}");
        v["token"].as_str().unwrap().to_string()
    }

    pub async fn register(&self, identity: &str) -> String {
        self.register_in("default", identity).await
    }

    pub async fn send(&self, token: &str, body: Value) -> (u16, Value) {
        self.call("POST", Some(token), "/v1/signals", Some(body)).await
    }

    pub async fn recall(&self, token: &str, id: &str) -> (u16, Value) {
        self.call("POST", Some(token), &format!("/v1/signals/{id}/recall"), None).await
    }

    pub async fn connect(&self, token: &str) -> Client {
        Client::connect(&format!("{}?token={token}", self.ws_url)).await
    }

    /// `identity`'s recipient state in the default tenant's roster, asked as the admin: a read
    /// that is no heartbeat of anyone's session, so polling it cannot keep a session alive.
    pub async fn state_of(&self, identity: &str) -> String {
        let (s, v) = self.call("GET", Some(ADMIN), "/v1/agents", None).await;
        assert_eq!(s, 200, "{v}");
        let agent = v["agents"].as_array().unwrap().iter().find(|a| a["identity"] == identity);
        agent.unwrap_or_else(|| panic!("{identity} is not in the roster: {v}"))["state"].as_str().unwrap().to_string()
    }

    /// Waits (polling, bounded by `WAIT`) until `identity`'s recipient state is `state`.
    pub async fn until_state(&self, identity: &str, state: &str) {
        let reached = eventually(WAIT, || async { self.state_of(identity).await == state }).await;
        assert!(reached, "{identity} never turned {state} within {WAIT:?}; now {}", self.state_of(identity).await);
    }
}

impl Drop for Bus {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

pub struct Client {
    ws: WebSocketStream<MaybeTlsStream<TcpStream>>,
    pub welcome: Value,
    pending: VecDeque<Value>,
    next_ref: u64,
    pub closed: Option<u16>,
}

impl Client {
    pub async fn connect(url: &str) -> Client {
        let (ws, _) = tokio_tungstenite::connect_async(url).await.unwrap();
        let mut c = Client { ws, welcome: Value::Null, pending: VecDeque::new(), next_ref: 0, closed: None };
        let welcome = c.read(WAIT).await.expect("welcome frame");
        assert_eq!(welcome["op"], "welcome", "{welcome}");
        c.welcome = welcome;
        c
    }

    pub fn session_id(&self) -> String {
        self.welcome["session_id"].as_str().unwrap().to_string()
    }

    /// The next JSON frame from the socket (pings are answered by tungstenite). `None` on
    /// timeout or close; a close records its code in `closed`.
    async fn read(&mut self, wait: Duration) -> Option<Value> {
        let deadline = tokio::time::Instant::now() + wait;
        loop {
            let msg = tokio::time::timeout_at(deadline, self.ws.next()).await.ok()?;
            match msg {
                Some(Ok(Message::Text(t))) => return Some(serde_json::from_str(t.as_str()).unwrap()),
                Some(Ok(Message::Close(frame))) => {
                    self.closed = Some(frame.map_or(1005, |f| u16::from(f.code)));
                    return None;
                }
                Some(Ok(_)) => continue,
                Some(Err(_)) | None => {
                    self.closed.get_or_insert(1006);
                    return None;
                }
            }
        }
    }

    pub async fn send_text(&mut self, text: impl Into<String>) {
        self.ws.send(Message::text(text.into())).await.unwrap();
    }

    /// Sends any message, raw frames included (e.g. a text frame that is not UTF-8).
    pub async fn send_raw(&mut self, msg: Message) {
        self.ws.send(msg).await.unwrap();
    }

    /// Sends `frame` with a fresh `ref` and returns its result frame, keeping pushes aside.
    pub async fn request(&mut self, mut frame: Value) -> Value {
        self.next_ref += 1;
        let r = format!("r{}", self.next_ref);
        frame["ref"] = json!(r);
        self.send_text(frame.to_string()).await;
        loop {
            let v = self.read(WAIT).await.unwrap_or_else(|| panic!("no result for {r} (closed: {:?})", self.closed));
            if v["op"] == "result" && v["ref"] == json!(r) {
                return v;
            }
            self.pending.push_back(v);
        }
    }

    /// The next frame of any kind (pushes kept aside by `request` first).
    pub async fn next_frame(&mut self, wait: Duration) -> Option<Value> {
        match self.pending.pop_front() {
            Some(v) => Some(v),
            None => self.read(wait).await,
        }
    }

    /// The next pushed signal (its `signal` object), or `None` within `wait`.
    pub async fn next_signal(&mut self, wait: Duration) -> Option<Value> {
        let deadline = tokio::time::Instant::now() + wait;
        loop {
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            let v = self.next_frame(left).await?;
            if v["op"] == "signal" {
                return Some(v["signal"].clone());
            }
        }
    }

    /// Waits for the server to close the socket; returns the close code.
    pub async fn closed_code(&mut self, wait: Duration) -> Option<u16> {
        let deadline = tokio::time::Instant::now() + wait;
        while self.closed.is_none() && tokio::time::Instant::now() < deadline {
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            if self.read(left).await.is_none() && self.closed.is_none() {
                break;
            }
        }
        self.closed
    }

    pub async fn ack(&mut self, ids: &[String]) -> Value {
        self.request(json!({"op": "ack", "signal_ids": ids})).await
    }

    pub async fn close(mut self) {
        let _ = self.ws.close(None).await;
        // Wait for the server's side of the handshake so its session.closed is recorded.
        let _ = tokio::time::timeout(WAIT, async { while self.ws.next().await.is_some() {} }).await;
    }
}

/// How many deliveries the stream records for `signal_id` (tenant `default`): `signal.delivered`
/// events and a `signal.sent` that recorded its push.
/// Exactly-once is decided on the stream, so this is where a test checks it: a duplicate frame
/// may arrive any time up to the push grace and beyond, but a duplicate delivery is recorded.
/// Ask once the signal is acked (its session closed): nothing can be delivered after that.
pub async fn deliveries(log: &SharedLog, signal_id: &str) -> usize {
    let id = uuid::Uuid::parse_str(signal_id).unwrap();
    let subject = log.subjects().of("default", Entity::Signal(id));
    let events = log.read_subject(&subject).await.unwrap();
    let recorded = |body: &EventBody| match body {
        EventBody::SignalDelivered(_) => true,
        // A send that recorded its push is a delivery too.
        EventBody::SignalSent(sent) => sent.pushed_to.is_some(),
        _ => false,
    };
    let on_subject = events.iter().filter(|s| recorded(&s.event.body)).count();
    // A send gathered in a `sends.recorded` lives in its send window's subject.
    let window = log.subjects().of("default", Entity::Sends(bus::event::send_window(id).unwrap_or_default()));
    let gathered = log.read_subject(&window).await.unwrap();
    let pushed = gathered
        .iter()
        .flat_map(|s| s.event.body.sent_signals())
        .filter(|sent| sent.signal_id == id && sent.pushed_to.is_some())
        .count();
    on_subject + pushed
}

/// Polls `f` until it returns true or `wait` passes.
pub async fn eventually<F, Fut>(wait: Duration, mut f: F) -> bool
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + wait;
    while tokio::time::Instant::now() < deadline {
        if f().await {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    false
}
