//! Sending while the recipient connects loses nothing: whatever the interleaving of the send,
//! the session opening and the projector, the new session gets the signal exactly once (one
//! `signal.delivered` on the stream).

use std::time::Duration;

use serde_json::json;

use crate::support::{deliveries, Bus, Client};

#[tokio::test]
async fn send_while_connecting_loses_nothing() {
    let bus = Bus::start().await;
    let alice = bus.register("alice").await;
    let bob = bus.register("bob").await;
    let url = format!("{}?token={bob}", bus.ws_url);
    for round in 0..40 {
        let connect = tokio::spawn({
            let url = url.clone();
            async move { Client::connect(&url).await }
        });
        if round % 2 == 0 {
            tokio::task::yield_now().await;
        }
        let (s, v) = bus.send(&alice, json!({"to": "bob", "type": "StatusUpdate", "payload": {"round": round}})).await;
        assert_eq!(s, 200, "{v}");
        let id = v["signal_id"].clone();
        let mut ws = connect.await.unwrap();
        let got = ws.next_signal(Duration::from_secs(5)).await;
        assert_eq!(got.map(|s| s["id"].clone()), Some(id.clone()), "round {round}: signal lost");
        ws.ack(&[id.as_str().unwrap().to_string()]).await;
        ws.close().await;
        // Acked and closed: no delivery can follow, so the count is final.
        assert_eq!(deliveries(&bus.log, id.as_str().unwrap()).await, 1, "round {round}: duplicate");
    }
}
