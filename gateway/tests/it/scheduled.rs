//! Scheduled delivery at the gateway (CONTRACT §16): a send with `deliver_after_seconds` or
//! `deliver_at` is answered `queued`, `publish_path: scheduled`, with its `deliver_at`; its
//! recipient sees nothing of it (no push, not in the inbox, drains, lists or lookups) until it
//! is due, and once released it is pushed to a connected recipient like a fresh send, or waits
//! for the next session; it can be recalled until delivered; bad schedules are refused, each
//! with its own message, over HTTP and the WebSocket alike.
//!
//! No sweeper runs here: the tests append the release through the store, as the sweeper does.

use std::time::Duration;

use bus::signal::SignalCommand;
use bus::store::SignalStore;
use chrono::{DateTime, Utc};
use serde_json::{json, Value};

use crate::support::{deliveries, eventually, Bus, WAIT};

/// Appends the sweeper's `signal.released` of `id` once it is due.
async fn release(bus: &Bus, id: &str, deliver_at: DateTime<Utc>) {
    let due = eventually(WAIT, || async { Utc::now() >= deliver_at }).await;
    assert!(due, "deliver_at {deliver_at} is more than {WAIT:?} away");
    let store = SignalStore::new(bus.log.clone());
    let id = uuid::Uuid::parse_str(id).unwrap();
    store.execute("default", id, &SignalCommand::Release, "signalbus/sweeper", Utc::now()).await.unwrap();
}

fn instant(v: &Value, key: &str) -> DateTime<Utc> {
    v[key].as_str().unwrap_or_else(|| panic!("{key} in {v}")).parse().unwrap()
}

fn ids(v: &Value) -> Vec<String> {
    v["signals"].as_array().unwrap().iter().map(|s| s["id"].as_str().unwrap().to_string()).collect()
}

#[tokio::test]
async fn a_scheduled_signal_is_invisible_until_released_then_pushed_to_a_connected_recipient() {
    let bus = Bus::start().await;
    let alice = bus.register("alice").await;
    let bob = bus.register("bob").await;
    let mut ws = bus.connect(&bob).await;
    bus.until_state("bob", "available").await;

    let (status, v) = bus.send(&alice, json!({"to": "bob", "type": "StatusUpdate", "deliver_after_seconds": 1})).await;
    assert_eq!(status, 200, "{v}");
    assert_eq!((&v["queued"], &v["delivered"], &v["publish_path"]), (&json!(true), &json!(false), &json!("scheduled")));
    assert_eq!(v["recipient_state"], "available", "the recipient's state at send is still told");
    assert_eq!(v["resolved_to_session"], Value::Null, "a scheduled send is never resolved to a session");
    let (created_at, deliver_at) = (instant(&v, "created_at"), instant(&v, "deliver_at"));
    assert_eq!(instant(&v, "expires_at"), deliver_at + chrono::Duration::hours(24), "expires_at = deliver_at + ttl");
    assert!(deliver_at >= created_at + chrono::Duration::milliseconds(999), "{v}");
    let id = v["signal_id"].as_str().unwrap().to_string();

    // Before it is due: nothing for bob anywhere; its sender sees it.
    assert!(ws.next_signal(Duration::from_millis(300)).await.is_none(), "never pushed at send");
    let (_, inbox) = bus.call("GET", Some(&bob), "/v1/inbox", None).await;
    assert!(ids(&inbox).is_empty(), "{inbox}");
    let (_, drained) = bus.call("GET", Some(&bob), "/v1/inbox?drain=true", None).await;
    assert!(ids(&drained).is_empty(), "{drained}");
    assert_eq!(bus.call("GET", Some(&bob), &format!("/v1/signals/{id}"), None).await.0, 404);
    let (_, received) = bus.call("GET", Some(&bob), "/v1/signals?role=received", None).await;
    assert!(ids(&received).is_empty(), "{received}");
    let (s, row) = bus.call("GET", Some(&alice), &format!("/v1/signals/{id}"), None).await;
    assert_eq!(s, 200, "{row}");
    assert_eq!((instant(&row, "deliver_at"), &row["released_at"]), (deliver_at, &Value::Null));
    assert_eq!(row["publish_path"], "scheduled");
    let (_, sent) = bus.call("GET", Some(&alice), "/v1/signals?role=sent", None).await;
    assert_eq!(ids(&sent), vec![id.clone()]);

    // Released: pushed to bob's session as a fresh send would be.
    release(&bus, &id, deliver_at).await;
    let got = ws.next_signal(WAIT).await.expect("pushed once released");
    assert_eq!((got["id"].as_str(), got["redelivered"].as_bool()), (Some(id.as_str()), Some(false)));
    assert_eq!(instant(&got, "expires_at"), deliver_at + chrono::Duration::hours(24));
    ws.ack(std::slice::from_ref(&id)).await;
    assert_eq!(bus.recall(&alice, &id).await, (200, json!({"outcome": "already_delivered"})));
    assert_eq!(deliveries(&bus.log, &id).await, 1);
    let shown = eventually(WAIT, || async {
        let (_, row) = bus.call("GET", Some(&bob), &format!("/v1/signals/{id}"), None).await;
        row["delivered_via"] == "ws_push" && row["released_at"].is_string()
    })
    .await;
    assert!(shown, "the recipient sees it once released, delivered by push");
}

