//! Scenario S18 of clients/SCENARIOS.md: which answers spool a send and which replay answers
//! delete, keep or stop — against a local stub of `POST /v1/signals` that answers from a script,
//! because a real bus cannot be made to answer 503, 429 or 500 on demand.
//!
//! Deliberately only the send endpoint: everything else is covered against a real bus.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::{Json, Router};
use chrono::Utc;
use serde_json::{json, Value};
use signalbus_client::{Client, Error, SendOutcome, SendRequest, Spool};

#[derive(Debug, Clone)]
enum Plan {
    Answer(u16, Value),
    RetryAfter(u64),
    Hang,
}

#[derive(Debug, Default)]
struct Stub {
    plans: Mutex<VecDeque<Plan>>,
    seen: Mutex<Vec<Value>>,
}

async fn signals(State(stub): State<Arc<Stub>>, Json(body): Json<Value>) -> Response {
    stub.seen.lock().unwrap().push(body);
    let plan = stub.plans.lock().unwrap().pop_front();
    match plan {
        Some(Plan::Answer(status, body)) => (StatusCode::from_u16(status).unwrap(), Json(body)).into_response(),
        Some(Plan::RetryAfter(secs)) => {
            let mut h = HeaderMap::new();
            h.insert("retry-after", secs.to_string().parse().unwrap());
            (StatusCode::TOO_MANY_REQUESTS, h, Json(json!({"error": {"code": "rate_limited", "message": "slow down"}})))
                .into_response()
        }
        Some(Plan::Hang) => {
            tokio::time::sleep(Duration::from_secs(30)).await;
            StatusCode::INTERNAL_SERVER_ERROR.into_response()
        }
        None => (StatusCode::INTERNAL_SERVER_ERROR, "no plan").into_response(),
    }
}

