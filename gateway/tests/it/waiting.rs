//! Waiting without polling and conversations (CONTRACT §16): `GET /v1/inbox?wait=S` answered
//! when a signal arrives (only its recipient's waiter), empty after S, draining when asked,
//! refusing a bad `wait`, heartbeating the caller's piggyback session, woken by a session's
//! close that leaves signals to redeliver, and answered at once by a graceful stop; `GET /v1/signals?correlation_id=` lists the caller's own signals of one
//! conversation, oldest first.

use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::support::{Bus, ADMIN};

/// `GET path` as `token` (with `session` as `X-Signalbus-Session`), run in the background:
/// (how long it took, status, body).
fn waiter(
    bus: &Bus,
    token: &str,
    session: Option<&str>,
    path: &str,
) -> tokio::task::JoinHandle<(Duration, u16, Value)> {
    let mut req = bus.http.get(format!("{}{path}", bus.base)).bearer_auth(token);
    if let Some(s) = session {
        req = req.header("X-Signalbus-Session", s);
    }
    tokio::spawn(async move {
        let started = Instant::now();
        let resp = req.send().await.unwrap();
        let status = resp.status().as_u16();
        (started.elapsed(), status, resp.json().await.unwrap_or(Value::Null))
    })
}

/// `GET /v1/signals?query` as `token`, which must answer 200.
async fn list(bus: &Bus, token: &str, query: &str) -> Value {
    let (s, v) = bus.call("GET", Some(token), &format!("/v1/signals?{query}"), None).await;
    assert_eq!(s, 200, "{query}: {v}");
    v
}

fn ids(v: &Value) -> Vec<&str> {
    v["signals"].as_array().unwrap().iter().map(|s| s["id"].as_str().unwrap()).collect()
}

#[tokio::test]
async fn a_waiter_is_answered_when_its_signal_arrives_and_only_its_own() {
    let bus = Bus::start().await;
    let alice = bus.register("alice").await;
    let bob = bus.register("bob").await;
    let carol = bus.register("carol").await;
    let bobs = waiter(&bus, &bob, None, "/v1/inbox?wait=30");
    let carols = waiter(&bus, &carol, None, "/v1/inbox?wait=2");
    tokio::time::sleep(Duration::from_millis(300)).await;
    let (s, sent) = bus.send(&alice, json!({"to": "bob", "type": "StatusUpdate", "payload": {"n": 1}})).await;
    assert_eq!(s, 200, "{sent}");
    let (took, status, v) = bobs.await.unwrap();
    assert_eq!(status, 200, "{v}");
    assert_eq!(ids(&v), [sent["signal_id"].as_str().unwrap()]);
    assert!(took < Duration::from_secs(10), "answered at its timeout, not when the signal came: {took:?}");
    // Listed, not delivered: still pending.
    let (_, again) = bus.call("GET", Some(&bob), "/v1/inbox", None).await;
    assert_eq!(ids(&again).len(), 1, "{again}");
    // Carol was not woken by bob's signal: she is answered after her own wait, with nothing.
    let (took, status, v) = carols.await.unwrap();
    assert_eq!((status, &v["signals"]), (200, &json!([])), "{v}");
    assert!(took >= Duration::from_secs(2) && took < Duration::from_secs(10), "{took:?}");
}

#[tokio::test]
async fn a_draining_waiter_delivers_what_it_answers_and_a_bare_one_times_out_empty() {
    let bus = Bus::start().await;
    let alice = bus.register("alice").await;
    let bob = bus.register("bob").await;
    let started = Instant::now();
    let (s, v) = bus.call("GET", Some(&bob), "/v1/inbox?wait=1", None).await;
    assert_eq!((s, &v), (200, &json!({"signals": []})));
    let took = started.elapsed();
    assert!(took >= Duration::from_secs(1) && took < Duration::from_secs(5), "{took:?}");

    let drains = waiter(&bus, &bob, None, "/v1/inbox?wait=30&drain=true");
    tokio::time::sleep(Duration::from_millis(300)).await;
    let (_, sent) = bus.send(&alice, json!({"to": "bob", "type": "Question", "delivery_class": "async"})).await;
    let id = sent["signal_id"].as_str().unwrap();
    let (took, status, v) = drains.await.unwrap();
    assert_eq!((status, ids(&v)), (200, vec![id]), "{v}");
    assert!(took < Duration::from_secs(10), "{took:?}");
    let (_, row) = bus.call("GET", Some(&bob), &format!("/v1/signals/{id}"), None).await;
    assert_eq!(row["delivered_via"], "inbox", "{row}");
    let (_, empty) = bus.call("GET", Some(&bob), "/v1/inbox?drain=true", None).await;
    assert_eq!(empty["signals"], json!([]), "handed out once");
    // Something already pending is answered at once, whatever the wait.
    let (_, sent) = bus.send(&alice, json!({"to": "bob", "type": "StatusUpdate"})).await;
    let started = Instant::now();
    let (_, v) = bus.call("GET", Some(&bob), "/v1/inbox?wait=60", None).await;
    assert_eq!(ids(&v), [sent["signal_id"].as_str().unwrap()]);
    assert!(started.elapsed() < Duration::from_secs(5));
}

