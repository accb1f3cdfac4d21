//! The contract's edges, as an attacker probes them: a text frame that is not UTF-8 closes with
//! 1007 and is recorded as a protocol error; an undecodable path parameter and a refused method
//! answer the JSON error body (a refused method also with a piggyback session header, which it
//! neither heartbeats nor drains); the identity `signalbus` is reserved; 429 says when to retry;
//! redaction reads camelCase, `-`, spaces and secret endings, in payloads and fact state alike.

use bus::event::{Entity, EventBody};
use gateway::SendRate;
use reqwest::header::{HeaderMap, ALLOW, CONTENT_TYPE, RETRY_AFTER};
use reqwest::Method;
use serde_json::{json, Value};
use tokio_tungstenite::tungstenite::protocol::frame::coding::{Data, OpCode};
use tokio_tungstenite::tungstenite::protocol::frame::Frame;
use tokio_tungstenite::tungstenite::Message;
use uuid::Uuid;

use crate::support::{eventually, Bus, ADMIN, WAIT};

/// One HTTP call with its headers: (status, headers, body as JSON or `null`).
async fn raw(
    bus: &Bus,
    method: &str,
    path: &str,
    token: Option<&str>,
    session: Option<&str>,
) -> (u16, HeaderMap, Value) {
    let method = Method::from_bytes(method.as_bytes()).unwrap();
    let mut req = bus.http.request(method, format!("{}{path}", bus.base));
    if let Some(t) = token {
        req = req.bearer_auth(t);
    }
    if let Some(s) = session {
        req = req.header("X-Signalbus-Session", s);
    }
    let resp = req.send().await.unwrap();
    let (status, headers) = (resp.status().as_u16(), resp.headers().clone());
    let body = resp.json::<Value>().await.unwrap_or(Value::Null);
    (status, headers, body)
}

fn is_json(h: &HeaderMap) -> bool {
    h.get(CONTENT_TYPE).and_then(|v| v.to_str().ok()).is_some_and(|v| v.starts_with("application/json"))
}

#[tokio::test]
async fn a_text_frame_that_is_not_utf8_closes_with_1007_as_a_protocol_error() {
    let bus = Bus::start().await;
    let alice = bus.register("alice").await;
    let mut ws = bus.connect(&alice).await;
    let sid = Uuid::parse_str(&ws.session_id()).unwrap();
    let frame = Frame::message(vec![b'{', 0xff, 0xfe, b'}'], OpCode::Data(Data::Text), true);
    ws.send_raw(Message::Frame(frame)).await;
    assert_eq!(ws.closed_code(WAIT).await, Some(1007));
    let subject = bus.log.subjects().of("default", Entity::Session(sid));
    let recorded = eventually(WAIT, || async {
        let events = bus.log.read_subject(&subject).await.unwrap();
        events.iter().any(|s| matches!(&s.event.body, EventBody::SessionClosed(c) if c.reason == "protocol_error"))
    })
    .await;
    assert!(recorded, "session.closed with reason protocol_error (the disconnects_total label)");
}

#[tokio::test]
async fn path_parameters_that_are_not_utf8_answer_the_json_error_body() {
    let bus = Bus::start().await;
    let alice = bus.register("alice").await;
    for (method, path, token) in [
        ("GET", "/v1/signals/%FF", &alice),
        ("POST", "/v1/signals/%FF/recall", &alice),
        ("DELETE", "/v1/sessions/%FF", &alice),
        ("GET", "/v1/plugins/%FF/state", &alice),
        ("GET", "/v1/plugins/alice%2F%C3%28/facts", &alice),
        ("POST", "/v1/plugins/%FF/facts", &alice),
        ("POST", "/v1/agents/%FF/token", &ADMIN.to_string()),
    ] {
        let (status, headers, body) = raw(&bus, method, path, Some(token), None).await;
        assert_eq!(status, 400, "{method} {path}: {body}");
        assert!(is_json(&headers), "{method} {path}: {headers:?}");
        assert_eq!(body["error"]["code"], "invalid_request", "{method} {path}: {body}");
        assert!(body["error"]["message"].as_str().unwrap().contains("utf-8"), "{body}");
    }
}

