//! Scoped, expiring and tenant admin tokens (CONTRACT §17): the scope table held on every HTTP
//! route, WebSocket op and MCP tool; revocation and expiry closing sessions; a session without
//! `receive` never pushed to; tenant admins kept in their tenant; no secret on the stream.

use std::time::Duration;

use bus::log::SharedLog;
use bus::scope::Scope;
use gateway::scopes::{self, Need};
use serde_json::{json, Value};

use crate::mcp::{initialize, post};
use crate::support::{Bus, ADMIN, WAIT};

async fn issue(bus: &Bus, identity: &str, body: Value) -> Value {
    let (s, v) = bus.call("POST", Some(ADMIN), &format!("/v1/agents/{identity}/tokens"), Some(body)).await;
    assert_eq!(s, 201, "{v}");
    v
}

async fn token_with(bus: &Bus, identity: &str, scopes: &[&str]) -> String {
    issue(bus, identity, json!({"scopes": scopes})).await["token"].as_str().unwrap().to_string()
}

/// A concrete path for a routed one.
fn concrete(path: &str) -> String {
    path.replace("{identity}", "bob")
        .replace("{id}", "6f1c1a9e-59b5-4a55-9c0e-3a4f3d1c0b11")
        .replace("{token_id}", "6f1c1a9e-59b5-4a55-9c0e-3a4f3d1c0b12")
        .replace("{name}", "%40crew")
        .replace("{plugin}", "alice")
}

fn refused_for(v: &Value) -> Option<String> {
    (v["error"]["code"] == "forbidden").then(|| v["error"]["scope"].as_str().unwrap_or("").to_string())
}

#[tokio::test]
async fn every_route_op_and_tool_is_held_to_the_scope_table() {
    let bus = Bus::start().await;
    bus.register("alice").await;
    bus.register("bob").await;
    for scope in Scope::ALL {
        let token = token_with(&bus, "alice", &[scope.as_str()]).await;
        for (method, path, need) in scopes::HTTP.iter().filter(|(_, p, _)| p.starts_with("/v1/") && *p != "/v1/ws") {
            let (status, v) = bus.call(method, Some(&token), &concrete(path), Some(json!({}))).await;
            match need {
                Need::Scope(s) if *s == scope => {
                    assert!(refused_for(&v).is_none_or(|s| s.is_empty()), "{scope}: {method} {path} refused: {v}")
                }
                Need::Scope(s) => {
                    assert_eq!((status, refused_for(&v)), (403, Some(s.to_string())), "{scope}: {method} {path}: {v}")
                }
                _ => assert_eq!(status, 403, "{scope}: an agent token on the admin route {method} {path}: {v}"),
            }
        }
        let mut ws = bus.connect(&token).await;
        let ops = [
            ("send", json!({"op": "send", "to": "bob", "type": "StatusUpdate"})),
            ("recall", json!({"op": "recall", "signal_id": "6f1c1a9e-59b5-4a55-9c0e-3a4f3d1c0b11"})),
            ("ack", json!({"op": "ack", "signal_ids": ["6f1c1a9e-59b5-4a55-9c0e-3a4f3d1c0b11"]})),
            ("fact", json!({"op": "fact", "plugin": "alice", "fact_type": "x", "state": {}})),
            (
                "directive get",
                json!({"op": "directive", "action": "get", "directive_id": "6f1c1a9e-59b5-4a55-9c0e-3a4f3d1c0b11"}),
            ),
            (
                "directive start|progress|complete|fail|reject|cancel",
                json!({"op": "directive", "action": "start", "directive_id": "6f1c1a9e-59b5-4a55-9c0e-3a4f3d1c0b11"}),
            ),
        ];
        for (name, frame) in ops {
            let r = ws.request(frame).await;
            match scopes::need_ws(name) {
                Need::Scope(s) if s == scope => assert!(refused_for(&r).is_none(), "{scope}: ws {name}: {r}"),
                Need::Scope(s) => assert_eq!(refused_for(&r), Some(s.to_string()), "{scope}: ws {name}: {r}"),
                other => panic!("{other:?}"),
            }
        }
        ws.close().await;
        // MCP: the tool is listed, and answers forbidden naming the scope.
        let r = post(&bus, Some(&token), None, initialize().to_string()).await;
        assert_eq!(r.status(), 200);
        let session = r.headers()["mcp-session-id"].to_str().unwrap().to_string();
        let call = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
            "params": {"name": "check_inbox", "arguments": {}}});
        let answer = rpc_result(post(&bus, Some(&token), Some(&session), call.to_string()).await).await;
        let text = answer["content"][0]["text"].as_str().unwrap_or_default().to_string();
        assert_eq!(answer["isError"] == true, scope != Scope::Receive, "{scope}: check_inbox: {answer}");
        if scope != Scope::Receive {
            assert!(text.contains("receive"), "{answer}");
        }
    }
}