#[tokio::test]
async fn a_bad_wait_is_invalid_request_naming_it() {
    let bus = Bus::start().await;
    let bob = bus.register("bob").await;
    for bad in ["61", "1.5", "-1", "soon", ""] {
        let (s, v) = bus.call("GET", Some(&bob), &format!("/v1/inbox?wait={bad}"), None).await;
        assert_eq!((s, v["error"]["code"].as_str()), (400, Some("invalid_request")), "wait={bad}: {v}");
        assert_eq!(v["error"]["message"], "wait must be a whole number of seconds from 0 to 60", "{bad}");
    }
    let (s, _) = bus.call("GET", Some(&bob), "/v1/inbox?wait=0", None).await;
    assert_eq!(s, 200);
}

#[tokio::test]
async fn a_waiting_piggyback_session_stays_available_past_the_stale_threshold() {
    let stale = Duration::from_millis(400);
    let bus = Bus::with(|c| c.stale_after = stale).await;
    let alice = bus.register("alice").await;
    let bob = bus.register("bob").await;
    let (s, v) = bus.call("POST", Some(&bob), "/v1/sessions", Some(json!({"kind": "shim"}))).await;
    assert_eq!(s, 200, "{v}");
    let sid = v["session_id"].as_str().unwrap().to_string();
    let waiting = waiter(&bus, &bob, Some(&sid), "/v1/inbox?wait=20&drain=true");
    // Five stale thresholds and more of nothing but the wait: bob stays available throughout.
    for _ in 0..10 {
        tokio::time::sleep(stale / 2).await;
        assert_eq!(bus.state_of("bob").await, "available");
    }
    let (_, sent) = bus.send(&alice, json!({"to": "bob", "type": "StatusUpdate"})).await;
    assert_eq!(sent["publish_path"], "buffered_for_piggyback", "{sent}");
    let (took, status, v) = waiting.await.unwrap();
    assert_eq!((status, ids(&v)), (200, vec![sent["signal_id"].as_str().unwrap()]), "{v}");
    assert!(took < Duration::from_secs(15), "{took:?}");
    // The session is still open: a call on it is answered.
    let (s, _) = {
        let r = bus.http.get(format!("{}/v1/agents", bus.base)).bearer_auth(&bob).header("X-Signalbus-Session", &sid);
        let r = r.send().await.unwrap();
        (r.status().as_u16(), ())
    };
    assert_eq!(s, 200);
}

#[tokio::test]
async fn a_closing_session_wakes_a_waiter_with_what_it_left_unacked() {
    let bus = Bus::start().await;
    let alice = bus.register("alice").await;
    let bob = bus.register("bob").await;
    let (_, v) = bus.call("POST", Some(&bob), "/v1/sessions", Some(json!({"kind": "shim"}))).await;
    let sid = v["session_id"].as_str().unwrap().to_string();
    let (_, sent) = bus.send(&alice, json!({"to": "bob", "type": "StatusUpdate"})).await;
    let id = sent["signal_id"].as_str().unwrap();
    let r = bus.http.get(format!("{}/v1/agents", bus.base)).bearer_auth(&bob).header("X-Signalbus-Session", &sid);
    let rode: Value = r.send().await.unwrap().json().await.unwrap();
    assert_eq!(ids(&rode), [id], "delivered to the session, not acked");
    let waiting = waiter(&bus, &bob, None, "/v1/inbox?wait=30&drain=true");
    tokio::time::sleep(Duration::from_millis(300)).await;
    let (s, _) = bus.call("DELETE", Some(&bob), &format!("/v1/sessions/{sid}"), None).await;
    assert_eq!(s, 200);
    let (took, status, v) = waiting.await.unwrap();
    assert_eq!((status, ids(&v)), (200, vec![id]), "{v}");
    assert_eq!(v["signals"][0]["redelivered"], true);
    assert!(took < Duration::from_secs(10), "woken by the close, not at the end of the wait: {took:?}");
}

