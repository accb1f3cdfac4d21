//! Removing an agent (`DELETE /v1/agents/{identity}`): the token stops at once, sessions close
//! (1008 for WebSockets, recorded for piggyback ones), sends become `unknown_recipient`, pending
//! signals expire with `expired_at` stamped, history stays, and the identity can be registered
//! again with a new token. (Across two nodes: `cluster.rs`.)

use bus::event::EventBody;
use serde_json::json;

use crate::support::{eventually, Bus, ADMIN, WAIT};

async fn session_close_reasons(bus: &Bus) -> Vec<String> {
    let events = bus.log.read(1, 100_000).await.unwrap();
    events
        .iter()
        .filter_map(|s| match &s.event.body {
            EventBody::SessionClosed(c) => Some(c.reason.clone()),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn removal_stops_the_token_closes_sessions_and_expires_pending_signals() {
    let bus = Bus::start().await;
    let alice = bus.register("alice").await;
    let bob = bus.register("bob").await;
    let carol = bus.register("carol").await;
    let mut pending = Vec::new();
    for i in 0..3 {
        let (s, v) = bus.send(&alice, json!({"to": "bob", "type": "TaskAssigned", "payload": {"i": i}})).await;
        assert_eq!(s, 200, "{v}");
        assert_eq!(v["publish_path"], "queued_offline");
        pending.push(v["signal_id"].as_str().unwrap().to_string());
    }
    // A signal from bob stays as it is: only signals *to* the removed agent expire.
    let (s, from_bob) = bus.send(&bob, json!({"to": "carol", "type": "StatusUpdate"})).await;
    assert_eq!(s, 200, "{from_bob}");
    let (s, pb) = bus.call("POST", Some(&bob), "/v1/sessions", Some(json!({"kind": "shim"}))).await;
    assert_eq!(s, 200, "{pb}");

    let (s, v) = bus.call("DELETE", Some(&alice), "/v1/agents/bob", None).await;
    assert_eq!(s, 403, "agents may not remove agents: {v}");
    let (s, v) = bus.call("DELETE", Some(ADMIN), "/v1/agents/bob", None).await;
    assert_eq!(s, 200, "{v}");
    assert_eq!(v["identity"], "bob");
    assert_eq!(v["tenant"], "default");
    assert_eq!(v["signals_expired"], 3, "{v}");
    assert!(v["removed_at"].is_string(), "{v}");

    // The token stops at once, on HTTP and on the WebSocket upgrade.
    let (s, v) = bus.call("GET", Some(&bob), "/v1/inbox", None).await;
    assert_eq!(s, 401, "{v}");
    let r = tokio_tungstenite::connect_async(format!("{}?token={bob}", bus.ws_url)).await;
    assert!(r.is_err(), "upgrade with a removed agent's token must fail");
    // Sends to it are unknown_recipient; it leaves the roster; a second removal finds nothing.
    let (s, v) = bus.send(&alice, json!({"to": "bob", "type": "StatusUpdate"})).await;
    assert_eq!((s, v["error"]["code"].as_str()), (404, Some("unknown_recipient")), "{v}");
    let (_, roster) = bus.call("GET", Some(ADMIN), "/v1/agents", None).await;
    let names: Vec<&str> =
        roster["agents"].as_array().unwrap().iter().map(|a| a["identity"].as_str().unwrap()).collect();
    assert_eq!(names, ["alice", "carol"]);
    let (s, v) = bus.call("DELETE", Some(ADMIN), "/v1/agents/bob", None).await;
    assert_eq!((s, v["error"]["code"].as_str()), (404, Some("not_found")), "{v}");

    // History stays: each pending signal is expired (not deleted), the one bob sent is intact.
    for id in &pending {
        let path = format!("/v1/signals/{id}");
        let expired = eventually(WAIT, || async {
            let (s, row) = bus.call("GET", Some(&alice), &path, None).await;
            s == 200 && row["expired_at"].is_string() && row["delivered_at"].is_null()
        })
        .await;
        assert!(expired, "{id} not expired");
    }
    let path = format!("/v1/signals/{}", from_bob["signal_id"].as_str().unwrap());
    let (s, row) = bus.call("GET", Some(&carol), &path, None).await;
    assert_eq!(s, 200, "{row}");
    assert!(row["expired_at"].is_null(), "{row}");
    // The piggyback session was recorded closed, for the removal.
    assert!(session_close_reasons(&bus).await.iter().any(|r| r == "agent_removed"));

    // Registered again: a new token that works, the old one still refused, the old history kept.
    let again = bus.register("bob").await;
    assert_ne!(again, bob);
    let (s, inbox) = bus.call("GET", Some(&again), "/v1/inbox", None).await;
    assert_eq!(s, 200, "{inbox}");
    assert_eq!(inbox["signals"], json!([]), "expired signals are not handed to the new registration");
    let (s, _) = bus.call("GET", Some(&bob), "/v1/inbox", None).await;
    assert_eq!(s, 401);
    let (s, v) = bus.send(&alice, json!({"to": "bob", "type": "TaskAssigned"})).await;
    assert_eq!((s, v["publish_path"].as_str()), (200, Some("queued_offline")), "{v}");
    let (s, v) = bus.call("POST", Some(ADMIN), "/v1/agents", Some(json!({"identity": "bob"}))).await;
    assert_eq!((s, v["error"]["code"].as_str()), (409, Some("already_registered")), "{v}");
}

#[tokio::test]
async fn a_removed_agents_websocket_closes_with_1008() {
    let bus = Bus::start().await;
    let bob = bus.register("bob").await;
    let mut ws = bus.connect(&bob).await;
    let (s, v) = bus.call("DELETE", Some(ADMIN), "/v1/agents/bob?tenant=default", None).await;
    assert_eq!(s, 200, "{v}");
    assert_eq!(v["signals_expired"], 0);
    assert_eq!(ws.closed_code(WAIT).await, Some(1008));
    let recorded =
        eventually(WAIT, || async { session_close_reasons(&bus).await.iter().any(|r| r == "agent_removed") }).await;
    assert!(recorded, "the close is recorded with its reason");
}

#[tokio::test]
async fn removal_is_scoped_to_its_tenant() {
    let bus = Bus::start().await;
    let t1 = bus.register_in("t1", "bob").await;
    let t2 = bus.register_in("t2", "bob").await;
    let (s, v) = bus.call("DELETE", Some(ADMIN), "/v1/agents/bob?tenant=t1", None).await;
    assert_eq!(s, 200, "{v}");
    let (s, _) = bus.call("GET", Some(&t1), "/v1/inbox", None).await;
    assert_eq!(s, 401);
    let (s, _) = bus.call("GET", Some(&t2), "/v1/inbox", None).await;
    assert_eq!(s, 200, "the same identity in another tenant is untouched");
    let (s, v) = bus.call("DELETE", Some(ADMIN), "/v1/agents/bob?tenant=Bad!", None).await;
    assert_eq!((s, v["error"]["code"].as_str()), (400, Some("invalid_request")), "{v}");
}
