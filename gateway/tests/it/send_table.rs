//! Every cell of the CONTRACT §4 send table, plus the send-side rules around it: unknown
//! recipients, redaction, limits, dedupe.

use std::time::Duration;

use bus::event::{Event, EventBody, SessionKind, SessionOpened, Surface};
use chrono::Utc;
use serde_json::json;
use uuid::Uuid;

use crate::support::{eventually, Bus, WAIT};

#[tokio::test]
async fn available_ws_recipient_gets_sync_and_async_pushed() {
    let bus = Bus::start().await;
    let alice = bus.register("alice").await;
    let bob = bus.register("bob").await;
    let mut ws = bus.connect(&bob).await;
    for (ty, class) in [("Blocker", "sync"), ("StatusUpdate", "async")] {
        let (s, v) =
            bus.send(&alice, json!({"to": "bob", "type": ty, "payload": {"n": 1}, "correlation_id": "c-1"})).await;
        assert_eq!(s, 200, "{v}");
        assert_eq!(v["delivered"], true);
        assert_eq!(v["queued"], false);
        assert_eq!(v["recipient_state"], "available");
        assert_eq!(v["delivery_class"], class);
        assert_eq!(v["publish_path"], "pushed_to_ws");
        assert_eq!(v["resolved_to_session"], json!(ws.session_id()));
        assert!(v["created_at"].is_string() && v["expires_at"].is_string());
        assert!(v.get("redacted").is_none());
        let sig = ws.next_signal(WAIT).await.expect("pushed frame");
        assert_eq!(sig["id"], v["signal_id"]);
        assert_eq!(sig["from"], "alice");
        assert_eq!(sig["to"], "bob");
        assert_eq!(sig["type"], ty);
        assert_eq!(sig["payload"], json!({"n": 1}));
        assert_eq!(sig["delivery_class"], class);
        assert_eq!(sig["correlation_id"], "c-1");
        assert_eq!(sig["redelivered"], false);
        assert_eq!(sig["created_at"], v["created_at"]);
        assert_eq!(sig["expires_at"], v["expires_at"]);
    }
    let sig_prio = |t: &str| bus::catalog::TypeTable::default().get(t).priority();
    assert_eq!(sig_prio("Blocker"), 3);
}

/// A piggyback-only recipient (its session recorded on the stream by another node).
#[tokio::test]
async fn piggyback_only_recipient_gets_buffered_for_both_classes() {
    let bus = Bus::start().await;
    let alice = bus.register("alice").await;
    bus.register("carol").await;
    let session = Uuid::new_v4();
    let opened = EventBody::SessionOpened(SessionOpened {
        session_id: session,
        identity: "carol".into(),
        kind: SessionKind::Shim,
        surface: Surface::Piggyback,
        node: "node-b".into(),
    });
    let a =
        bus.log.append(&Event::new("default", Some("carol".into()), Utc::now(), opened), bus::log::Expect::Any).await;
    assert!(bus.gw.wait_applied(a.unwrap().seq, WAIT).await);
    for (ty, class) in [("Question", "sync"), ("TaskAssigned", "async")] {
        let (s, v) = bus.send(&alice, json!({"to": "carol", "type": ty})).await;
        assert_eq!(s, 200, "{v}");
        assert_eq!(v["delivered"], false);
        assert_eq!(v["queued"], true);
        assert_eq!(v["recipient_state"], "available");
        assert_eq!(v["delivery_class"], class);
        assert_eq!(v["publish_path"], "buffered_for_piggyback");
    }
}

