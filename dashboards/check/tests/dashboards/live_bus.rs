//! A real bus in the test process, wired like `signalbus serve` with `--nats-url` and
//! `--database-url` (src/serve.rs): a private JetStream server and a fresh PostgreSQL database,
//! the projector, the sweeper on the advisory-lock lease, and the gateway's router merged with a
//! `/metrics` route rendering a Prometheus recorder with the binary's histogram buckets
//! (src/telemetry.rs). Plus the clients a workload needs: HTTP calls (in a piggyback session or not) and WebSocket
//! sessions that either keep reading (so they answer pings and stay live) or never read (so they go stale).
//!
//! Deliberately starts no binary (a non-root crate has no CARGO_BIN_EXE_signalbus) and holds no
//! assertions about dashboards: `live_workload` drives the bus and checks the panels.

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use axum::routing::get;
use axum::Router;
use bus::log::jetstream::{JetStreamConfig, JetStreamLog};
use bus::log::SharedLog;
use futures::stream::{SplitSink, StreamExt};
use futures::SinkExt;
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};
use projector::queries::Queries;
use serde_json::{json, Value};
use tokio::net::TcpStream;
use tokio::sync::mpsc;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};
use tokio_util::sync::CancellationToken;

pub const ADMIN: &str = "admin-token-for-the-dashboard-test";
pub const WAIT: Duration = Duration::from_secs(10);

/// The binary's buckets (src/telemetry.rs, which is not a library this crate can link): the
/// scrape must expose the same `_bucket` series Prometheus would see from `signalbus serve`.
const BUCKETS: &[f64] =
    &[0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0, 3600.0];

/// The process-wide recorder, installed once per test binary. Global rather than a thread-local
/// guard because the roles record from tokio worker threads, as in the binary.
fn metrics_handle() -> PrometheusHandle {
    static HANDLE: OnceLock<PrometheusHandle> = OnceLock::new();
    HANDLE
        .get_or_init(|| {
            let recorder = PrometheusBuilder::new()
                .set_buckets_for_metric(Matcher::Suffix("_seconds".into()), BUCKETS)
                .expect("histogram buckets")
                .build_recorder();
            let handle = recorder.handle();
            metrics::set_global_recorder(recorder).expect("no other recorder in this test binary");
            handle
        })
        .clone()
}

pub struct LiveBus {
    pub base: String,
    pub ws_url: String,
    pub log: SharedLog,
    pub queries: Arc<dyn Queries>,
    pub http: reqwest::Client,
    stop: CancellationToken,
    tasks: Vec<tokio::task::JoinHandle<()>>,
    pub db: testkit::TestDb,
    _nats: testkit::NatsServer,
}

impl LiveBus {
    /// Starts every role; `stale_after` is the bus's `--stale-after` (short, so a silent
    /// session goes stale within the test), `sweep_interval` its `--sweep-interval`.
    pub async fn start(stale_after: Duration, sweep_interval: Duration) -> LiveBus {
        let metrics = metrics_handle();
        let (nats, db) = tokio::join!(testkit::NatsServer::start(), testkit::TestDb::create());
        let log: SharedLog =
            Arc::new(JetStreamLog::connect(&nats.url(), JetStreamConfig::default()).await.expect("connect JetStream"));
        let models = projector::ReadModels::postgres(db.url()).await.expect("open the PostgreSQL read models");
        let queries: Arc<dyn Queries> = Arc::new(models.clone());
        let stop = CancellationToken::new();
        let mut tasks = Vec::new();

        let pconf = projector::ProjectorConfig { stale_after, ..Default::default() };
        let projector = projector::Projector::new(log.clone(), models.clone(), pconf);
        let c = stop.clone();
        tasks.push(tokio::spawn(async move { projector.run(c).await.expect("projector") }));

        let sconf = sweeper::SweeperConfig {
            sweep_interval,
            lease: sweeper::Lease::Postgres { database_url: db.url().to_string() },
            node: "dashboards-check".into(),
            ..Default::default()
        };
        let sweeper = sweeper::Sweeper::new(log.clone(), queries.clone(), models.clone(), sconf);
        let c = stop.clone();
        tasks.push(tokio::spawn(async move { sweeper.run(c).await.expect("sweeper") }));

        let gconf = gateway::GatewayConfig {
            node: "dashboards-check".into(),
            admin_token: ADMIN.into(),
            stale_after,
            // A session that never reads would hold the shutdown for the default 10 s.
            shutdown_grace: Duration::from_secs(1),
            ..Default::default()
        };
        let gw = gateway::Gateway::start(log.clone(), queries.clone(), gconf).await.expect("gateway start");
        let router = gateway::app(gw.clone())
            .merge(Router::new().route("/metrics", get(move || std::future::ready(metrics.render()))));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("local addr");
        let c = stop.clone();
        tasks.push(tokio::spawn(async move {
            gateway::serve_router(listener, router, gw, async move { c.cancelled().await }).await.expect("serve");
        }));

        LiveBus {
            base: format!("http://{addr}"),
            ws_url: format!("ws://{addr}/v1/ws"),
            log,
            queries,
            http: reqwest::Client::new(),
            stop,
            tasks,
            db,
            _nats: nats,
        }
    }

