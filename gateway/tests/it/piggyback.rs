//! Piggyback sessions: open/close, signals riding on responses (drain order, once each,
//! `delivered_via: piggyback`), the send table's piggyback column, staleness and the close
//! after twice the stale threshold, the HTTP ack, and a crashed node's ws session reaped.

use std::time::Duration;

use bus::event::{Event, EventBody, SessionKind, SessionOpened, Surface};
use chrono::Utc;
use serde_json::{json, Value};
use uuid::Uuid;

use crate::support::{eventually, Bus, ADMIN, WAIT};

async fn call_with(
    bus: &Bus,
    token: &str,
    session: &str,
    method: &str,
    path: &str,
    body: Option<Value>,
) -> (u16, Value) {
    let url = format!("{}{}", bus.base, path);
    let req = match method {
        "GET" => bus.http.get(url),
        "POST" => bus.http.post(url),
        "DELETE" => bus.http.delete(url),
        m => panic!("{m}"),
    };
    let mut req = req.bearer_auth(token).header("X-Signalbus-Session", session);
    if let Some(b) = body {
        req = req.json(&b);
    }
    let resp = req.send().await.unwrap();
    let status = resp.status().as_u16();
    (status, resp.json().await.unwrap_or(Value::Null))
}

async fn open(bus: &Bus, token: &str) -> String {
    let (s, v) = bus.call("POST", Some(token), "/v1/sessions", Some(json!({"kind": "shim"}))).await;
    assert_eq!(s, 200, "{v}");
    assert_eq!(v["surface"], "piggyback");
    v["session_id"].as_str().unwrap().to_string()
}

#[tokio::test]
async fn signals_ride_on_responses_in_drain_order_once_each() {
    let bus = Bus::start().await;
    let alice = bus.register("alice").await;
    let bob = bus.register("bob").await;
    let sid = open(&bus, &bob).await;

    // Piggyback-only recipient: both classes are buffered, the recipient is available.
    let (s, info) = bus.send(&alice, json!({"to": "bob", "type": "StatusUpdate"})).await;
    assert_eq!(s, 200, "{info}");
    assert_eq!(info["publish_path"], "buffered_for_piggyback");
    assert_eq!(info["queued"], true);
    assert_eq!(info["recipient_state"], "available");
    assert_eq!(info["resolved_to_session"], json!(sid));
    let (_, blocker) = bus.send(&alice, json!({"to": "bob", "type": "Blocker"})).await;
    assert_eq!(blocker["publish_path"], "buffered_for_piggyback", "{blocker}");

    let (s, v) = call_with(&bus, &bob, &sid, "GET", "/v1/agents", None).await;
    assert_eq!(s, 200, "{v}");
    let ids: Vec<&Value> = v["signals"].as_array().unwrap().iter().map(|s| &s["id"]).collect();
    assert_eq!(ids, vec![&blocker["signal_id"], &info["signal_id"]], "priority first");
    assert_eq!(v["signals"][0]["redelivered"], false);

    // Handed out once: the next call carries nothing.
    let (_, v) = call_with(&bus, &bob, &sid, "GET", "/v1/agents", None).await;
    assert_eq!(v["signals"], json!([]));
    let path = format!("/v1/signals/{}", blocker["signal_id"].as_str().unwrap());
    let (_, row) = bus.call("GET", Some(&bob), &path, None).await;
    assert_eq!(row["delivered_via"], "piggyback");
    assert_eq!(row["resolved_to_session"], json!(sid));
    let (_, r) = bus.recall(&alice, blocker["signal_id"].as_str().unwrap()).await;
    assert_eq!(r["outcome"], "already_delivered");

    // Ack one over HTTP, close: the unacked one comes back redelivered on the next session.
    let (s, a) =
        call_with(&bus, &bob, &sid, "POST", "/v1/inbox/ack", Some(json!({"signal_ids": [blocker["signal_id"]]}))).await;
    assert_eq!((s, &a["acked"]), (200, &json!(1)), "{a}");
    let (s, v) = bus.call("DELETE", Some(&bob), &format!("/v1/sessions/{sid}"), None).await;
    assert_eq!((s, &v["closed"]), (200, &json!(true)), "{v}");
    let (s, _) = bus.call("DELETE", Some(&bob), &format!("/v1/sessions/{sid}"), None).await;
    assert_eq!(s, 404, "closing twice");
    let (s, v) = call_with(&bus, &bob, &sid, "GET", "/v1/agents", None).await;
    assert_eq!((s, v["error"]["code"].as_str()), (404, Some("not_found")), "a closed session is refused");

    let (_, after) = bus.send(&alice, json!({"to": "bob", "type": "StatusUpdate"})).await;
    assert_eq!(after["publish_path"], "queued_offline");
    let sid2 = open(&bus, &bob).await;
    let (_, v) = call_with(&bus, &bob, &sid2, "GET", "/v1/agents", None).await;
    let got = v["signals"].as_array().unwrap();
    assert_eq!(got.len(), 2, "{v}");
    assert_eq!(got[0]["id"], info["signal_id"]);
    assert_eq!(got[0]["redelivered"], true);
    assert_eq!(got[1]["id"], after["signal_id"]);
}

