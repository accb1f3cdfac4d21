//! Directives through real faults (CONTRACT §13, §14): a gateway killed with -9 between a
//! directive's create and its start, nats-server restarted, PostgreSQL's connections cut —
//! and afterwards no directive is lost (every create answered 201 is found again by its key),
//! none has two terminal events, every open one reached its worker, and the read models equal
//! a rebuild of the stream.
//!
//! Deliberately black-box like `truthful.rs`: the binary's roles as processes, HTTP, and a read
//! of the stream itself.

mod roles;

use std::collections::HashMap;
use std::time::Duration;

use bus::event::EventBody;
use bus::log::EventLog;
use roles::*;
use serde_json::{json, Value};

async fn put(base: &str, path: &str) -> u16 {
    let r = reqwest::Client::new().put(format!("{base}{path}")).bearer_auth(ADMIN).json(&json!({})).send().await;
    r.unwrap().status().as_u16()
}

/// A create retried until the bus answers it (a restarting stream answers 503 meanwhile).
async fn create(base: &str, token: &str, body: Value) -> (u16, Value) {
    for _ in 0..60 {
        let (s, v) = post(base, token, "/v1/directives", body.clone()).await;
        if s != 503 && s != 500 {
            return (s, v);
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    panic!("a create was never answered");
}

/// A directive action retried through unavailability; the answer's status and body.
async fn act(base: &str, token: &str, id: &str, action: &str, body: Value) -> (u16, Value) {
    for _ in 0..60 {
        let (s, v) = post(base, token, &format!("/v1/directives/{id}/{action}"), body.clone()).await;
        if s != 503 && s != 500 {
            return (s, v);
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    panic!("an action was never answered");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn directives_survive_a_killed_gateway_a_nats_restart_and_cut_database_connections() {
    let mut nats = testkit::NatsServer::start().await;
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
    let alice = register(&gw_b.base, "alice").await;
    let bob = register(&gw_b.base, "bob").await;
    let mut crew = Vec::new();
    for m in ["m1", "m2", "m3"] {
        crew.push(register(&gw_b.base, m).await);
    }
    assert_eq!(put(&gw_b.base, "/v1/groups/crew").await, 201);
    for m in ["m1", "m2", "m3"] {
        assert_eq!(put(&gw_b.base, &format!("/v1/groups/crew/members/{m}")).await, 200);
    }

    // Created through gateway a, which is then killed before anyone starts them.
    let mut ids: HashMap<String, String> = HashMap::new();
    for i in 0..12u32 {
        let to = if i.is_multiple_of(3) { "@crew" } else { "bob" };
        let body = json!({"to": to, "type": "build.run", "params": {"i": i}, "idempotency_key": format!("k{i}")});
        let (s, v) = create(&gw_a.base, &alice, body).await;
        assert_eq!(s, 201, "{v}");
        ids.insert(format!("k{i}"), v["directive_id"].as_str().unwrap().to_string());
    }
    gw_a.signal("KILL");
    assert!(gw_a.exited_within(Duration::from_secs(10)).await.is_some());

    // The stream restarts and the read models' connections are cut, with work in flight.
    nats.restart().await;
    let pool = sqlx::PgPool::connect(db.url()).await.unwrap();
    sqlx::query(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()",
    )
    .bind(db.name())
    .execute(&pool)
    .await
    .unwrap();

    // Nothing is lost: every create repeated through the survivor finds its directive.
    for (key, id) in &ids {
        let i: u32 = key[1..].parse().unwrap();
        let to = if i.is_multiple_of(3) { "@crew" } else { "bob" };
        let body = json!({"to": to, "type": "build.run", "params": {"i": i}, "idempotency_key": key});
        let (s, v) = create(&gw_b.base, &alice, body).await;
        assert_eq!((s, v["directive_id"].as_str()), (200, Some(id.as_str())), "{key}: {v}");
    }
    // Workers and the issuer race on them: starts, completions and cancels at once.
    let mut racers = Vec::new();
    for (key, id) in &ids {
        let i: u32 = key[1..].parse().unwrap();
        let base = gw_b.base.clone();
        let (worker, alice, id) =
            (if i.is_multiple_of(3) { crew[(i as usize) % 3].clone() } else { bob.clone() }, alice.clone(), id.clone());
        racers.push(tokio::spawn(async move {
            let done = act(&base, &worker, &id, "complete", json!({"result": {"i": i}})).await;
            let cancel = act(&base, &alice, &id, "cancel", json!({})).await;
            (done, cancel)
        }));
    }
    for r in racers {
        let ((ds, dv), (cs, cv)) = r.await.unwrap();
        assert!(ds == 200 || dv["error"]["code"] == "invalid_transition", "{dv}");
        assert!(cs == 200 || cv["error"]["code"] == "invalid_transition", "{cv}");
        assert!(ds == 200 || cs == 200, "one of the two ended it: {dv} {cv}");
    }

    // On the stream: each directive has exactly one terminal event, and its request was sent to
    // its workers before its create was answered.
    let log = bus::log::jetstream::JetStreamLog::connect(&nats.url(), Default::default()).await.unwrap();
    let events = log.read(1, 1_000_000).await.unwrap();
    let mut ends: HashMap<uuid::Uuid, usize> = HashMap::new();
    for s in &events {
        if let EventBody::DirectiveCompleted(_) | EventBody::DirectiveCanceled(_) | EventBody::DirectiveFailed(_) =
            &s.event.body
        {
            *ends.entry(s.event.body.directive_id().unwrap()).or_default() += 1;
        }
    }
    for id in ids.values() {
        assert_eq!(ends.get(&id.parse().unwrap()), Some(&1), "{id}: exactly one terminal event");
    }
    let requested: std::collections::HashSet<String> = events
        .iter()
        .flat_map(|s| s.event.body.sent_signals())
        .filter(|sent| sent.signal_type == "DirectiveRequested")
        .filter_map(|sent| sent.correlation_id.clone())
        .collect();
    for id in ids.values() {
        assert!(requested.contains(id), "{id}: its worker was handed the request");
    }

    // Quiesce, then the live read models must equal a rebuild from the stream.
    for p in [&mut gw_b, &mut sweeper] {
        p.signal("TERM");
        p.exited_within(Duration::from_secs(15)).await.expect("a role did not stop");
    }
    let models = projector::ReadModels::postgres(db.url()).await.unwrap();
    let shared: bus::log::SharedLog = std::sync::Arc::new(log);
    let last = shared.last_seq().await.unwrap();
    let applied =
        eventually(Duration::from_secs(30), || async { models.checkpoint().await.is_ok_and(|c| c >= last) }).await;
    assert!(applied.is_some(), "the projector never applied the stream's last sequence {last}");
    projector.signal("TERM");
    projector.exited_within(Duration::from_secs(15)).await.expect("the projector did not stop");
    let live = models.snapshot().await.unwrap();
    projector::rebuild(&shared, &models).await.unwrap();
    assert!(live == models.snapshot().await.unwrap(), "the live read models differ from a rebuild of the stream");
    let rows: i64 = sqlx::query_scalar("SELECT count(*) FROM directives WHERE status IN ('completed','canceled')")
        .fetch_one(&pool)
        .await
        .unwrap_or(0);
    assert_eq!(rows, ids.len() as i64, "every directive ended in the read model");
}
