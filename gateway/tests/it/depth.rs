//! Nesting depth at the edge, and drains that hand over exactly what they recorded: payloads
//! deeper than the limit are refused naming it; payloads at the limit reach the recipient by
//! every drain (HTTP inbox, piggyback, WebSocket startup); and a signal already on the stream
//! with a payload deeper than any default parser reads is still in the drain's answer.

use bus::catalog::{Category, DeliveryClass};
use bus::event::{Event, EventBody, PublishPath, RecipientState, SignalSent};
use bus::log::Expect;
use chrono::{Duration as Ttl, Utc};
use serde_json::{json, Value};
use uuid::Uuid;

use crate::support::{Bus, WAIT};

/// The accepted nesting depth (docs/http.md, docs/protocol.md).
const LIMIT: usize = 64;

/// A value `levels` arrays/objects deep, alternating, innermost `{"leaf": true}`.
fn nested(levels: usize) -> Value {
    (1..levels).fold(json!({"leaf": true}), |inner, i| if i % 2 == 0 { json!({ "k": inner }) } else { json!([inner]) })
}

async fn piggyback_call(bus: &Bus, token: &str, session: &str, path: &str) -> (u16, String) {
    let resp = bus
        .http
        .get(format!("{}{path}", bus.base))
        .bearer_auth(token)
        .header("X-Signalbus-Session", session)
        .send()
        .await
        .unwrap();
    (resp.status().as_u16(), resp.text().await.unwrap())
}

#[tokio::test]
async fn payloads_and_states_deeper_than_the_limit_are_refused_naming_it() {
    let bus = Bus::start().await;
    let alice = bus.register("alice").await;
    bus.register("bob").await;
    let (s, v) = bus.send(&alice, json!({"to": "bob", "type": "X", "payload": nested(LIMIT + 1)})).await;
    assert_eq!((s, v["error"]["code"].as_str()), (400, Some("invalid_request")), "{v}");
    let msg = v["error"]["message"].as_str().unwrap();
    assert!(msg.starts_with("payload is nested more than 64 levels"), "{msg}");

    let mut ws = bus.connect(&alice).await;
    let r = ws.request(json!({"op": "send", "to": "bob", "type": "X", "payload": nested(LIMIT + 1)})).await;
    assert_eq!(r["error"]["code"], "invalid_request", "{r}");

    let state = json!({ "s": nested(LIMIT) });
    let (s, v) = bus
        .call("POST", Some(&alice), "/v1/plugins/alice/facts", Some(json!({"fact_type": "t", "state": state})))
        .await;
    assert_eq!((s, v["error"]["code"].as_str()), (400, Some("invalid_request")), "{v}");
    assert!(v["error"]["message"].as_str().unwrap().starts_with("state is nested more than 64"), "{v}");
}

#[tokio::test]
async fn payloads_at_the_limit_reach_the_recipient_through_every_drain() {
    let bus = Bus::start().await;
    let alice = bus.register("alice").await;
    let bob = bus.register("bob").await;
    let payload = nested(LIMIT);
    let send = |n: u32| {
        let mut p = payload.clone();
        p[0]["n"] = json!(n);
        bus.send(&alice, json!({"to": "bob", "type": "StatusUpdate", "payload": p}))
    };

    // HTTP inbox drain.
    let (s, sent) = send(1).await;
    assert_eq!(s, 200, "{sent}");
    let (s, v) = bus.call("GET", Some(&bob), "/v1/inbox?drain=true", None).await;
    assert_eq!(s, 200, "{v}");
    assert_eq!(v["signals"][0]["id"], sent["signal_id"], "{v}");
    assert_eq!(v["signals"][0]["payload"][0]["n"], 1);

    // Piggyback drain, on an answer of any call.
    let (_, opened) = bus.call("POST", Some(&bob), "/v1/sessions", None).await;
    let sid = opened["session_id"].as_str().unwrap().to_string();
    let (_, sent) = send(2).await;
    let (s, text) = piggyback_call(&bus, &bob, &sid, "/v1/agents").await;
    assert_eq!(s, 200, "{text}");
    let v: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(v["signals"][0]["id"], sent["signal_id"], "{v}");
    assert_eq!(v["signals"][0]["payload"][0]["n"], 2);
    bus.call("POST", Some(&bob), "/v1/inbox/ack", Some(json!({"signal_ids": [sent["signal_id"]]}))).await;
    bus.call("DELETE", Some(&bob), &format!("/v1/sessions/{sid}"), None).await;

    // WebSocket startup drain.
    let (_, sent) = send(3).await;
    let mut ws = bus.connect(&bob).await;
    let got = ws.next_signal(WAIT).await.expect("drained on connect");
    assert_eq!(got["id"], sent["signal_id"]);
    assert_eq!(got["payload"][0]["n"], 3);
}

/// Appends a `signal.sent` for bob straight to the stream, as an older bus would have.
async fn queued_before_the_limit(bus: &Bus, payload: String) -> Uuid {
    let now = Utc::now();
    let sent = SignalSent {
        signal_id: Uuid::new_v4(),
        from: "alice".into(),
        to: "bob".into(),
        signal_type: "StatusUpdate".into(),
        category: Category::Info,
        priority: 0,
        payload,
        delivery_class: DeliveryClass::Async,
        created_at: now,
        expires_at: now + Ttl::hours(1),
        recipient_state: RecipientState::NotAvailableOffline,
        publish_path: PublishPath::QueuedOffline,
        correlation_id: None,
        dedupe_key: None,
        redacted: vec![],
        resolved_to_session: None,
        pushed_to: None,
        fanout_id: None,
        deliver_at: None,
    };
    let id = sent.signal_id;
    let event = Event::new("default", Some("alice".into()), now, EventBody::SignalSent(Box::new(sent)));
    bus.log.append(&event, Expect::LastSubjectSeq(0)).await.unwrap();
    id
}

/// A signal already on the stream whose payload is deeper than serde_json's default recursion
/// limit allows inside an answer (accepted before the edge had a limit): every delivery the
/// drain records is in its answer, verbatim.
#[tokio::test]
async fn a_drain_answers_every_delivery_it_recorded_whatever_the_payload() {
    let bus = Bus::start().await;
    bus.register("alice").await;
    let bob = bus.register("bob").await;
    let deep = format!("{}{}", "[".repeat(127), "]".repeat(127));
    let id = queued_before_the_limit(&bus, deep.clone()).await;
    let (s, text) = {
        let (s, v) = bus.call("GET", Some(&bob), "/v1/inbox?drain=true", None).await;
        (s, v.as_str().map(str::to_string).unwrap_or_else(|| v.to_string()))
    };
    assert_eq!(s, 200, "{text}");
    assert!(text.contains(&id.to_string()), "the inbox drain answers what it delivered: {text}");
    assert!(text.contains(&format!(r#""payload":{deep}"#)), "verbatim: {text}");

    let (_, opened) = bus.call("POST", Some(&bob), "/v1/sessions", None).await;
    let sid = opened["session_id"].as_str().unwrap().to_string();
    let id = queued_before_the_limit(&bus, deep.clone()).await;
    let (s, text) = piggyback_call(&bus, &bob, &sid, "/v1/agents").await;
    assert_eq!(s, 200, "{text}");
    assert!(text.contains(&id.to_string()), "the piggyback drain answers what it delivered: {text}");
    let (_, row) = bus.call("GET", Some(&bob), &format!("/v1/signals/{id}"), None).await;
    let row = row.as_str().map(str::to_string).unwrap_or_else(|| row.to_string());
    assert!(row.contains(r#""delivered_via":"piggyback""#), "{row}");
}