#[tokio::test]
async fn a_released_signal_waits_for_the_next_session_and_a_scheduled_one_can_be_recalled() {
    let bus = Bus::start().await;
    let alice = bus.register("alice").await;
    let bob = bus.register("bob").await;
    let deliver_at = (Utc::now() + chrono::Duration::milliseconds(1500)).to_rfc3339();
    let body = json!({"to": "bob", "type": "TaskAssigned", "deliver_at": deliver_at, "dedupe_key": "later"});
    let (status, v) = bus.send(&alice, body.clone()).await;
    assert_eq!(status, 200, "{v}");
    let id = v["signal_id"].as_str().unwrap().to_string();
    assert_eq!(bus.send(&alice, body).await, (200, v.clone()), "a dedupe repeat answers the same, deliver_at too");
    let (_, kept) = bus.send(&alice, json!({"to": "bob", "type": "StatusUpdate", "deliver_after_seconds": 3600})).await;
    let kept = kept["signal_id"].as_str().unwrap().to_string();
    let (_, other) = bus.send(&alice, json!({"to": "bob", "type": "StatusUpdate", "deliver_after_seconds": 60})).await;
    let recalled = other["signal_id"].as_str().unwrap().to_string();
    assert_eq!(bus.recall(&alice, &recalled).await, (200, json!({"outcome": "recalled"})), "recalled before due");

    // Released while bob is offline: it waits like any queued async signal.
    release(&bus, &id, instant(&v, "deliver_at")).await;
    let mut ws = bus.connect(&bob).await;
    let got = ws.next_signal(WAIT).await.expect("the startup drain hands it over");
    assert_eq!(got["id"].as_str(), Some(id.as_str()));
    assert!(ws.next_signal(Duration::from_millis(300)).await.is_none(), "the recalled and the future one stay out");
    assert_eq!(deliveries(&bus.log, &recalled).await, 0);
    assert_eq!(deliveries(&bus.log, &kept).await, 0);
    assert_eq!(bus.recall(&alice, &kept).await, (200, json!({"outcome": "recalled"})), "recallable until delivered");
}