#[tokio::test]
async fn a_refused_method_is_405_with_the_json_error_body_even_with_a_session_header() {
    let bus = Bus::start().await;
    let alice = bus.register("alice").await;
    let bob = bus.register("bob").await;
    for (method, path) in [
        ("PUT", "/v1/signals"),
        ("DELETE", "/v1/inbox"),
        ("PATCH", "/v1/agents"),
        ("TRACE", "/v1/admin/rebuild"),
        ("POST", "/healthz"),
        ("POST", "/v1/ws"),
        ("GET", "/v1/sessions/0f0e0d0c-0b0a-0908-0706-050403020100"),
    ] {
        let (status, headers, body) = raw(&bus, method, path, Some(&alice), None).await;
        assert_eq!(status, 405, "{method} {path}: {body}");
        assert!(is_json(&headers), "{method} {path}: {headers:?}");
        assert_eq!(body["error"]["code"], "invalid_request", "{method} {path}: {body}");
        assert!(headers.get(ALLOW).is_some(), "{method} {path}: no Allow header");
    }

    // With a piggyback session pending a signal: the refused call neither heartbeats nor drains.
    let (s, opened) = bus.call("POST", Some(&bob), "/v1/sessions", None).await;
    assert_eq!(s, 200, "{opened}");
    let sid = opened["session_id"].as_str().unwrap().to_string();
    let (s, sent) = bus.send(&alice, json!({"to": "bob", "type": "StatusUpdate"})).await;
    assert_eq!(s, 200, "{sent}");
    for (token, session) in
        [(Some(bob.as_str()), sid.as_str()), (Some(bob.as_str()), "not-a-session"), (None, sid.as_str())]
    {
        let (status, headers, body) = raw(&bus, "PUT", "/v1/signals", token, Some(session)).await;
        assert_eq!(status, 405, "{session}: {body}");
        assert!(is_json(&headers));
        assert_eq!(body["error"]["code"], "invalid_request", "{body}");
        assert!(body.get("signals").is_none(), "a refused method drained: {body}");
    }
    let (_, inbox) = bus.call("GET", Some(&bob), "/v1/inbox", None).await;
    assert_eq!(inbox["signals"][0]["id"], sent["signal_id"], "still pending: {inbox}");
}

#[tokio::test]
async fn the_identity_signalbus_is_reserved() {
    let bus = Bus::start().await;
    for reserved in ["signalbus", "SignalBus"] {
        let (s, v) = bus.call("POST", Some(ADMIN), "/v1/agents", Some(json!({"identity": reserved}))).await;
        assert_eq!(s, 400, "{reserved}: {v}");
        assert_eq!(v["error"]["code"], "invalid_request");
        assert!(v["error"]["message"].as_str().unwrap().contains("reserved"), "{v}");
    }
    let alice = bus.register("signalbus-fan").await;
    let (s, v) = bus
        .call(
            "POST",
            Some(&alice),
            "/v1/plugins/signalbus%2Fsweeper/facts",
            Some(json!({"fact_type": "t", "state": {}})),
        )
        .await;
    assert_eq!(s, 403, "{v}");
    // Still a well-formed name to send to: it is simply never registered.
    let (s, v) = bus.send(&alice, json!({"to": "signalbus", "type": "X"})).await;
    assert_eq!((s, v["error"]["code"].as_str()), (404, Some("unknown_recipient")), "{v}");
}

#[tokio::test]
async fn a_rate_limited_send_says_when_to_retry() {
    let bus = Bus::with(|c| c.send_rate = Some(SendRate { per_second: 1, burst: 1 })).await;
    let alice = bus.register("alice").await;
    bus.register("bob").await;
    let send = json!({"to": "bob", "type": "StatusUpdate"});
    assert_eq!(bus.send(&alice, send.clone()).await.0, 200);
    let resp = bus.http.post(format!("{}/v1/signals", bus.base)).bearer_auth(&alice).json(&send).send().await.unwrap();
    assert_eq!(resp.status().as_u16(), 429);
    let retry: u64 = resp.headers()[RETRY_AFTER].to_str().unwrap().parse().unwrap();
    assert_eq!(retry, 1, "whole seconds, rounded up, at least 1");
    let body: Value = resp.json().await.unwrap();
    assert_eq!(body["error"]["code"], "rate_limited");
    let ms = body["error"]["retry_after_ms"].as_u64().unwrap();
    assert!((1..=1000).contains(&ms), "{body}");
    // Over the WebSocket the error object carries the same wait.
    let mut ws = bus.connect(&alice).await;
    let mut frame = send.clone();
    frame["op"] = json!("send");
    let r = ws.request(frame).await;
    assert_eq!(r["error"]["code"], "rate_limited", "{r}");
    assert!(r["error"]["retry_after_ms"].as_u64().is_some_and(|ms| ms >= 1), "{r}");
}

