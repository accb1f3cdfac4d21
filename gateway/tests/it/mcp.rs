//! `/mcp` (CONTRACT §12) driven by the official MCP Python SDK (`tests/mcp/scenarios.py`):
//! the tools and their schemas, sends between MCP and WebSocket agents, piggybacked delivery,
//! redelivery after a DELETE, the announcement on the GET stream, bad input. The HTTP edges
//! an SDK never shows (401 and 413 bodies, 405, someone else's session), the session's life
//! (reaped when silent, kept by an open GET stream or a `check_inbox` that waits, closed at
//! shutdown) are checked here with plain requests; `check_inbox` with `wait_seconds` and
//! `list_signals` through the SDK too.

use std::time::Duration;

use serde_json::{json, Value};

use crate::support::{Bus, ADMIN, WAIT};

const LIMIT: Duration = Duration::from_secs(90);

/// Runs one scenario against `bus` (off the runtime the bus runs on).
async fn scenario(bus: &Bus, name: &str, extra: Value) {
    let mut args = json!({"url": bus.base, "admin": ADMIN});
    args.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
    let name = name.to_string();
    tokio::task::spawn_blocking(move || testkit::mcp::run_scenario(&name, &args.to_string(), LIMIT)).await.unwrap();
}

#[tokio::test]
async fn tools_are_listed_with_schemas_and_the_session_is_a_bus_session() {
    let bus = Bus::start().await;
    scenario(&bus, "tools", json!({})).await;
}

#[tokio::test]
async fn directives_and_groups_through_the_tools() {
    let bus = Bus::start().await;
    scenario(&bus, "team", json!({})).await;
}

#[tokio::test]
async fn sends_recalls_and_facts_between_mcp_and_websocket_agents() {
    let bus = Bus::start().await;
    let alice = bus.register("alice").await;
    let carol = bus.register("carol").await;
    let mut ws = bus.connect(&carol).await;
    // Waits for alice, who has no session yet: it rides on her first tool result.
    let r = ws.request(json!({"op": "send", "to": "alice", "type": "FromWs"})).await;
    assert_eq!(r["result"]["publish_path"], "queued_offline", "{r}");
    scenario(&bus, "sends", json!({"alice": alice, "carol": carol})).await;
    let pushed = ws.next_signal(WAIT).await.expect("alice's sync question reached carol");
    assert_eq!((pushed["from"].as_str(), pushed["payload"]["ask"].as_str()), (Some("alice"), Some("ready?")));
}

#[tokio::test]
async fn signals_ride_on_tool_results_and_unacked_ones_come_back_after_delete() {
    let bus = Bus::start().await;
    scenario(&bus, "piggyback", json!({})).await;
}

#[tokio::test]
async fn a_waiting_client_hears_of_a_new_signal_on_its_get_stream() {
    let bus = Bus::start().await;
    scenario(&bus, "announce", json!({})).await;
}

#[tokio::test]
async fn check_inbox_waits_for_a_signal_and_list_signals_reads_a_conversation() {
    let bus = Bus::start().await;
    scenario(&bus, "waiting", json!({})).await;
}

#[tokio::test]
async fn bad_input_answers_clear_errors_and_keeps_the_session() {
    let bus = Bus::start().await;
    scenario(&bus, "bad_input", json!({})).await;
}

pub(crate) fn initialize() -> Value {
    json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "raw", "version": "0"}}})
}

pub(crate) async fn post(bus: &Bus, token: Option<&str>, session: Option<&str>, body: String) -> reqwest::Response {
    let mut req = bus
        .http
        .post(format!("{}/mcp", bus.base))
        .header("accept", "application/json, text/event-stream")
        .header("content-type", "application/json")
        .body(body);
    if let Some(t) = token {
        req = req.bearer_auth(t);
    }
    if let Some(s) = session {
        req = req.header("mcp-session-id", s);
    }
    req.send().await.unwrap()
}