#[tokio::test]
async fn bad_schedules_are_refused_each_with_its_own_message_over_http_and_websocket() {
    let bus = Bus::with(|c| c.retention = Some(Duration::from_secs(3 * 24 * 3600))).await;
    let alice = bus.register("alice").await;
    bus.register("bob").await;
    let soon = (Utc::now() + chrono::Duration::hours(1)).to_rfc3339();
    let cases = [
        (
            json!({"deliver_after_seconds": 60, "deliver_at": soon}),
            "give deliver_after_seconds or deliver_at, not both",
        ),
        (json!({"deliver_after_seconds": 60, "delivery_class": "sync"}), "a sync signal cannot be scheduled"),
        (json!({"deliver_after_seconds": 60, "type": "Question"}), "Question is sync by default"),
        (json!({"deliver_at": "2020-01-01T00:00:00Z"}), "deliver_at 2020-01-01T00:00:00Z is not in the future"),
        (json!({"deliver_at": (Utc::now() + chrono::Duration::days(31)).to_rfc3339()}), "is more than 30 days"),
        (json!({"deliver_at": "tomorrow"}), "deliver_at must be an RFC 3339 timestamp"),
        (json!({"deliver_after_seconds": 0}), "deliver_after_seconds must be between 1 and 2592000"),
        (json!({"deliver_after_seconds": -5}), "deliver_after_seconds must be a whole number"),
        (json!({"deliver_after_seconds": 2 * 86400 + 1}), "past the stream's retention (3 days)"),
    ];
    let mut ws = bus.connect(&alice).await;
    for (fields, message) in cases {
        let mut body = json!({"to": "bob", "type": "StatusUpdate"});
        body.as_object_mut().unwrap().extend(fields.as_object().unwrap().clone());
        let (status, v) = bus.send(&alice, body.clone()).await;
        assert_eq!((status, v["error"]["code"].as_str()), (400, Some("invalid_request")), "{body}: {v}");
        let said = v["error"]["message"].as_str().unwrap();
        assert!(said.contains(message), "{body}: {said:?} does not say {message:?}");
        body["op"] = json!("send");
        let r = ws.request(body).await;
        assert_eq!((r["ok"].as_bool(), r["error"]["code"].as_str()), (Some(false), Some("invalid_request")), "{r}");
        assert!(r["error"]["message"].as_str().unwrap().contains(message), "the same over ws: {r}");
    }
    // Within the retention, and over the WebSocket: scheduled.
    let r =
        ws.request(json!({"op": "send", "to": "bob", "type": "StatusUpdate", "deliver_after_seconds": 86400})).await;
    assert_eq!((r["ok"].as_bool(), r["result"]["publish_path"].as_str()), (Some(true), Some("scheduled")), "{r}");
    // A schedule to no one is unknown_recipient, whatever it asks for.
    let (status, _) =
        bus.send(&alice, json!({"to": "nobody", "type": "X", "deliver_at": "2020-01-01T00:00:00Z"})).await;
    assert_eq!(status, 404);
}

#[tokio::test]
async fn a_scheduled_send_to_a_group_schedules_each_members_signal_and_pushes_none_at_send() {
    let bus = Bus::start().await;
    let alice = bus.register("alice").await;
    let bob = bus.register("bob").await;
    bus.register("carol").await;
    let (s, _) =
        bus.call("PUT", Some(crate::support::ADMIN), "/v1/groups/crew", Some(json!({"announce": false}))).await;
    assert_eq!(s, 201);
    for who in ["bob", "carol"] {
        let path = format!("/v1/groups/crew/members/{who}");
        assert_eq!(bus.call("PUT", Some(crate::support::ADMIN), &path, None).await.0, 200);
    }
    let mut ws = bus.connect(&bob).await;
    bus.until_state("bob", "available").await;
    let body = json!({"to": "@crew", "type": "StatusUpdate", "deliver_after_seconds": 600});
    let (s, v) = bus.send(&alice, body).await;
    assert_eq!(s, 200, "{v}");
    let results = v["results"].as_array().unwrap();
    assert_eq!(results.len(), 2, "{v}");
    for r in results {
        assert_eq!((r["publish_path"].as_str(), r["queued"].as_bool()), (Some("scheduled"), Some(true)), "{r}");
        assert!(r["deliver_at"].is_string(), "{r}");
    }
    assert!(ws.next_signal(Duration::from_millis(300)).await.is_none(), "a connected member gets nothing yet");
}