/// The JSON-RPC `result` of an MCP answer, plain JSON or server-sent events.
async fn rpc_result(r: reqwest::Response) -> Value {
    let text = r.text().await.unwrap();
    let json = text.lines().filter_map(|l| l.strip_prefix("data:")).map(str::trim).last().unwrap_or(&text).to_string();
    let v: Value = serde_json::from_str(&json).unwrap_or_else(|_| panic!("{text}"));
    v["result"].clone()
}

#[tokio::test]
async fn an_issued_token_works_until_revoked_and_its_session_closes_with_1008() {
    let bus = Bus::start().await;
    let alice = bus.register("alice").await;
    bus.register("bob").await;
    let issued = issue(&bus, "alice", json!({"scopes": ["send", "read"], "label": "ci job"})).await;
    let token = issued["token"].as_str().unwrap().to_string();
    assert_eq!(issued["scopes"], json!(["send", "read"]));
    assert_eq!(issued["expires_at"], Value::Null);
    let id = issued["token_id"].as_str().unwrap().to_string();

    let (s, list) = bus.call("GET", Some(ADMIN), "/v1/agents/alice/tokens", None).await;
    assert_eq!(s, 200, "{list}");
    let tokens = list["tokens"].as_array().unwrap();
    assert_eq!(tokens[0]["token_id"], "registration");
    assert_eq!(tokens[1]["token_id"], id.as_str());
    assert_eq!(tokens[1]["label"], "ci job");
    assert!(!list.to_string().contains(&token) && !list.to_string().contains(&alice), "no secret in a list");

    assert_eq!(bus.send(&token, json!({"to": "bob", "type": "StatusUpdate"})).await.0, 200);
    let mut ws = bus.connect(&token).await;
    // A rotation replaces only the registration token.
    let (s, _) = bus.call("POST", Some(ADMIN), "/v1/agents/alice/token", None).await;
    assert_eq!(s, 200);
    assert_eq!(bus.send(&token, json!({"to": "bob", "type": "StatusUpdate"})).await.0, 200);

    let (s, v) = bus.call("DELETE", Some(ADMIN), &format!("/v1/agents/alice/tokens/{id}"), None).await;
    assert_eq!((s, &v["revoked"]), (200, &json!(true)), "{v}");
    assert_eq!(ws.closed_code(WAIT).await, Some(1008));
    let (s, v) = bus.send(&token, json!({"to": "bob", "type": "StatusUpdate"})).await;
    assert_eq!((s, v["error"]["message"].as_str()), (401, Some("token revoked")), "{v}");
    // Idempotent; the registration token is rotated, not revoked; an unknown id is 404.
    assert_eq!(bus.call("DELETE", Some(ADMIN), &format!("/v1/agents/alice/tokens/{id}"), None).await.0, 200);
    assert_eq!(bus.call("DELETE", Some(ADMIN), "/v1/agents/alice/tokens/registration", None).await.0, 400);
    let unknown = "/v1/agents/alice/tokens/6f1c1a9e-59b5-4a55-9c0e-3a4f3d1c0b19";
    assert_eq!(bus.call("DELETE", Some(ADMIN), unknown, None).await.0, 404);
    assert_no_secret_on_the_stream(&bus.log, &[&token, &alice]).await;
}

async fn assert_no_secret_on_the_stream(log: &SharedLog, secrets: &[&str]) {
    let last = log.last_seq().await.unwrap();
    let events = log.read(1, last as usize + 1).await.unwrap();
    for s in events {
        let text = format!("{:?}", s.event);
        for secret in secrets {
            assert!(!text.contains(secret), "a token is on the stream: {text}");
        }
    }
}

#[tokio::test]
async fn an_expiring_token_stops_at_its_expiry_and_closes_its_session() {
    let bus = Bus::start().await;
    bus.register("alice").await;
    bus.register("bob").await;
    let issued = issue(&bus, "alice", json!({"expires_in_seconds": 2})).await;
    let token = issued["token"].as_str().unwrap().to_string();
    assert!(issued["expires_at"].is_string(), "{issued}");
    let mut ws = bus.connect(&token).await;
    assert_eq!(bus.send(&token, json!({"to": "bob", "type": "StatusUpdate"})).await.0, 200);
    assert_eq!(ws.closed_code(Duration::from_secs(5)).await, Some(1008));
    let (s, v) = bus.send(&token, json!({"to": "bob", "type": "StatusUpdate"})).await;
    assert_eq!((s, v["error"]["message"].as_str()), (401, Some("token expired")), "{v}");
    let (_, list) = bus.call("GET", Some(ADMIN), "/v1/agents/alice/tokens", None).await;
    assert_eq!(list["tokens"][1]["expired"], true, "{list}");
}