#[tokio::test]
async fn offline_recipient_bounces_sync_and_queues_async() {
    let bus = Bus::start().await;
    let alice = bus.register("alice").await;
    bus.register("bob").await;
    let (s, v) = bus.send(&alice, json!({"to": "bob", "type": "Blocker"})).await;
    assert_eq!(s, 409, "{v}");
    assert_eq!(v["error"]["code"], "recipient_unavailable");
    assert_eq!(v["error"]["recipient_state"], "not_available_offline");
    let bounced = v["error"]["signal_id"].as_str().unwrap().to_string();
    // Nothing queued: the bounce is not a signal anyone can see.
    let (s, _) = bus.call("GET", Some(&alice), &format!("/v1/signals/{bounced}"), None).await;
    assert_eq!(s, 404);

    let (s, v) = bus.send(&alice, json!({"to": "bob", "type": "StatusUpdate", "ttl_seconds": 60})).await;
    assert_eq!(s, 200, "{v}");
    assert_eq!(v["delivered"], false);
    assert_eq!(v["queued"], true);
    assert_eq!(v["recipient_state"], "not_available_offline");
    assert_eq!(v["publish_path"], "queued_offline");
    assert_eq!(v["resolved_to_session"], json!(null));
    let id = v["signal_id"].as_str().unwrap();
    let (s, row) = bus.call("GET", Some(&alice), &format!("/v1/signals/{id}"), None).await;
    assert_eq!(s, 200, "{row}");
    assert_eq!(row["publish_path"], "queued_offline");
    assert_eq!(row["delivered_at"], json!(null));
    // A sync type downgraded to async per send queues too.
    let (s, v) = bus.send(&alice, json!({"to": "bob", "type": "Blocker", "delivery_class": "async"})).await;
    assert_eq!((s, v["publish_path"].as_str()), (200, Some("queued_offline")));
}

#[tokio::test]
async fn stale_recipient_bounces_sync_queues_async_and_is_closed_after_twice_the_threshold() {
    let stale = Duration::from_millis(400);
    let bus = Bus::with(|c| c.stale_after = stale).await;
    let alice = bus.register("alice").await;
    let bob = bus.register("bob").await;
    // Connected, then silent: the client never reads, so it never answers a ping.
    let ws = bus.connect(&bob).await;
    bus.until_state("bob", "not_available_stale").await;
    let (s, v) = bus.send(&alice, json!({"to": "bob", "type": "Question"})).await;
    assert_eq!(s, 409, "{v}");
    assert_eq!(v["error"]["recipient_state"], "not_available_stale");
    let (s, v) = bus.send(&alice, json!({"to": "bob", "type": "StatusUpdate"})).await;
    assert_eq!(s, 200, "{v}");
    assert_eq!(v["recipient_state"], "not_available_stale");
    assert_eq!(v["publish_path"], "queued_offline");
    // Silent for 2 × stale_after: closed, so the recipient is offline (how soon is bench/'s to
    // measure; this only checks that it happens).
    let offline = eventually(WAIT, || async {
        let (_, v) = bus.call("GET", Some(&alice), "/v1/agents", None).await;
        v["agents"].as_array().unwrap().iter().any(|a| a["identity"] == "bob" && a["state"] == "not_available_offline")
    })
    .await;
    assert!(offline);
    drop(ws);
}

#[tokio::test]
async fn unknown_recipients_limits_redaction_and_validation() {
    let bus = Bus::start().await;
    let alice = bus.register("alice").await;
    bus.register("bob").await;
    let (s, v) = bus.send(&alice, json!({"to": "nobody", "type": "StatusUpdate"})).await;
    assert_eq!((s, v["error"]["code"].as_str()), (404, Some("unknown_recipient")));
    let (s, v) = bus.send(&alice, json!({"to": "bob", "type": "X", "from": "mallory"})).await;
    assert_eq!((s, v["error"]["code"].as_str()), (400, Some("invalid_request")));
    let big = "x".repeat(70 * 1024);
    let (s, v) = bus.send(&alice, json!({"to": "bob", "type": "X", "payload": {"blob": big}})).await;
    assert_eq!((s, v["error"]["code"].as_str()), (413, Some("payload_too_large")));
    for bad in [
        json!({"to": "bob", "type": "9bad"}),
        json!({"to": "bob", "type": "X", "ttl_seconds": 0}),
        json!({"to": "bob", "type": "X", "ttl_seconds": 2_592_001}),
        json!({"to": "bob", "type": "X", "correlation_id": "c".repeat(65)}),
        json!({"to": "bob", "type": "X", "dedupe_key": "k".repeat(201)}),
        json!({"to": "bob", "type": "X", "delivery_class": "later"}),
        json!({"type": "X"}),
        json!([1, 2]),
    ] {
        let (s, v) = bus.send(&alice, bad.clone()).await;
        assert_eq!((s, v["error"]["code"].as_str()), (400, Some("invalid_request")), "{bad}");
        let m = v["error"]["message"].as_str().unwrap();
        assert!(!m.starts_with(|c: char| c.is_uppercase()), "{m}");
    }
    let (s, v) = bus
        .send(
            &alice,
            json!({"to": "bob", "type": "X", "payload": {"Password": "p", "db": {"api_key": "k", "host": "h"}}}),
        )
        .await;
    assert_eq!(s, 200, "{v}");
    let mut red: Vec<String> = serde_json::from_value(v["redacted"].clone()).unwrap();
    red.sort();
    assert_eq!(red, vec!["Password", "db.api_key"]);
    let id = v["signal_id"].as_str().unwrap();
    let (_, row) = bus.call("GET", Some(&alice), &format!("/v1/signals/{id}"), None).await;
    assert_eq!(row["payload"], json!({"Password": "[REDACTED]", "db": {"api_key": "[REDACTED]", "host": "h"}}));
    let (s, _) = bus.send("sb_not-a-token", json!({"to": "bob", "type": "X"})).await;
    assert_eq!(s, 401);
}