/// Secret keys in the forms people write them, the paths the guard reports, and one that stays.
fn secrets() -> (Value, Vec<&'static str>) {
    let doc = json!({
        "apiKey": "k1", "API-Key": "k2", " Client-Secret ": "c", "accessToken": "a",
        "cfg": {"dbPassword": "p", "github-access-token": "g", "hooks": [{"xAuthToken": "x"}]},
        "next_page_token": "kept", "author": "kept"
    });
    let mut paths =
        vec!["apiKey", "API-Key", " Client-Secret ", "accessToken", "cfg.dbPassword", "cfg.github-access-token"];
    paths.push("cfg.hooks.0.xAuthToken");
    paths.sort();
    (doc, paths)
}

fn assert_redacted(v: &Value) {
    for p in ["/apiKey", "/API-Key", "/ Client-Secret ", "/accessToken", "/cfg/dbPassword", "/cfg/github-access-token"]
    {
        assert_eq!(v.pointer(p).unwrap(), "[REDACTED]", "{p}: {v}");
    }
    assert_eq!(v["cfg"]["hooks"][0]["xAuthToken"], "[REDACTED]", "{v}");
    assert_eq!((v["next_page_token"].as_str(), v["author"].as_str()), (Some("kept"), Some("kept")), "{v}");
}

fn sorted(v: &Value) -> Vec<String> {
    let mut out: Vec<String> = serde_json::from_value(v.clone()).unwrap_or_default();
    out.sort();
    out
}

#[tokio::test]
async fn secrets_in_every_spelling_are_redacted_in_payloads_and_fact_state() {
    let bus = Bus::start().await;
    let alice = bus.register("alice").await;
    let bob = bus.register("bob").await;
    let (doc, paths) = secrets();

    let (s, sent) = bus.send(&alice, json!({"to": "bob", "type": "StatusUpdate", "payload": doc.clone()})).await;
    assert_eq!(s, 200, "{sent}");
    assert_eq!(sorted(&sent["redacted"]), paths);
    let id = sent["signal_id"].as_str().unwrap();
    let (s, row) = bus.call("GET", Some(&bob), &format!("/v1/signals/{id}"), None).await;
    assert_eq!(s, 200, "{row}");
    assert_redacted(&row["payload"]);

    let fact = json!({"fact_type": "config", "state": doc.clone()});
    let (s, recorded) = bus.call("POST", Some(&alice), "/v1/plugins/alice%2Fcfg/facts", Some(fact)).await;
    assert_eq!(s, 200, "{recorded}");
    assert_eq!(recorded["seq"], 1);
    assert_eq!(sorted(&recorded["redacted"]), paths);
    let (_, state) = bus.call("GET", Some(&alice), "/v1/plugins/alice%2Fcfg/state", None).await;
    assert_redacted(&state["state"]);
    let (_, facts) = bus.call("GET", Some(&alice), "/v1/plugins/alice%2Fcfg/facts", None).await;
    assert_redacted(&facts["facts"][0]["state"]);

    // The WebSocket fact op answers the same; a clean state has no `redacted`.
    let mut ws = bus.connect(&alice).await;
    let r = ws.request(json!({"op": "fact", "plugin": "alice", "fact_type": "t", "state": doc})).await;
    assert_eq!(sorted(&r["result"]["redacted"]), paths, "{r}");
    let r = ws.request(json!({"op": "fact", "plugin": "alice", "fact_type": "t", "state": {"ok": 1}})).await;
    assert!(r["result"].get("redacted").is_none(), "{r}");
}