    /// Stops every role and waits for them, so the database can be dropped cleanly.
    pub async fn shutdown(mut self) {
        self.stop.cancel();
        for t in self.tasks.drain(..) {
            tokio::time::timeout(Duration::from_secs(15), t).await.expect("a role did not stop").expect("role task");
        }
    }

    pub async fn call(&self, method: &str, token: &str, path: &str, body: Option<Value>) -> (u16, Value) {
        self.call_in(None, method, token, path, body).await
    }

    /// A call, inside the piggyback session `session` when given (`X-Signalbus-Session`).
    pub async fn call_in(
        &self,
        session: Option<&str>,
        method: &str,
        token: &str,
        path: &str,
        body: Option<Value>,
    ) -> (u16, Value) {
        let url = format!("{}{}", self.base, path);
        let mut req = match method {
            "GET" => self.http.get(url),
            "POST" => self.http.post(url),
            "PUT" => self.http.put(url),
            "DELETE" => self.http.delete(url),
            m => panic!("method {m}"),
        };
        req = req.bearer_auth(token);
        if let Some(s) = session {
            req = req.header("X-Signalbus-Session", s);
        }
        if let Some(b) = body {
            req = req.json(&b);
        }
        let resp = req.send().await.expect("HTTP request");
        let status = resp.status().as_u16();
        let text = resp.text().await.expect("HTTP body");
        (status, serde_json::from_str(&text).unwrap_or(Value::String(text)))
    }

    /// Registers `identity` in tenant `default` as `kind`; returns its token.
    pub async fn register(&self, identity: &str, kind: &str) -> String {
        let body = json!({"tenant": "default", "identity": identity, "kind": kind});
        let (s, v) = self.call("POST", ADMIN, "/v1/agents", Some(body)).await;
        assert_eq!(s, 200, "register {identity}: {v}");
        v["token"].as_str().expect("token").to_string()
    }

    pub async fn send(&self, token: &str, body: Value) -> (u16, Value) {
        self.call("POST", token, "/v1/signals", Some(body)).await
    }

    pub async fn recall(&self, token: &str, id: &str) -> (u16, Value) {
        self.call("POST", token, &format!("/v1/signals/{id}/recall"), None).await
    }