#[tokio::test]
async fn dedupe_key_returns_the_original_and_creates_nothing() {
    let bus = Bus::start().await;
    let alice = bus.register("alice").await;
    let bob = bus.register("bob").await;
    let body = json!({"to": "bob", "type": "TaskAssigned", "dedupe_key": "job-7"});
    let (s1, v1) = bus.send(&alice, body.clone()).await;
    let (s2, v2) = bus
        .send(&alice, json!({"to": "bob", "type": "TaskAssigned", "dedupe_key": "job-7", "payload": {"other": 1}}))
        .await;
    assert_eq!((s1, s2), (200, 200));
    assert_eq!(v1, v2, "a repeat answers the original response");
    // Bob receives it exactly once, and the repeat then reports it delivered.
    let mut ws = bus.connect(&bob).await;
    assert_eq!(ws.next_signal(WAIT).await.unwrap()["id"], v1["signal_id"]);
    assert!(ws.next_signal(Duration::from_millis(300)).await.is_none());
    let (_, v3) = bus.send(&alice, body).await;
    assert_eq!(v3["signal_id"], v1["signal_id"]);
    assert_eq!(v3["delivered"], true);
    assert_eq!(v3["queued"], false);
    assert_eq!(v3["resolved_to_session"], json!(ws.session_id()));
    // Another sender's identical key is another signal.
    let carol = bus.register("carol").await;
    let (_, v4) = bus.send(&carol, json!({"to": "bob", "type": "TaskAssigned", "dedupe_key": "job-7"})).await;
    assert_ne!(v4["signal_id"], v1["signal_id"]);
}

#[tokio::test]
async fn a_dedupe_repeat_answers_the_session_the_original_resolved_to() {
    let bus = Bus::start().await;
    let alice = bus.register("alice").await;
    let bob = bus.register("bob").await;
    let (s, session) = bus.call("POST", Some(&bob), "/v1/sessions", Some(json!({"kind": "shim"}))).await;
    assert_eq!(s, 200, "{session}");
    let body = json!({"to": "bob", "type": "StatusUpdate", "dedupe_key": "pb-1"});
    let (_, v1) = bus.send(&alice, body.clone()).await;
    assert_eq!(v1["publish_path"], "buffered_for_piggyback");
    assert_eq!(v1["resolved_to_session"], session["session_id"]);
    let (_, v2) = bus.send(&alice, body).await;
    assert_eq!(v2, v1, "still pending: the repeat answers exactly the original");
}

#[tokio::test]
async fn a_sender_over_its_rate_is_refused_with_rate_limited_and_nothing_is_recorded() {
    let bus = Bus::with(|c| c.send_rate = Some(gateway::SendRate { per_second: 1, burst: 2 })).await;
    let alice = bus.register("alice").await;
    let carol = bus.register("carol").await;
    bus.register("bob").await;
    let before = bus.log.last_seq().await.unwrap();
    let body = json!({"to": "bob", "type": "StatusUpdate"});
    for _ in 0..2 {
        assert_eq!(bus.send(&alice, body.clone()).await.0, 200);
    }
    let (s, v) = bus.send(&alice, body.clone()).await;
    assert_eq!((s, v["error"]["code"].as_str()), (429, Some("rate_limited")), "{v}");
    assert_eq!(bus.log.last_seq().await.unwrap(), before + 2, "a refused send appends nothing");
    assert_eq!(bus.send(&carol, body).await.0, 200, "the quota is per identity");
}