#[tokio::test]
async fn the_http_edge_answers_with_contract_error_bodies() {
    let bus = Bus::start().await;
    let alice = bus.register("alice").await;
    let bob = bus.register("bob").await;

    for token in [None, Some("sb_wrong")] {
        let r = post(&bus, token, None, initialize().to_string()).await;
        assert_eq!(r.status(), 401);
        let body: Value = r.json().await.unwrap();
        assert_eq!(body["error"]["code"], "unauthorized", "{body}");
    }
    let r = post(&bus, Some(ADMIN), None, initialize().to_string()).await;
    assert_eq!(r.status(), 403);
    let (_, roster) = bus.call("GET", Some(&bob), "/v1/agents", None).await;
    assert!(roster["agents"].as_array().unwrap().iter().all(|a| a["live_sessions"] == 0), "no session: {roster}");

    let r = post(&bus, Some(&alice), None, initialize().to_string()).await;
    assert_eq!(r.status(), 200);
    let session = r.headers()["mcp-session-id"].to_str().unwrap().to_string();
    let (_, roster) = bus.call("GET", Some(&bob), "/v1/agents", None).await;
    let me = roster["agents"].as_array().unwrap().iter().find(|a| a["identity"] == "alice").unwrap().clone();
    assert_eq!((me["state"].as_str(), me["live_sessions"].as_u64()), (Some("available"), Some(1)), "{roster}");

    // Another agent's token cannot use alice's session; nor can anyone guess one.
    let r =
        post(&bus, Some(&bob), Some(&session), json!({"jsonrpc": "2.0", "id": 2, "method": "ping"}).to_string()).await;
    assert_eq!(r.status(), 404);
    assert_eq!(r.json::<Value>().await.unwrap()["error"]["code"], "not_found");

    let huge = format!(r#"{{"jsonrpc":"2.0","id":3,"method":"ping","params":{{"x":"{}"}}}}"#, "y".repeat(3 << 20));
    let r = post(&bus, Some(&alice), Some(&session), huge).await;
    assert_eq!(r.status(), 413);
    assert_eq!(r.json::<Value>().await.unwrap()["error"]["code"], "payload_too_large");

    let r = bus.http.put(format!("{}/mcp", bus.base)).bearer_auth(&alice).send().await.unwrap();
    assert_eq!(r.status(), 405);
    assert_eq!(r.headers()["allow"], "GET, POST, DELETE");
    assert_eq!(r.json::<Value>().await.unwrap()["error"]["code"], "invalid_request");

    // DELETE ends the MCP session and records the bus session's close.
    let r = bus.http.delete(format!("{}/mcp", bus.base)).bearer_auth(&alice).header("mcp-session-id", &session);
    let r = r.send().await.unwrap();
    assert_eq!(r.status(), 200);
    let closed: Value = r.json().await.unwrap();
    assert_eq!(
        (closed["mcp_session_id"].as_str(), &closed["closed"]),
        (Some(session.as_str()), &json!(true)),
        "{closed}"
    );
    let (_, roster) = bus.call("GET", Some(&bob), "/v1/agents", None).await;
    let me = roster["agents"].as_array().unwrap().iter().find(|a| a["identity"] == "alice").unwrap().clone();
    assert_eq!(me["state"], "not_available_offline", "{roster}");
    let r = post(&bus, Some(&alice), Some(&session), json!({"jsonrpc": "2.0", "id": 4, "method": "ping"}).to_string())
        .await;
    assert_eq!(r.status(), 404);
}

#[tokio::test]
async fn a_silent_session_is_closed_by_the_piggyback_reaper_and_ends_the_mcp_session() {
    let bus = Bus::with(|c| c.stale_after = Duration::from_millis(300)).await;
    let alice = bus.register("alice").await;
    let r = post(&bus, Some(&alice), None, initialize().to_string()).await;
    let session = r.headers()["mcp-session-id"].to_str().unwrap().to_string();
    let offline = crate::support::eventually(Duration::from_secs(5), || async {
        let (_, roster) = bus.call("GET", Some(&alice), "/v1/agents", None).await;
        roster["agents"][0]["state"] == "not_available_offline"
    })
    .await;
    assert!(offline, "the reaper closed the silent session");
    let r = post(&bus, Some(&alice), Some(&session), json!({"jsonrpc": "2.0", "id": 2, "method": "ping"}).to_string())
        .await;
    assert_eq!(r.status(), 404, "the mcp session ended with it");
}

#[tokio::test]
async fn shutdown_records_the_close_of_a_session_waiting_on_its_get_stream() {
    let mut bus = Bus::start().await;
    let alice = bus.register("alice").await;
    let r = post(&bus, Some(&alice), None, initialize().to_string()).await;
    let session = r.headers()["mcp-session-id"].to_str().unwrap().to_string();
    let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"}).to_string();
    assert!(post(&bus, Some(&alice), Some(&session), initialized).await.status().is_success());
    let stream = bus
        .http
        .get(format!("{}/mcp", bus.base))
        .bearer_auth(&alice)
        .header("accept", "text/event-stream")
        .header("mcp-session-id", &session)
        .send()
        .await
        .unwrap();
    assert_eq!(stream.status(), 200);
    // An open stream does not hold the shutdown up, and the close is on the stream before exit.
    tokio::time::timeout(Duration::from_secs(10), bus.shutdown()).await.expect("shutdown within 10 s");
    drop(stream);
    let events = bus.log.read(1, 10_000).await.unwrap();
    let closes: Vec<&str> = events
        .iter()
        .filter_map(|s| match &s.event.body {
            bus::event::EventBody::SessionClosed(c) => Some(c.reason.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(closes, ["shutdown"]);
}

#[tokio::test]
async fn an_open_get_stream_keeps_a_silent_session_available_until_the_client_goes() {
    let bus = Bus::with(|c| c.stale_after = Duration::from_millis(300)).await;
    let alice = bus.register("alice").await;
    let r = post(&bus, Some(&alice), None, initialize().to_string()).await;
    let session = r.headers()["mcp-session-id"].to_str().unwrap().to_string();
    let get = bus
        .http
        .get(format!("{}/mcp", bus.base))
        .bearer_auth(&alice)
        .header("accept", "text/event-stream")
        .header("mcp-session-id", &session);
    let stream = get.send().await.unwrap();
    assert_eq!(stream.status(), 200);
    let state = || async {
        let (_, roster) = bus.call("GET", Some(&alice), "/v1/agents", None).await;
        roster["agents"][0]["state"].as_str().unwrap().to_string()
    };
    // A second session, opened later and without a stream, also silent: once the reaper has
    // closed it, alice's session has been silent longer than the reaper's limit.
    let bob = bus.register("bob").await;
    let r = post(&bus, Some(&bob), None, initialize().to_string()).await;
    assert!(r.headers().contains_key("mcp-session-id"), "bob's session opened");
    bus.until_state("bob", "not_available_offline").await;
    // Alice's session was not reaped with it: a reaped session never turns available again.
    // (Waited for, not sampled: under load one heartbeat may come late and show it stale.)
    bus.until_state("alice", "available").await;
    drop(stream);
    let gone =
        crate::support::eventually(Duration::from_secs(5), || async { state().await == "not_available_offline" });
    assert!(gone.await, "closed once the client went away");
}

#[tokio::test]
async fn a_check_inbox_that_waits_keeps_a_session_without_a_stream_available() {
    let stale = Duration::from_millis(300);
    let bus = Bus::with(|c| c.stale_after = stale).await;
    let alice = bus.register("alice").await;
    let r = post(&bus, Some(&alice), None, initialize().to_string()).await;
    let session = r.headers()["mcp-session-id"].to_str().unwrap().to_string();
    let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"}).to_string();
    assert!(post(&bus, Some(&alice), Some(&session), initialized).await.status().is_success());
    let call = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                      "params": {"name": "check_inbox", "arguments": {"wait_seconds": 3}}});
    let waiting = {
        let req = bus
            .http
            .post(format!("{}/mcp", bus.base))
            .header("accept", "application/json, text/event-stream")
            .header("content-type", "application/json")
            .header("mcp-session-id", &session)
            .bearer_auth(&alice)
            .body(call.to_string());
        tokio::spawn(async move {
            let r = req.send().await.unwrap();
            (r.status().as_u16(), r.text().await.unwrap())
        })
    };
    // No GET stream and no other call: only the waiting tool call heartbeats the session, for
    // longer than the reaper lets a silent one live (2 x stale_after and an interval).
    for _ in 0..8 {
        tokio::time::sleep(stale).await;
        assert_eq!(bus.state_of("alice").await, "available");
    }
    let (status, body) = waiting.await.unwrap();
    assert_eq!(status, 200, "{body}");
    assert!(body.contains(r#"\"signals\":[]"#) || body.contains(r#""signals":[]"#), "{body}");
    let r = post(&bus, Some(&alice), Some(&session), json!({"jsonrpc": "2.0", "id": 3, "method": "ping"}).to_string())
        .await;
    assert_eq!(r.status(), 200, "the session lived through the wait");
}
