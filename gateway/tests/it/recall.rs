//! Recall (CONTRACT §6): every outcome over HTTP and WebSocket, and recall racing delivery.

use std::collections::HashSet;
use std::time::Duration;

use serde_json::json;

use crate::support::{deliveries, eventually, Bus, WAIT};

#[tokio::test]
async fn every_recall_outcome() {
    let bus = Bus::start().await;
    let alice = bus.register("alice").await;
    let bob = bus.register("bob").await;
    let mallory = bus.register("mallory").await;

    let (_, v) = bus.send(&alice, json!({"to": "bob", "type": "StatusUpdate"})).await;
    let pending = v["signal_id"].as_str().unwrap().to_string();
    assert_eq!(bus.recall(&mallory, &pending).await, (404, json!({"outcome": "not_found"})));
    assert_eq!(bus.recall(&bob, &pending).await, (404, json!({"outcome": "not_found"})));
    assert_eq!(bus.recall(&alice, &pending).await, (200, json!({"outcome": "recalled"})));
    let seq = bus.log.last_seq().await.unwrap();
    assert_eq!(bus.recall(&alice, &pending).await, (200, json!({"outcome": "recalled"})));
    assert_eq!(bus.log.last_seq().await.unwrap(), seq, "an idempotent repeat appends nothing");

    let (_, v) = bus.send(&alice, json!({"to": "bob", "type": "StatusUpdate", "ttl_seconds": 1})).await;
    let expiring = v["signal_id"].as_str().unwrap().to_string();
    let (_, v) = bus.send(&alice, json!({"to": "bob", "type": "Blocker"})).await;
    let bounced = v["error"]["signal_id"].as_str().unwrap().to_string();
    assert_eq!(bus.recall(&alice, &bounced).await, (404, json!({"outcome": "not_found"})));
    // Text that is not an id is a malformed path, not an unknown signal.
    let (status, body) = bus.recall(&alice, "not-a-uuid").await;
    assert_eq!((status, &body["error"]["code"]), (400, &json!("invalid_request")), "{body}");
    assert_eq!(bus.recall(&alice, &uuid::Uuid::new_v4().to_string()).await.0, 404);

    // Bob connects: gets the expiring one (still live) but never the recalled one.
    let mut ws = bus.connect(&bob).await;
    let got = ws.next_signal(WAIT).await.unwrap();
    assert_eq!(got["id"], json!(expiring));
    assert!(ws.next_signal(Duration::from_millis(300)).await.is_none());
    assert_eq!(bus.recall(&alice, &expiring).await, (200, json!({"outcome": "already_delivered"})));
    // Recalled is final: the stream holds no delivery of it, now or later.
    assert_eq!(deliveries(&bus.log, &pending).await, 0);

    let (_, v) = bus.send(&alice, json!({"to": "mallory", "type": "StatusUpdate", "ttl_seconds": 1})).await;
    let late = v["signal_id"].as_str().unwrap().to_string();
    // Recall judges the TTL by the wall clock against the stored expires_at (no sweeper runs
    // here): wait for exactly that moment to pass, not for a guess at it.
    let expires_at: chrono::DateTime<chrono::Utc> = v["expires_at"].as_str().unwrap().parse().unwrap();
    let ran_out = eventually(WAIT, || async { chrono::Utc::now() > expires_at }).await;
    assert!(ran_out, "expires_at {expires_at} is more than {WAIT:?} away for a 1 s TTL");
    assert_eq!(bus.recall(&alice, &late).await, (200, json!({"outcome": "already_expired"})));

    // The same over the WebSocket.
    let mut aws = bus.connect(&alice).await;
    let r = aws.request(json!({"op": "recall", "signal_id": late})).await;
    assert_eq!(r["ok"], true);
    assert_eq!(r["result"]["outcome"], "already_expired");
    let r = aws.request(json!({"op": "recall", "signal_id": "nope"})).await;
    assert_eq!(r["result"]["outcome"], "not_found");
    let r = aws.request(json!({"op": "send", "to": "mallory", "type": "StatusUpdate"})).await;
    let id = r["result"]["signal_id"].clone();
    let r = aws.request(json!({"op": "recall", "signal_id": id})).await;
    assert_eq!(r["result"]["outcome"], "recalled");
}

/// Many signals recalled while their recipient's session drains them: each has exactly one
/// winner, and no recalled signal is ever received.
#[tokio::test]
async fn recall_racing_delivery_has_exactly_one_winner_per_signal() {
    const N: usize = 1000;
    let bus = Bus::start().await;
    let alice = bus.register("alice").await;
    let bob = bus.register("bob").await;
    let mut ids = Vec::with_capacity(N);
    let mut aws = bus.connect(&alice).await;
    for i in 0..N {
        let r = aws.request(json!({"op": "send", "to": "bob", "type": "StatusUpdate", "payload": {"i": i}})).await;
        assert_eq!(r["ok"], true, "{r}");
        ids.push(r["result"]["signal_id"].as_str().unwrap().to_string());
    }
    let all: HashSet<String> = ids.iter().cloned().collect();

    let url = format!("{}?token={}", bus.ws_url, bob);
    let receiver = tokio::spawn(async move {
        let mut ws = crate::support::Client::connect(&url).await;
        let mut got = Vec::new();
        while let Some(s) = ws.next_signal(Duration::from_millis(1500)).await {
            got.push(s["id"].as_str().unwrap().to_string());
        }
        got
    });
    let recaller = {
        let ids = ids.clone();
        tokio::spawn(async move {
            let mut outcomes = Vec::new();
            // From the end, so recalls and the drain (oldest first) meet and contend mid-way.
            for chunk in ids.rchunks(50) {
                for id in chunk.iter().rev() {
                    let r = aws.request(json!({"op": "recall", "signal_id": id})).await;
                    outcomes.push((id.clone(), r["result"]["outcome"].as_str().unwrap().to_string()));
                }
            }
            outcomes
        })
    };
    let got = receiver.await.unwrap();
    let outcomes = recaller.await.unwrap();

    let received: HashSet<String> = got.iter().cloned().collect();
    assert_eq!(received.len(), got.len(), "no signal received twice");
    let recalled: HashSet<String> =
        outcomes.iter().filter(|(_, o)| o == "recalled").map(|(id, _)| id.clone()).collect();
    assert!(received.is_disjoint(&recalled), "a recalled signal was received");
    for (id, o) in &outcomes {
        match o.as_str() {
            "recalled" => {}
            "already_delivered" => assert!(received.contains(id), "delivered but never received: {id}"),
            other => panic!("unexpected outcome {other} for {id}"),
        }
    }
    let union: HashSet<String> = received.union(&recalled).cloned().collect();
    assert_eq!(union, all, "every signal has exactly one winner");
    // On the stream too: a recalled signal was never delivered, a delivered one exactly once.
    for id in &all {
        let want = usize::from(!recalled.contains(id));
        assert_eq!(deliveries(&bus.log, id).await, want, "{id}");
    }
    eprintln!("recall race: {} recalled, {} delivered", recalled.len(), received.len());
}