async fn stub() -> (String, Arc<Stub>) {
    let state = Arc::new(Stub::default());
    let app = Router::new().route("/v1/signals", post(signals)).with_state(state.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (url, state)
}

fn plan(stub: &Stub, plans: &[Plan]) {
    stub.plans.lock().unwrap().extend(plans.iter().cloned());
}

fn error(status: u16, code: &str) -> Plan {
    let mut e = json!({"error": {"code": code, "message": format!("stub says {code}")}});
    if code == "recipient_unavailable" {
        e["error"]["recipient_state"] = json!("not_available_offline");
        e["error"]["signal_id"] = json!(uuid::Uuid::new_v4().to_string());
    }
    Plan::Answer(status, e)
}

fn accepted() -> Plan {
    let now = Utc::now();
    Plan::Answer(
        200,
        json!({"signal_id": uuid::Uuid::new_v4().to_string(), "delivered": false, "queued": true,
            "recipient_state": "not_available_offline", "delivery_class": "async",
            "created_at": now.to_rfc3339(), "expires_at": (now + chrono::Duration::hours(1)).to_rfc3339(),
            "resolved_to_session": null, "publish_path": "queued_offline"}),
    )
}

fn keys_seen(stub: &Stub) -> Vec<String> {
    stub.seen.lock().unwrap().iter().map(|b| b["dedupe_key"].as_str().unwrap_or_default().to_string()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s18_spool_decisions() {
    let (url, stub) = stub().await;
    let dir = tempfile::tempdir().unwrap();
    let client = Client::builder(&url, "sb_stub").identity("alice").request_timeout(Duration::from_millis(500));
    let client = client.spool_dir(dir.path()).build().unwrap();
    let spool = client.spool().unwrap().clone();

    // 503 → Spooled, with the dedupe_key the first attempt carried.
    plan(&stub, &[error(503, "unavailable")]);
    let out = client.send(SendRequest::new("bob", "TaskAssigned")).await.unwrap();
    let SendOutcome::Spooled(s) = out else { panic!("expected Spooled, got {out:?}") };
    assert_eq!(keys_seen(&stub), vec![s.dedupe_key.clone()]);
    assert_eq!(spool.entries()[0].dedupe_key(), s.dedupe_key);
    spool.delete(&s.entry);

    // 429 → RateLimited with retry_after, not spooled.
    plan(&stub, &[Plan::RetryAfter(2)]);
    match client.send(SendRequest::new("bob", "TaskAssigned")).await {
        Err(e @ Error::RateLimited { .. }) => assert_eq!(e.retry_after(), Some(Duration::from_secs(2))),
        other => panic!("expected RateLimited, got {other:?}"),
    }
    assert!(spool.is_empty());

    // Without a spool (or with spooling off for the call), 503 → Unavailable with the dedupe_key.
    let bare = Client::new(&url, "sb_stub").unwrap();
    plan(&stub, &[error(503, "unavailable"), error(503, "unavailable")]);
    for result in [
        bare.send(SendRequest::new("bob", "X").dedupe_key("k-1")).await,
        client.send_opts(SendRequest::new("bob", "X").dedupe_key("k-2"), false).await,
    ] {
        match result {
            Err(e @ Error::Unavailable { .. }) => assert!(e.dedupe_key().is_some_and(|k| k.starts_with("k-")), "{e:?}"),
            other => panic!("expected Unavailable, got {other:?}"),
        }
    }
    assert!(spool.is_empty());

    // Replay newest first: 200 deletes; 409 deletes and is reported; 503 keeps it and stops the
    // pass, leaving older entries untouched.
    let now = Utc::now();
    for (i, key) in ["r1", "r2", "r3", "r4"].iter().enumerate() {
        let req = SendRequest::new("bob", "StatusUpdate").dedupe_key(*key);
        spool.put(&req, 3600, Some("alice"), "test", now - chrono::Duration::seconds(40 - 10 * i as i64)).unwrap();
    }
    stub.seen.lock().unwrap().clear();
    plan(&stub, &[accepted(), error(409, "recipient_unavailable"), error(503, "unavailable")]);
    let report = client.replay_spool().await;
    assert_eq!(keys_seen(&stub), vec!["r4", "r3", "r2"]);
    assert_eq!((report.replayed.len(), report.kept), (1, 2));
    assert!(matches!(report.rejected.as_slice(), [Error::RecipientUnavailable { .. }]), "{:?}", report.rejected);
    assert!(matches!(report.stopped_by, Some(Error::Unavailable { .. })));
    let left = |s: &Spool| s.entries().iter().map(|e| e.dedupe_key().to_string()).collect::<Vec<_>>();
    assert_eq!(left(&spool), vec!["r2", "r1"]);

    // A 500 or a timeout keeps everything.
    for p in [error(500, "internal"), Plan::Hang] {
        plan(&stub, &[p]);
        let report = client.replay_spool().await;
        assert_eq!((report.replayed.len(), report.rejected.len(), report.kept), (0, 0, 2), "{:?}", report.stopped_by);
        assert_eq!(left(&spool), vec!["r2", "r1"]);
    }

    // A connection failure spools with the type's default TTL, in the shared file format.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
    let dir2 = tempfile::tempdir().unwrap();
    let offline =
        Client::builder(format!("http://{closed}"), "sb_x").identity("alice").spool_dir(dir2.path()).build().unwrap();
    let out = offline.send(SendRequest::new("bob", "TaskAssigned").payload(json!({"n": 1}))).await.unwrap();
    let SendOutcome::Spooled(s) = out else { panic!("expected Spooled, got {out:?}") };
    assert_eq!(s.ttl_seconds, 7 * 24 * 3600);
    let name = &s.entry;
    let b = name.as_bytes();
    assert!(name.starts_with("send-") && name.ends_with(".json") && name.len() == 5 + 24 + 1 + 6 + 1 + 8 + 5, "{name}");
    assert!(b[5..9].iter().all(u8::is_ascii_digit) && &name[15..16] == "T" && &name[28..29] == "Z", "{name}");
    let doc: Value = serde_json::from_slice(&std::fs::read(dir2.path().join(name)).unwrap()).unwrap();
    assert_eq!(
        (&doc["version"], &doc["kind"], &doc["identity"], &doc["ttl_seconds"]),
        (&json!(1), &json!("send"), &json!("alice"), &json!(604800))
    );
    assert!(doc["reason"].as_str().unwrap().starts_with("unreachable"), "{doc}");
    assert_eq!(
        doc["request"],
        json!({"to": "bob", "type": "TaskAssigned", "payload": {"n": 1}, "dedupe_key": s.dedupe_key})
    );
    chrono::DateTime::parse_from_rfc3339(doc["spooled_at"].as_str().unwrap()).unwrap();
}

/// Not S18 itself: a scheduled send the bus could not take is spooled with the instant its delay
/// names (`deliver_at`, the shared format's field), its TTL counts from then, and a replay sends
/// that `deliver_at` while it is ahead — and none once it has passed (the bus would refuse it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scheduled_send_is_spooled_with_its_deliver_at() {
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let offline =
        Client::builder(format!("http://{closed}"), "sb_x").identity("alice").spool_dir(dir.path()).build().unwrap();
    let before = Utc::now();
    let req = SendRequest::new("bob", "StatusUpdate").deliver_after(Duration::from_secs(120));
    let SendOutcome::Spooled(s) = offline.send(req).await.unwrap() else { panic!("expected Spooled") };
    let doc: Value = serde_json::from_slice(&std::fs::read(dir.path().join(&s.entry)).unwrap()).unwrap();
    assert!(doc["request"].get("deliver_after_seconds").is_none(), "{doc}");
    let due = chrono::DateTime::parse_from_rfc3339(doc["request"]["deliver_at"].as_str().unwrap()).unwrap();
    let off = (due.with_timezone(&Utc) - (before + chrono::Duration::seconds(120))).num_milliseconds();
    assert!((0..2000).contains(&off), "deliver_at {due} is {off} ms after the send + 120 s");
    let spool = offline.spool().unwrap().clone();
    let ttl = 24 * 3600;
    assert_eq!(spool.entries()[0].remaining_ttl(Utc::now()), ttl, "the TTL has not started");
    let passed = Utc::now() - chrono::Duration::seconds(10);
    let due_req = SendRequest::new("bob", "StatusUpdate").dedupe_key("due").deliver_at(passed);
    spool.put(&due_req, ttl as u64, Some("alice"), "test", passed - chrono::Duration::seconds(10)).unwrap();

    let (url, stub) = stub().await;
    let client = Client::builder(&url, "sb_stub").identity("alice").spool_dir(dir.path()).build().unwrap();
    plan(&stub, &[accepted(), accepted()]);
    let report = client.replay_spool().await;
    assert_eq!((report.replayed.len(), report.kept), (2, 0), "{:?}", report.stopped_by);
    let seen = stub.seen.lock().unwrap().clone();
    let ahead = seen.iter().find(|b| b["dedupe_key"] == json!(s.dedupe_key)).expect("the scheduled entry replayed");
    assert_eq!((&ahead["deliver_at"], &ahead["ttl_seconds"]), (&doc["request"]["deliver_at"], &json!(ttl)));
    let due = seen.iter().find(|b| b["dedupe_key"] == json!("due")).expect("the due entry replayed");
    assert!(due.get("deliver_at").is_none(), "a deliver_at that passed is not sent: {due}");
    let left = due["ttl_seconds"].as_i64().unwrap();
    assert!((ttl - 12..=ttl - 9).contains(&left), "the TTL ran from deliver_at: {left} s left");
}
