//! Identity: registration, admin-only calls, tenant isolation, impersonation, token rotation.

use std::time::Duration;

use serde_json::json;

use crate::support::{Bus, ADMIN, WAIT};

#[tokio::test]
async fn registration_is_admin_only_and_unique() {
    let bus = Bus::start().await;
    let alice = bus.register("alice").await;
    assert!(alice.starts_with("sb_") && alice.len() >= 3 + 64);
    let (s, v) = bus.call("POST", Some(ADMIN), "/v1/agents", Some(json!({"identity": "alice"}))).await;
    assert_eq!((s, v["error"]["code"].as_str()), (409, Some("already_registered")));
    let (s, _) = bus.call("POST", Some(&alice), "/v1/agents", Some(json!({"identity": "eve"}))).await;
    assert_eq!(s, 403);
    let (s, _) = bus.call("POST", None, "/v1/agents", Some(json!({"identity": "eve"}))).await;
    assert_eq!(s, 401);
    let (s, v) = bus.call("POST", Some(ADMIN), "/v1/agents", Some(json!({"identity": ".bad"}))).await;
    assert_eq!((s, v["error"]["code"].as_str()), (400, Some("invalid_request")));
    let (s, v) = bus.call("POST", Some(ADMIN), "/v1/agents", Some(json!({"identity": "x", "tenant": "Bad"}))).await;
    assert_eq!((s, v["error"]["code"].as_str()), (400, Some("invalid_request")));
    // The admin is nobody's sender and holds no session.
    let (s, _) = bus.send(ADMIN, json!({"to": "alice", "type": "X"})).await;
    assert_eq!(s, 403);
    let (s, v) = bus.call("GET", Some(ADMIN), "/v1/agents", None).await;
    assert_eq!(s, 200);
    assert_eq!(v["agents"][0]["identity"], "alice");
    assert_eq!(v["agents"][0]["state"], "not_available_offline");
}

#[tokio::test]
async fn tenants_are_isolated() {
    let bus = Bus::start().await;
    let a1 = bus.register_in("t1", "alice").await;
    let b1 = bus.register_in("t1", "bob").await;
    let b2 = bus.register_in("t2", "bob").await;
    let a2 = bus.register_in("t2", "alice").await;
    let mut ws1 = bus.connect(&b1).await;
    let mut ws2 = bus.connect(&b2).await;
    assert_eq!(ws1.welcome["tenant"], "t1");
    let (s, v) = bus.send(&a1, json!({"to": "bob", "type": "Question"})).await;
    assert_eq!(s, 200, "{v}");
    let id = v["signal_id"].as_str().unwrap().to_string();
    assert_eq!(ws1.next_signal(WAIT).await.unwrap()["id"], json!(id));
    assert!(ws2.next_signal(Duration::from_millis(300)).await.is_none(), "t2's bob must not see t1's signal");
    // t2's alice (same name) cannot read or recall t1's alice's signal.
    let (s, _) = bus.call("GET", Some(&a2), &format!("/v1/signals/{id}"), None).await;
    assert_eq!(s, 404);
    assert_eq!(bus.recall(&a2, &id).await.0, 404);
    let (s, _) = bus.send(&a1, json!({"to": "carol", "type": "X"})).await;
    assert_eq!(s, 404);
    bus.register_in("t2", "carol").await;
    let (s, v) = bus.send(&a1, json!({"to": "carol", "type": "X"})).await;
    assert_eq!((s, v["error"]["code"].as_str()), (404, Some("unknown_recipient")), "t2's carol is not in t1");
    let (_, v) = bus.call("GET", Some(&a1), "/v1/agents", None).await;
    assert_eq!(v["agents"].as_array().unwrap().len(), 2);
    let (s, _) = bus.call("GET", Some(&a1), "/v1/agents?tenant=t2", None).await;
    assert_eq!(s, 403);
}

#[tokio::test]
async fn impersonation_is_rejected_over_http_and_ws() {
    let bus = Bus::start().await;
    let alice = bus.register("alice").await;
    bus.register("bob").await;
    let (s, v) = bus.send(&alice, json!({"to": "bob", "type": "X", "from": "bob"})).await;
    assert_eq!((s, v["error"]["code"].as_str()), (400, Some("invalid_request")));
    let mut ws = bus.connect(&alice).await;
    let r = ws.request(json!({"op": "send", "to": "bob", "type": "X", "from": "bob"})).await;
    assert_eq!(r["ok"], false);
    assert_eq!(r["error"]["code"], "invalid_request");
    let r = ws.request(json!({"op": "send", "to": "bob", "type": "StatusUpdate"})).await;
    assert_eq!(r["ok"], true);
    let id = r["result"]["signal_id"].as_str().unwrap();
    let (_, row) = bus.call("GET", Some(&alice), &format!("/v1/signals/{id}"), None).await;
    assert_eq!(row["from_identity"], "alice");
}

#[tokio::test]
async fn rotation_rejects_the_old_token_at_once_and_closes_its_sessions() {
    let bus = Bus::start().await;
    let old = bus.register("alice").await;
    let mut ws = bus.connect(&old).await;
    let (s, v) = bus.call("POST", Some(&old), "/v1/agents/alice/token", None).await;
    assert_eq!(s, 403, "{v}");
    let (s, v) = bus.call("POST", Some(ADMIN), "/v1/agents/alice/token?tenant=default", None).await;
    assert_eq!(s, 200, "{v}");
    let new = v["token"].as_str().unwrap().to_string();
    assert_ne!(new, old);
    let (s, _) = bus.call("GET", Some(&old), "/v1/agents", None).await;
    assert_eq!(s, 401, "the old token stops working immediately");
    let (s, _) = bus.call("GET", Some(&new), "/v1/agents", None).await;
    assert_eq!(s, 200);
    assert_eq!(ws.closed_code(WAIT).await, Some(1008));
    let (s, _) = bus.call("POST", Some(ADMIN), "/v1/agents/nobody/token", None).await;
    assert_eq!(s, 404);
    // A session with the new token works; the old one cannot open one.
    let fresh = bus.connect(&new).await;
    assert_eq!(fresh.welcome["identity"], "alice");
    let r = tokio_tungstenite::connect_async(format!("{}?token={old}", bus.ws_url)).await;
    assert!(r.is_err(), "upgrade with a rotated token must fail");
}