#[tokio::test]
async fn a_graceful_stop_answers_a_waiter_at_once() {
    let mut bus = Bus::start().await;
    let bob = bus.register("bob").await;
    let waiting = waiter(&bus, &bob, None, "/v1/inbox?wait=60&drain=true");
    tokio::time::sleep(Duration::from_millis(300)).await;
    let stopped = Instant::now();
    tokio::time::timeout(Duration::from_secs(10), bus.shutdown()).await.expect("shutdown within 10 s");
    assert!(stopped.elapsed() < Duration::from_secs(5), "the waiter held the stop up: {:?}", stopped.elapsed());
    let (took, status, v) = waiting.await.unwrap();
    assert_eq!((status, &v), (200, &json!({"signals": []})));
    assert!(took < Duration::from_secs(10), "{took:?}");
}

#[tokio::test]
async fn a_conversation_is_the_callers_own_signals_oldest_first() {
    let bus = Bus::start().await;
    let alice = bus.register("alice").await;
    let bob = bus.register("bob").await;
    let carol = bus.register("carol").await;
    let mut sent = Vec::new();
    for (from, to, corr) in [
        (&alice, "bob", Some("t-1")),
        (&bob, "alice", Some("t-1")),
        (&carol, "bob", Some("t-1")),
        (&alice, "bob", Some("t-2")),
        (&alice, "bob", None),
        (&bob, "alice", Some("t-1")),
    ] {
        let mut body = json!({"to": to, "type": "StatusUpdate"});
        if let Some(c) = corr {
            body["correlation_id"] = json!(c);
        }
        let (s, v) = bus.send(from, body).await;
        assert_eq!(s, 200, "{v}");
        sent.push(v["signal_id"].as_str().unwrap().to_string());
    }
    let v = list(&bus, &alice, "correlation_id=t-1").await;
    assert_eq!(
        ids(&v),
        [sent[0].as_str(), sent[1].as_str(), sent[5].as_str()],
        "both roles, oldest first, not carol's"
    );
    assert_eq!(v["next_cursor"], Value::Null);
    let v = list(&bus, &bob, "correlation_id=t-1").await;
    assert_eq!(ids(&v), [sent[0].as_str(), sent[1].as_str(), sent[2].as_str(), sent[5].as_str()]);
    let v = list(&bus, &carol, "correlation_id=t-1").await;
    assert_eq!(ids(&v), [sent[2].as_str()], "only her own");
    let v = list(&bus, &alice, "correlation_id=t-1&role=received").await;
    assert_eq!(ids(&v), [sent[1].as_str(), sent[5].as_str()]);

    // Paged oldest first: each once, in order.
    let mut seen: Vec<String> = Vec::new();
    let mut query = "correlation_id=t-1&limit=2".to_string();
    loop {
        let v = list(&bus, &bob, &query).await;
        seen.extend(ids(&v).into_iter().map(str::to_string));
        match v["next_cursor"].as_str() {
            Some(c) => query = format!("correlation_id=t-1&limit=2&cursor={c}"),
            None => break,
        }
    }
    assert_eq!(seen, [sent[0].as_str(), sent[1].as_str(), sent[2].as_str(), sent[5].as_str()]);

    let long = "x".repeat(65);
    for bad in ["correlation_id=", &format!("correlation_id={long}"), "correlation_id=t-1&role=both"] {
        let (s, v) = bus.call("GET", Some(&alice), &format!("/v1/signals?{bad}"), None).await;
        assert_eq!((s, v["error"]["code"].as_str()), (400, Some("invalid_request")), "{bad}: {v}");
    }
    let (s, _) = bus.call("GET", Some(ADMIN), "/v1/signals?correlation_id=t-1", None).await;
    assert_eq!(s, 403);
}