#[tokio::test]
async fn the_header_is_checked_and_others_sessions_are_refused() {
    let bus = Bus::start().await;
    let bob = bus.register("bob").await;
    let eve = bus.register("eve").await;
    let sid = open(&bus, &bob).await;
    let (s, v) = call_with(&bus, &eve, &sid, "GET", "/v1/agents", None).await;
    assert_eq!(s, 404, "{v}");
    let (s, _) = bus.call("DELETE", Some(&eve), &format!("/v1/sessions/{sid}"), None).await;
    assert_eq!(s, 404);
    let (s, v) = call_with(&bus, &bob, "nope", "GET", "/v1/agents", None).await;
    assert_eq!((s, v["error"]["code"].as_str()), (400, Some("invalid_request")));
    let (s, _) = call_with(&bus, ADMIN, &sid, "GET", "/v1/agents", None).await;
    assert_eq!(s, 403);
    let (s, v) = bus.call("POST", Some(&bob), "/v1/sessions", Some(json!({"kind": "robot"}))).await;
    assert_eq!(s, 400, "{v}");
}

#[tokio::test]
async fn a_silent_session_turns_stale_then_closes() {
    let stale = Duration::from_millis(400);
    let bus = Bus::with(|c| c.stale_after = stale).await;
    let alice = bus.register("alice").await;
    let bob = bus.register("bob").await;
    let sid = open(&bus, &bob).await;
    // Calls keep it available past the threshold.
    for _ in 0..4 {
        tokio::time::sleep(stale / 2).await;
        let (s, _) = call_with(&bus, &bob, &sid, "GET", "/v1/agents", None).await;
        assert_eq!(s, 200);
    }
    let (_, v) = bus.send(&alice, json!({"to": "bob", "type": "StatusUpdate"})).await;
    assert_eq!(v["recipient_state"], "available", "{v}");
    bus.until_state("bob", "not_available_stale").await;
    let (s, v) = bus.send(&alice, json!({"to": "bob", "type": "Question"})).await;
    assert_eq!((s, v["error"]["recipient_state"].as_str()), (409, Some("not_available_stale")), "{v}");
    let closed = eventually(WAIT, || async {
        let (_, v) = bus.send(&alice, json!({"to": "bob", "type": "StatusUpdate"})).await;
        v["recipient_state"] == "not_available_offline"
    })
    .await;
    assert!(closed, "closed after twice the stale threshold");
    let (s, _) = call_with(&bus, &bob, &sid, "GET", "/v1/agents", None).await;
    assert_eq!(s, 404);
}

#[tokio::test]
async fn a_dead_nodes_ws_session_is_closed_by_a_live_node() {
    let stale = Duration::from_millis(300);
    let bus = Bus::with(|c| c.stale_after = stale).await;
    let alice = bus.register("alice").await;
    bus.register("bob").await;
    // A session another process recorded and then never heartbeated nor closed (it crashed).
    let sid = Uuid::new_v4();
    let body = EventBody::SessionOpened(SessionOpened {
        session_id: sid,
        identity: "bob".into(),
        kind: SessionKind::Daemon,
        surface: Surface::Ws,
        node: "node-gone".into(),
    });
    bus.log
        .append(&Event::new("default", Some("bob".into()), Utc::now(), body), bus::log::Expect::LastSubjectSeq(0))
        .await
        .unwrap();
    let seen = eventually(WAIT, || async {
        let (_, v) = bus.send(&alice, json!({"to": "bob", "type": "StatusUpdate"})).await;
        v["recipient_state"] != "not_available_offline"
    })
    .await;
    assert!(seen, "the node learns of the session from the stream");
    let closed = eventually(WAIT, || async {
        let (_, v) = bus.send(&alice, json!({"to": "bob", "type": "StatusUpdate"})).await;
        v["recipient_state"] == "not_available_offline"
    })
    .await;
    assert!(closed);
    let subject = bus.log.subjects().of("default", bus::event::Entity::Session(sid));
    let events = bus.log.read_subject(&subject).await.unwrap();
    let closes = events.iter().filter(|s| matches!(s.event.body, EventBody::SessionClosed(_))).count();
    assert_eq!(closes, 1, "exactly one close recorded");
}
