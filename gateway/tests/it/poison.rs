//! Issue 18's critical finding, as the attacker ran it, in both modes (embedded SQLite, and
//! JetStream + PostgreSQL): a NUL character in any text of a send or a fact is refused with
//! `invalid_request` naming the field, over HTTP and WebSocket, and nothing is stored; and poison
//! written straight to the stream (NUL strings from before the guard, bytes no codec reads)
//! stops nothing — other tenants' signals land, pushes go on, the poison is dead-lettered, a
//! rebuild agrees, and `/readyz` answers 503 until an operator acknowledges the dead letter.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use bus::catalog::{Category, DeliveryClass};
use bus::event::{Entity, Event, EventBody, PublishPath, RecipientState, SignalSent};
use bus::log::embedded::EmbeddedLog;
use bus::log::jetstream::{JetStreamConfig, JetStreamLog};
use bus::log::{Expect, SharedLog};
use chrono::Utc;
use projector::ReadModels;
use serde_json::{json, Value};
use sqlx::Connection;
use testkit::{NatsServer, TestDb};
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use crate::support::{config, spawn_projector, Bus, WAIT};

/// A bus in one mode, with what a test needs to reach behind the gateway.
struct Env {
    bus: Bus,
    models: ReadModels,
    /// The embedded data dir (stream and read models), or the servers of distributed mode.
    dir: Option<PathBuf>,
    nats: Option<NatsServer>,
    db: Option<TestDb>,
}

impl Env {
    async fn embedded() -> Env {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().to_path_buf();
        let log: SharedLog = Arc::new(EmbeddedLog::open(&path).await.unwrap());
        let models = ReadModels::sqlite(&path).await.unwrap();
        let stop = CancellationToken::new();
        spawn_projector(&log, &models, Duration::from_secs(60), &stop);
        let bus = Bus::node(log, models.clone(), config("node-a"), stop, Some(dir)).await;
        Env { bus, models, dir: Some(path), nats: None, db: None }
    }

    async fn distributed() -> Env {
        let nats = NatsServer::start().await;
        let db = TestDb::create().await;
        let log: SharedLog = Arc::new(JetStreamLog::connect(&nats.url(), JetStreamConfig::default()).await.unwrap());
        let models = ReadModels::postgres(db.url()).await.unwrap();
        let stop = CancellationToken::new();
        spawn_projector(&log, &models, Duration::from_secs(60), &stop);
        let bus = Bus::node(log, models.clone(), config("node-a"), stop, None).await;
        Env { bus, models, dir: None, nats: Some(nats), db: Some(db) }
    }

    async fn both() -> [Env; 2] {
        [Env::embedded().await, Env::distributed().await]
    }

    fn mode(&self) -> &'static str {
        if self.dir.is_some() {
            "embedded"
        } else {
            "distributed"
        }
    }

    /// Stores `body` under `subject` as the next event, past the log and its codec.
    async fn append_raw(&self, subject: &str, body: &[u8]) -> u64 {
        if let Some(nats) = &self.nats {
            let js = async_nats::jetstream::new(async_nats::connect(nats.url()).await.unwrap());
            return js.publish(subject.to_string(), body.to_vec().into()).await.unwrap().await.unwrap().sequence;
        }
        let file = self.dir.as_ref().unwrap().join(bus::log::embedded::FILE_NAME);
        testkit::embedded::append_raw(&file, subject, body).await
    }

    /// Runs one statement on the read-model database, as an operator would.
    async fn execute(&self, sql: &str) {
        if let Some(db) = &self.db {
            let mut conn = sqlx::PgConnection::connect(db.url()).await.unwrap();
            sqlx::query(sql).execute(&mut conn).await.unwrap();
            return;
        }
        let file = self.dir.as_ref().unwrap().join("readmodels.sqlite");
        let mut conn = sqlx::SqliteConnection::connect(&format!("sqlite://{}", file.display())).await.unwrap();
        sqlx::query(sql).execute(&mut conn).await.unwrap();
    }

    async fn settled(&self) {
        let last = self.bus.log.last_seq().await.unwrap();
        projector::queries::Queries::wait_for(&self.models, last, WAIT).await.expect("projection keeps up");
    }
}