    /// Polls the signal's row (`GET /v1/signals/{id}`, from the read models) until `column` is set.
    pub async fn wait_for_row(&self, token: &str, id: &str, column: &str) {
        let deadline = tokio::time::Instant::now() + WAIT;
        loop {
            let (_, row) = self.call("GET", token, &format!("/v1/signals/{id}"), None).await;
            if row[column].is_string() {
                return;
            }
            assert!(tokio::time::Instant::now() < deadline, "signal {id} never got {column}: {row}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Polls the roster (`GET /v1/agents`, a read that is no heartbeat) until `identity`'s
    /// recipient state is `state`.
    pub async fn wait_for_state(&self, token: &str, identity: &str, state: &str) {
        let deadline = tokio::time::Instant::now() + WAIT;
        loop {
            let (_, roster) = self.call("GET", token, "/v1/agents", None).await;
            let agents = roster["agents"].as_array().cloned().unwrap_or_default();
            if agents.iter().any(|a| a["identity"] == identity && a["state"] == state) {
                return;
            }
            assert!(tokio::time::Instant::now() < deadline, "{identity} never turned {state}: {roster}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// `GET /metrics`, as Prometheus would scrape it.
    pub async fn scrape(&self) -> String {
        let resp = self.http.get(format!("{}/metrics", self.base)).send().await.expect("scrape /metrics");
        assert_eq!(resp.status().as_u16(), 200);
        resp.text().await.expect("scrape body")
    }

    /// Waits until the read models show every event on the stream so far.
    pub async fn settle(&self) {
        let last = self.log.last_seq().await.expect("last seq");
        self.queries.wait_for(last, WAIT).await.expect("the projector catches up");
    }

    /// A session that keeps reading in the background, so it answers pings and stays live.
    pub async fn connect(&self, token: &str, kind: &str) -> Session {
        let (ws, _) = tokio_tungstenite::connect_async(format!("{}?token={token}&kind={kind}", self.ws_url))
            .await
            .expect("WebSocket connect");
        let (sink, mut stream) = ws.split();
        let (tx, rx) = mpsc::unbounded_channel();
        tokio::spawn(async move {
            while let Some(Ok(msg)) = stream.next().await {
                if let Message::Text(t) = msg {
                    let _ = tx.send(serde_json::from_str::<Value>(t.as_str()).expect("JSON frame"));
                }
            }
        });
        let mut s = Session { sink, frames: rx, aside: Vec::new(), next_ref: 0 };
        let welcome = s.next(|v| v["op"] == "welcome").await;
        assert!(welcome["session_id"].is_string(), "{welcome}");
        s
    }

    /// A session that never reads after its welcome: it answers no ping, so the bus sees it go
    /// stale after `stale_after` and closes it (reason `timeout`) after twice that.
    pub async fn connect_silent(&self, token: &str, kind: &str) -> WebSocketStream<MaybeTlsStream<TcpStream>> {
        let (mut ws, _) = tokio_tungstenite::connect_async(format!("{}?token={token}&kind={kind}", self.ws_url))
            .await
            .expect("WebSocket connect");
        let welcome = tokio::time::timeout(WAIT, ws.next()).await.expect("welcome in time");
        assert!(matches!(welcome, Some(Ok(Message::Text(_)))), "{welcome:?}");
        ws
    }
}

impl Drop for LiveBus {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

/// A live WebSocket session: frames arrive through the background reader.
pub struct Session {
    sink: SplitSink<WebSocketStream<MaybeTlsStream<TcpStream>>, Message>,
    frames: mpsc::UnboundedReceiver<Value>,
    aside: Vec<Value>,
    next_ref: u64,
}

impl Session {
    /// The first frame (kept aside ones first) that `want` accepts; others are kept aside.
    async fn next(&mut self, want: impl Fn(&Value) -> bool) -> Value {
        if let Some(i) = self.aside.iter().position(&want) {
            return self.aside.remove(i);
        }
        loop {
            let v = tokio::time::timeout(WAIT, self.frames.recv())
                .await
                .expect("a frame in time")
                .expect("the session is open");
            if want(&v) {
                return v;
            }
            self.aside.push(v);
        }
    }

    /// Sends `frame` with a fresh `ref` and returns its result.
    pub async fn request(&mut self, mut frame: Value) -> Value {
        self.next_ref += 1;
        let r = json!(format!("r{}", self.next_ref));
        frame["ref"] = r.clone();
        self.sink.send(Message::text(frame.to_string())).await.expect("send frame");
        self.next(|v| v["op"] == "result" && v["ref"] == r).await
    }

    /// The next pushed signal (its `signal` object).
    pub async fn signal(&mut self) -> Value {
        self.next(|v| v["op"] == "signal").await["signal"].clone()
    }

    /// The next pushed signal of type `signal_type` (its `signal` object); others are kept aside.
    pub async fn signal_of(&mut self, signal_type: &str) -> Value {
        self.next(|v| v["op"] == "signal" && v["signal"]["type"] == signal_type).await["signal"].clone()
    }

    pub async fn ack(&mut self, ids: &[&Value]) {
        let r = self.request(json!({"op": "ack", "signal_ids": ids})).await;
        assert_eq!(r["ok"], true, "{r}");
    }

    /// Closes from the client side (reason `client_closed`) and waits for the server's close.
    pub async fn close(mut self) {
        let _ = self.sink.send(Message::Close(None)).await;
        let _ = tokio::time::timeout(WAIT, async { while self.frames.recv().await.is_some() {} }).await;
    }
}
