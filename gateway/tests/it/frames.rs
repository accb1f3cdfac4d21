//! Bad input on the WebSocket (CONTRACT §7): bad frames keep the session open, oversized
//! frames close it with 1009 (a message sent in fragments is held to the same limit, and one
//! within it is taken), slow consumers with 1013; shutdown closes sessions with 1001.

use std::time::Duration;

use serde_json::json;
use tokio_tungstenite::tungstenite::protocol::frame::coding::{Data, OpCode};
use tokio_tungstenite::tungstenite::protocol::frame::Frame;
use tokio_tungstenite::tungstenite::Message;

use crate::support::{Bus, Client, WAIT};

#[tokio::test]
async fn bad_frames_get_invalid_request_and_the_session_stays_open() {
    let bus = Bus::start().await;
    let alice = bus.register("alice").await;
    let mut ws = bus.connect(&alice).await;
    for bad in [
        "not json",
        "[]",
        "{}",
        r#"{"op":"dance","ref":"d"}"#,
        r#"{"op":"send"}"#,
        r#"{"op":"send","to":"bob","type":"X","ttl_seconds":"soon"}"#,
        r#"{"op":"ack","signal_ids":"x"}"#,
        r#"{"op":"recall","signal_id":7}"#,
        r#"{"op":"fact","plugin":"alice","fact_type":"t"}"#,
    ] {
        ws.send_text(bad).await;
        let r = ws.next_frame(WAIT).await.expect("a result");
        assert_eq!(r["op"], "result", "{bad}: {r}");
        assert_eq!(r["ok"], false);
        assert_eq!(r["error"]["code"], "invalid_request");
        assert!(!r["error"]["message"].as_str().unwrap().is_empty());
    }
    ws.send_text(r#"{"op":"ping"}"#).await;
    assert_eq!(ws.next_frame(WAIT).await.unwrap(), json!({"op": "pong"}));
    ws.send_text(r#"{"op":"ping","ref":"p1"}"#).await;
    assert_eq!(ws.next_frame(WAIT).await.unwrap(), json!({"op": "pong", "ref": "p1"}));
    // Facts go through the same socket.
    let r = ws.request(json!({"op": "fact", "plugin": "alice/watcher", "fact_type": "seen", "state": {"a": 1}})).await;
    assert_eq!(r["result"]["seq"], 1, "{r}");
    let r = ws.request(json!({"op": "fact", "plugin": "bob", "fact_type": "seen", "state": {}})).await;
    assert_eq!(r["error"]["code"], "forbidden");
    assert!(ws.closed.is_none());
}

#[tokio::test]
async fn an_oversized_frame_closes_with_1009() {
    let bus = Bus::start().await;
    let alice = bus.register("alice").await;
    let mut ws = bus.connect(&alice).await;
    ws.send_text(format!(r#"{{"op":"ping","pad":"{}"}}"#, "x".repeat(1024 * 1024 + 10))).await;
    assert_eq!(ws.closed_code(WAIT).await, Some(1009));
}

/// Sends `text` as one message in fragments of `piece` bytes.
async fn send_fragmented(ws: &mut Client, text: &str, piece: usize) {
    let chunks: Vec<&[u8]> = text.as_bytes().chunks(piece).collect();
    for (i, chunk) in chunks.iter().enumerate() {
        let opcode = if i == 0 { OpCode::Data(Data::Text) } else { OpCode::Data(Data::Continue) };
        let frame = Frame::message(chunk.to_vec(), opcode, i + 1 == chunks.len());
        ws.send_raw(Message::Frame(frame)).await;
    }
}

#[tokio::test]
async fn a_message_in_fragments_is_taken_up_to_the_size_limit_and_closes_1009_past_it() {
    let bus = Bus::start().await;
    let alice = bus.register("alice").await;
    let mut ws = bus.connect(&alice).await;
    // A fact of nearly 1 MiB, in 64 KiB fragments: one message within the limit.
    let state = json!({ "pad": "f".repeat(1024 * 1024 - 512) });
    let fact = json!({"op": "fact", "ref": "big", "plugin": "alice", "fact_type": "big", "state": state}).to_string();
    assert!(fact.len() < 1024 * 1024, "{}", fact.len());
    send_fragmented(&mut ws, &fact, 64 * 1024).await;
    let r = ws.next_frame(WAIT).await.expect("a result");
    assert_eq!((r["ref"].as_str(), r["ok"].as_bool()), (Some("big"), Some(true)), "{}", r["error"]);
    assert_eq!(r["result"]["seq"], 1, "{r}");
    // Past the limit, fragments or not, the session closes with 1009.
    let over = format!(r#"{{"op":"ping","pad":"{}"}}"#, "x".repeat(1024 * 1024));
    send_fragmented(&mut ws, &over, 64 * 1024).await;
    assert_eq!(ws.closed_code(WAIT).await, Some(1009));
}

#[tokio::test]
async fn a_consumer_that_does_not_read_is_closed_with_1013_and_its_signals_stay_pending() {
    let bus = Bus::with(|c| c.outbound_buffer = 4).await;
    let alice = bus.register("alice").await;
    let bob = bus.register("bob").await;
    let mut ws = bus.connect(&bob).await;
    let blob = "y".repeat(60 * 1024);
    let mut ids = Vec::new();
    for _ in 0..120 {
        let (s, v) = bus.send(&alice, json!({"to": "bob", "type": "StatusUpdate", "payload": {"b": blob}})).await;
        assert_eq!(s, 200);
        ids.push(v["signal_id"].as_str().unwrap().to_string());
        if bus.gw.local_sessions() == 0 {
            break;
        }
    }
    assert!(
        crate::support::eventually(Duration::from_secs(5), || async { bus.gw.local_sessions() == 0 }).await,
        "slow consumer not closed"
    );
    assert_eq!(ws.closed_code(Duration::from_secs(20)).await, Some(1013));
    // Nothing is lost: a new session gets every signal the old one did not ack.
    let mut ws = bus.connect(&bob).await;
    let mut got = std::collections::HashSet::new();
    while let Some(s) = ws.next_signal(Duration::from_secs(2)).await {
        got.insert(s["id"].as_str().unwrap().to_string());
    }
    for id in &ids {
        assert!(got.contains(id), "signal {id} lost");
    }
}

#[tokio::test]
async fn shutdown_closes_sessions_with_1001_and_records_it() {
    let mut bus = Bus::start().await;
    let alice = bus.register("alice").await;
    let mut ws = bus.connect(&alice).await;
    bus.shutdown().await;
    assert_eq!(ws.closed_code(WAIT).await, Some(1001));
    assert_eq!(bus.gw.local_sessions(), 0);
}