fn assert_refused(mode: &str, field: &str, status: Option<u16>, error: &Value) {
    let what = format!("{mode}: {field}: {error}");
    if let Some(status) = status {
        assert_eq!(status, 400, "{what}");
    }
    assert_eq!(error["code"], "invalid_request", "{what}");
    let message = error["message"].as_str().unwrap();
    assert!(message.starts_with(&format!("{field} contains a NUL character (U+0000)")), "{what}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_nul_anywhere_is_refused_naming_the_field_and_nothing_is_stored() {
    for env in Env::both().await {
        let (bus, mode) = (&env.bus, env.mode());
        let alice = bus.register("alice").await;
        bus.register("bob").await;
        env.settled().await;
        let before = bus.log.last_seq().await.unwrap();
        let mut ws = bus.connect(&alice).await;
        let send = |extra: Value| {
            let mut body = json!({"to": "bob", "type": "StatusUpdate"});
            body.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
            body
        };
        let cases = [
            ("to", send(json!({"to": "bo\u{0}b"}))),
            ("type", send(json!({"type": "Status\u{0}Update"}))),
            ("payload.a.b", send(json!({"payload": {"a": {"b": "x\u{0}y"}}}))),
            ("payload.list.1", send(json!({"payload": {"list": ["ok", "\u{0}"]}}))),
            (r#"the key "k\0" under payload.a"#, send(json!({"payload": {"a": {"k\u{0}": 1}}}))),
            ("payload", send(json!({"payload": "\u{0}"}))),
            ("correlation_id", send(json!({"correlation_id": "c\u{0}"}))),
            ("dedupe_key", send(json!({"dedupe_key": "d\u{0}"}))),
        ];
        for (field, body) in cases {
            let (status, v) = bus.send(&alice, body.clone()).await;
            assert_refused(mode, field, Some(status), &v["error"]);
            let mut frame = body;
            frame["op"] = json!("send");
            let r = ws.request(frame).await;
            assert_eq!(r["ok"], false, "{mode}: ws {field}: {r}");
            assert_refused(mode, field, None, &r["error"]);
        }
        let facts = [
            ("fact_type", json!({"fact_type": "t\u{0}", "state": {}})),
            ("state.k.0", json!({"fact_type": "t", "state": {"k": ["\u{0}"]}})),
        ];
        for (field, body) in facts {
            let (status, v) = bus.call("POST", Some(&alice), "/v1/plugins/alice/facts", Some(body.clone())).await;
            assert_refused(mode, field, Some(status), &v["error"]);
            let mut frame = body;
            frame["op"] = json!("fact");
            frame["plugin"] = json!("alice");
            assert_refused(mode, field, None, &ws.request(frame).await["error"]);
        }
        let (status, v) = bus.call("GET", Some(&alice), "/v1/plugins/alice/facts?fact_type=%00", None).await;
        assert_refused(mode, "fact_type", Some(status), &v["error"]);

        // Nothing was stored: the session's own events are all that followed.
        ws.close().await;
        let after = bus.log.read(before + 1, 1_000).await.unwrap();
        let types: Vec<&str> = after.iter().map(|s| s.event.type_name()).collect();
        assert!(types.iter().all(|t| t.starts_with("session.")), "{mode}: {types:?}");
    }
}

/// A `signal.sent` with NUL characters in its payload (value and key) and correlation id, as a
/// signalbus from before the NUL guard stored it.
fn sent_with_nul(id: Uuid) -> Event {
    let now = Utc::now();
    let body = EventBody::SignalSent(Box::new(SignalSent {
        signal_id: id,
        from: "alice".into(),
        to: "bob".into(),
        signal_type: "StatusUpdate".into(),
        category: Category::Info,
        priority: 0,
        payload: json!({"k\u{0}": "v\u{0}"}).to_string(),
        delivery_class: DeliveryClass::Async,
        created_at: now,
        expires_at: now + chrono::Duration::hours(1),
        recipient_state: RecipientState::NotAvailableOffline,
        publish_path: PublishPath::QueuedOffline,
        correlation_id: Some("c\0".into()),
        dedupe_key: None,
        redacted: vec![],
        resolved_to_session: None,
        pushed_to: None,
        fanout_id: None,
        deliver_at: None,
    }));
    Event::new("default", Some("alice".into()), now, body)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn poison_on_the_stream_is_dead_lettered_and_stops_nothing() {
    for env in Env::both().await {
        let (bus, mode) = (&env.bus, env.mode());
        let alice = bus.register("alice").await;
        let bob = bus.register("bob").await;
        let carol = bus.register_in("other", "carol").await;
        bus.register_in("other", "dave").await;
        let mut bob_ws = bus.connect(&bob).await;

        let nul_id = Uuid::new_v4();
        bus.log.append(&sent_with_nul(nul_id), Expect::LastSubjectSeq(0)).await.unwrap();
        let subject = bus.log.subjects().of("default", Entity::Signal(Uuid::new_v4()));
        let bad = env.append_raw(&subject, b"\xc1 not an event").await;

        // Another tenant's send is readable at once: projection went on past both.
        let (s, v) = bus.send(&carol, json!({"to": "dave", "type": "TaskAssigned"})).await;
        assert_eq!(s, 200, "{mode}: {v}");
        let path = format!("/v1/signals/{}", v["signal_id"].as_str().unwrap());
        let (s, row) = bus.call("GET", Some(&carol), &path, None).await;
        assert_eq!(s, 200, "{mode}: {row}");
        // The NUL signal is stored, NUL replaced by U+FFFD, in both modes alike.
        let (s, row) = bus.call("GET", Some(&bob), &format!("/v1/signals/{nul_id}"), None).await;
        assert_eq!(s, 200, "{mode}: {row}");
        assert_eq!(row["payload"], json!({"k\u{FFFD}": "v\u{FFFD}"}), "{mode}");
        assert_eq!(row["correlation_id"], "c\u{FFFD}", "{mode}");
        // Pushes went on too: the gateway's own tail passed the undecodable event.
        let (_, v) = bus.send(&alice, json!({"to": "bob", "type": "StatusUpdate"})).await;
        let pushed = loop {
            let got = bob_ws.next_signal(WAIT).await.unwrap_or_else(|| panic!("{mode}: no push after the poison"));
            if got["id"] == v["signal_id"] {
                break got;
            }
        };
        assert_eq!(pushed["from"], "alice");
        bob_ws.close().await;
        env.settled().await;

        // Not ready while a dead letter stands, with what to run; the doctor names it.
        let (s, v) = bus.call("GET", None, "/readyz", None).await;
        assert_eq!(s, 503, "{mode}: {v}");
        let message = v["error"]["message"].as_str().unwrap();
        assert!(message.contains(&format!("dead letters, the first at stream sequence {bad}")), "{mode}: {message}");
        assert!(message.contains("signalbus doctor"), "{mode}: {message}");
        let report = projector::doctor(&bus.log, &env.models).await.unwrap();
        assert_eq!(report.failed().map(|c| c.name).collect::<Vec<_>>(), ["dead_letters"], "{mode}: {report:#?}");

        // A rebuild meets the same events and ends where the live model is.
        let live = env.models.snapshot().await.unwrap();
        projector::rebuild(&bus.log, &env.models).await.unwrap();
        let rebuilt = env.models.snapshot().await.unwrap();
        assert_eq!(live, rebuilt, "{mode}: {}", live.diff(&rebuilt));
        assert_eq!(bus.call("GET", None, "/readyz", None).await.0, 503, "{mode}: the rebuild recorded it again");

        // Acknowledged after investigating: ready again.
        env.execute("DELETE FROM projection_dead_letters").await;
        let (s, v) = bus.call("GET", None, "/readyz", None).await;
        assert_eq!((s, v["status"].as_str()), (200, Some("ready")), "{mode}: {v}");
    }
}