#[tokio::test]
async fn a_session_without_receive_is_never_pushed_to_and_makes_nobody_available() {
    let bus = Bus::start().await;
    let alice = bus.register("alice").await;
    bus.register("bob").await;
    let send_only = token_with(&bus, "bob", &["send", "read"]).await;
    let mut ws = bus.connect(&send_only).await;
    let r = ws.request(json!({"op": "send", "to": "alice", "type": "StatusUpdate"})).await;
    assert_eq!(r["ok"], true, "{r}");
    assert_eq!(bus.state_of("bob").await, "not_available_offline");
    let (s, v) = bus.send(&alice, json!({"to": "bob", "type": "StatusUpdate"})).await;
    assert_eq!((s, v["delivered"].as_bool()), (200, Some(false)), "queued, not pushed: {v}");
    assert!(ws.next_signal(Duration::from_millis(500)).await.is_none());
    let (s, v) = bus.send(&alice, json!({"to": "bob", "type": "Blocker", "delivery_class": "sync"})).await;
    assert_eq!((s, v["error"]["code"].as_str()), (409, Some("recipient_unavailable")), "{v}");
    // A piggyback header is receiving too.
    let r = bus.http.get(format!("{}/v1/agents", bus.base)).bearer_auth(&send_only);
    let r = r.header("x-signalbus-session", "6f1c1a9e-59b5-4a55-9c0e-3a4f3d1c0b11").send().await.unwrap();
    assert_eq!(r.status(), 403);
    assert_eq!(r.json::<Value>().await.unwrap()["error"]["scope"], "receive");
}

#[tokio::test]
async fn a_tenant_admin_manages_its_tenant_only() {
    let bus = Bus::start().await;
    let (s, v) =
        bus.call("POST", Some(ADMIN), "/v1/admin/tokens", Some(json!({"tenant": "acme", "label": "ops"}))).await;
    assert_eq!(s, 201, "{v}");
    let acme = v["token"].as_str().unwrap().to_string();
    let id = v["token_id"].as_str().unwrap().to_string();
    let (s, v) = bus.call("POST", Some(&acme), "/v1/agents", Some(json!({"identity": "wile"}))).await;
    assert_eq!((s, v["tenant"].as_str()), (200, Some("acme")), "its own tenant by default: {v}");
    let (s, _) = bus.call("POST", Some(&acme), "/v1/agents/wile/tokens?tenant=acme", Some(json!({}))).await;
    assert_eq!(s, 201);
    for (method, path, body) in [
        ("POST", "/v1/agents", Some(json!({"tenant": "default", "identity": "x"}))),
        ("GET", "/v1/agents?tenant=default", None),
        ("POST", "/v1/agents/wile/tokens?tenant=default", Some(json!({}))),
        ("POST", "/v1/admin/rebuild", None),
        ("POST", "/v1/admin/tokens", Some(json!({"tenant": "acme"}))),
        ("POST", "/v1/admin/signals/expire", Some(json!({"tenant": "default", "to": "bob"}))),
    ] {
        let (s, v) = bus.call(method, Some(&acme), path, body).await;
        assert_eq!((s, v["error"]["code"].as_str()), (403, Some("forbidden")), "{method} {path}: {v}");
    }
    let (_, list) = bus.call("GET", Some(&acme), "/v1/admin/tokens", None).await;
    assert_eq!(list["tokens"].as_array().unwrap().len(), 1, "{list}");
    assert_eq!(bus.call("DELETE", Some(ADMIN), &format!("/v1/admin/tokens/{id}"), None).await.0, 200);
    let (s, v) = bus.call("GET", Some(&acme), "/v1/agents", None).await;
    assert_eq!((s, v["error"]["message"].as_str()), (401, Some("token revoked")), "{v}");
}

#[tokio::test]
async fn bad_token_requests_are_refused_with_clear_errors_and_append_nothing() {
    let bus = Bus::start().await;
    bus.register("alice").await;
    let before = bus.log.last_seq().await.unwrap();
    for (body, needle) in [
        (json!({"scopes": ["send", "admin"]}), "unknown scope \"admin\""),
        (json!({"scopes": []}), "at least one scope"),
        (json!({"scopes": "send"}), "list of scope names"),
        (json!({"expires_in_seconds": 0}), "expires_in_seconds"),
        (json!({"expires_in_seconds": -5}), "expires_in_seconds"),
        (json!({"label": "x".repeat(129)}), "label"),
        (json!({"lifetime": 5}), "unknown field"),
    ] {
        let (s, v) = bus.call("POST", Some(ADMIN), "/v1/agents/alice/tokens", Some(body.clone())).await;
        assert_eq!(s, 400, "{body}: {v}");
        assert!(v["error"]["message"].as_str().unwrap().contains(needle), "{body}: {v}");
    }
    assert_eq!(bus.call("POST", Some(ADMIN), "/v1/agents/nobody/tokens", Some(json!({}))).await.0, 404);
    assert_eq!(bus.call("POST", Some(ADMIN), "/v1/admin/tokens", Some(json!({}))).await.0, 400);
    assert_eq!(bus.log.last_seq().await.unwrap(), before, "nothing appended");
}
