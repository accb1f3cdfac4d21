//! What one fact read or append can cost the bus: reads come in pages bounded in bytes
//! (`before_seq` continues), appends have a per-identity quota weighted by size, and an answer
//! larger than any buffer still carries its piggyback signals.

use gateway::FactRate;
use serde_json::{json, Value};

use crate::support::Bus;

/// A fact state of about `bytes` encoded bytes.
fn state_of(bytes: usize, n: u64) -> Value {
    json!({ "n": n, "pad": "x".repeat(bytes) })
}

async fn append(bus: &Bus, token: &str, plugin: &str, state: Value) -> (u16, Value) {
    let body = json!({"fact_type": "blob", "state": state});
    bus.call("POST", Some(token), &format!("/v1/plugins/{plugin}/facts"), Some(body)).await
}

fn seqs(v: &Value) -> Vec<i64> {
    v["facts"].as_array().unwrap().iter().map(|f| f["seq"].as_i64().unwrap()).collect()
}

#[tokio::test]
async fn fact_reads_come_in_pages_bounded_in_bytes() {
    let bus = Bus::with(|c| {
        c.fact_page_bytes = 2500;
        c.fact_rate = None;
    })
    .await;
    let alice = bus.register("alice").await;
    for n in 1..=5 {
        let (s, v) = append(&bus, &alice, "alice", state_of(1000, n)).await;
        assert_eq!(s, 200, "{v}");
    }
    // Rows would allow all five; bytes stop the page after the fact that crosses 2,500.
    let (s, page) = bus.call("GET", Some(&alice), "/v1/plugins/alice/facts?limit=1000", None).await;
    assert_eq!(s, 200, "{page}");
    assert_eq!(seqs(&page), vec![5, 4, 3]);
    assert_eq!(page["next_before_seq"], 3);
    assert_eq!(page["facts"][0]["state"]["n"], 5);
    let (_, next) = bus.call("GET", Some(&alice), "/v1/plugins/alice/facts?limit=1000&before_seq=3", None).await;
    assert_eq!((seqs(&next), &next["next_before_seq"]), (vec![2, 1], &Value::Null));
    let (_, rows) = bus.call("GET", Some(&alice), "/v1/plugins/alice/facts?limit=1", None).await;
    assert_eq!((seqs(&rows), &rows["next_before_seq"]), (vec![5], &json!(5)));
    let (s, v) = bus.call("GET", Some(&alice), "/v1/plugins/alice/facts?before_seq=zero", None).await;
    assert_eq!((s, v["error"]["code"].as_str()), (400, Some("invalid_request")), "{v}");
}

#[tokio::test]
async fn fact_appends_have_a_per_identity_quota_weighted_by_size() {
    let bus = Bus::with(|c| c.fact_rate = Some(FactRate { per_second: 1, burst: 20 })).await;
    let alice = bus.register("alice").await;
    let bob = bus.register("bob").await;
    // A 1 MiB state costs 16 units of 64 KiB: one fits the bucket of 20, a second does not.
    let (s, v) = append(&bus, &alice, "alice", state_of(1000 * 1000, 1)).await;
    assert_eq!(s, 200, "{v}");
    let (s, v) = append(&bus, &alice, "alice", state_of(1000 * 1000, 2)).await;
    assert_eq!((s, v["error"]["code"].as_str()), (429, Some("rate_limited")), "{v}");
    assert!(v["error"]["message"].as_str().unwrap().contains("plugin fact rate"), "{v}");
    let (s, _) = append(&bus, &bob, "bob", state_of(10, 1)).await;
    assert_eq!(s, 200, "buckets are per identity");
    let (_, facts) = bus.call("GET", Some(&alice), "/v1/plugins/alice/facts", None).await;
    assert_eq!(seqs(&facts), vec![1], "nothing was appended over the quota");
}

#[tokio::test]
async fn a_twenty_mib_answer_carries_its_piggyback_signals() {
    let bus = Bus::with(|c| {
        c.fact_page_bytes = 64 * 1024 * 1024;
        c.fact_rate = None;
    })
    .await;
    let alice = bus.register("alice").await;
    let bob = bus.register("bob").await;
    for n in 1..=20 {
        let (s, v) = append(&bus, &bob, "bob", state_of(1000 * 1000, n)).await;
        assert_eq!(s, 200, "{v}");
    }
    let (_, opened) = bus.call("POST", Some(&bob), "/v1/sessions", None).await;
    let sid = opened["session_id"].as_str().unwrap().to_string();
    let (_, sent) = bus.send(&alice, json!({"to": "bob", "type": "StatusUpdate"})).await;

    let resp = bus
        .http
        .get(format!("{}/v1/plugins/bob/facts?limit=1000", bus.base))
        .bearer_auth(&bob)
        .header("X-Signalbus-Session", &sid)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 200);
    let v: Value = resp.json().await.unwrap();
    assert_eq!(seqs(&v).len(), 20);
    assert_eq!(v["signals"][0]["id"], sent["signal_id"], "the signal rides on the 20 MiB answer");
}
