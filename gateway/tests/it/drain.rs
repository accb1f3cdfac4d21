//! Startup drain order (CONTRACT §5), acks, and redelivery of what was delivered but not acked.

use std::time::Duration;

use serde_json::{json, Value};

use crate::support::{deliveries, Bus, WAIT};

async fn queue(bus: &Bus, from: &str, ty: &str, n: u32) -> String {
    let (s, v) = bus.send(from, json!({"to": "bob", "type": ty, "payload": {"n": n}})).await;
    assert_eq!(s, 200, "{v}");
    assert_eq!(v["publish_path"], "queued_offline");
    v["signal_id"].as_str().unwrap().to_string()
}

#[tokio::test]
async fn drain_is_priority_desc_then_oldest_first_and_unacked_ones_come_back_redelivered() {
    let bus = Bus::start().await;
    let alice = bus.register("alice").await;
    let bob = bus.register("bob").await;
    // Blocker is sync, so it goes as async to reach an offline recipient.
    let info1 = queue(&bus, &alice, "StatusUpdate", 1).await;
    let task1 = queue(&bus, &alice, "TaskAssigned", 2).await;
    let (_, v) = bus.send(&alice, json!({"to": "bob", "type": "Blocker", "delivery_class": "async"})).await;
    let blocker = v["signal_id"].as_str().unwrap().to_string();
    let ask1 = queue(&bus, &alice, "ReviewRequested", 3).await;
    let info2 = queue(&bus, &alice, "Whatever", 4).await;
    let task2 = queue(&bus, &alice, "TaskAssigned", 5).await;
    let expected = vec![blocker, ask1, task1, task2, info1, info2];

    let mut ws = bus.connect(&bob).await;
    let mut got = Vec::new();
    for _ in 0..expected.len() {
        let s = ws.next_signal(WAIT).await.expect("drained signal");
        assert_eq!(s["redelivered"], false);
        got.push(s["id"].as_str().unwrap().to_string());
    }
    assert_eq!(got, expected);
    assert!(ws.next_signal(Duration::from_millis(300)).await.is_none(), "each signal exactly once");
    assert_eq!(row(&bus, &alice, &expected[0]).await["delivered_via"], "startup_drain");

    // Ack the first three, then leave.
    let r = ws.ack(&expected[..3]).await;
    assert_eq!(r["ok"], true, "{r}");
    ws.close().await;

    let mut ws = bus.connect(&bob).await;
    let mut again = Vec::new();
    for _ in 0..3 {
        let s = ws.next_signal(WAIT).await.expect("redelivered signal");
        assert_eq!(s["redelivered"], true, "{s}");
        again.push(s["id"].as_str().unwrap().to_string());
    }
    assert_eq!(again, expected[3..].to_vec());
    assert!(ws.next_signal(Duration::from_millis(300)).await.is_none());
    let acked: Value = row(&bus, &alice, &expected[0]).await;
    assert!(acked["acked_at"].is_string(), "{acked}");

    // Acked now: a third session gets nothing.
    ws.ack(&again).await;
    ws.close().await;
    let mut ws = bus.connect(&bob).await;
    assert!(ws.next_signal(Duration::from_millis(500)).await.is_none());
    // On the stream: the three acked at once were delivered once, the others once more each.
    for (i, id) in expected.iter().enumerate() {
        assert_eq!(deliveries(&bus.log, id).await, if i < 3 { 1 } else { 2 }, "signal {i}");
    }
}

#[tokio::test]
async fn what_a_session_left_unacked_goes_to_a_sibling_that_opened_before_it_closed() {
    let bus = Bus::start().await;
    let alice = bus.register("alice").await;
    let bob = bus.register("bob").await;
    let id = queue(&bus, &alice, "TaskAssigned", 1).await;
    let mut first = bus.connect(&bob).await;
    let s = first.next_signal(WAIT).await.expect("drained to the first session");
    assert_eq!(s["id"], json!(id));
    // A second session opens while the first still holds the signal (its to ack): its startup
    // drain must leave it alone.
    let mut second = bus.connect(&bob).await;
    assert!(second.next_signal(Duration::from_millis(300)).await.is_none(), "not while the first is open");
    // The first leaves without acking: the sibling, already open, gets it back.
    first.close().await;
    let again = second.next_signal(WAIT).await.expect("redelivered to the open sibling");
    assert_eq!((again["id"].clone(), again["redelivered"].clone()), (json!(id), json!(true)));
    assert_eq!(deliveries(&bus.log, &id).await, 2);
}

#[tokio::test]
async fn a_live_push_is_acked_over_the_socket_and_not_redelivered() {
    let bus = Bus::start().await;
    let alice = bus.register("alice").await;
    let bob = bus.register("bob").await;
    let mut ws = bus.connect(&bob).await;
    let (_, v) = bus.send(&alice, json!({"to": "bob", "type": "Question"})).await;
    let id = v["signal_id"].as_str().unwrap().to_string();
    let s = ws.next_signal(WAIT).await.unwrap();
    assert_eq!(s["id"], json!(id));
    let (_, row) = bus.call("GET", Some(&bob), &format!("/v1/signals/{id}"), None).await;
    // Sent once the client saw its welcome: pushed, never left to the session's startup drain
    // (whose position is fixed at the session's `session.opened`, before the welcome goes out).
    assert_eq!(row["delivered_via"], "ws_push", "{row}");
    assert_eq!(row["resolved_to_session"], json!(ws.session_id()));
    ws.ack(std::slice::from_ref(&id)).await;
    ws.close().await;
    let mut ws = bus.connect(&bob).await;
    assert!(ws.next_signal(Duration::from_millis(500)).await.is_none());
    assert_eq!(deliveries(&bus.log, &id).await, 1, "pushed once, never redelivered");
}

async fn row(bus: &Bus, token: &str, id: &str) -> Value {
    bus.call("GET", Some(token), &format!("/v1/signals/{id}"), None).await.1
}
