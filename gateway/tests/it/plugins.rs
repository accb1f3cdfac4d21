//! Plugin facts over HTTP (CONTRACT §8): ownership, per-plugin seq, state view, size limit.

use serde_json::json;

use crate::support::{Bus, ADMIN};

#[tokio::test]
async fn facts_are_owned_sequenced_and_mirrored_into_state() {
    let bus = Bus::start().await;
    let alice = bus.register("alice").await;
    let path = "/v1/plugins/alice%2Fwatcher";
    for (i, head) in ["a1", "b2"].iter().enumerate() {
        let (s, v) = bus
            .call(
                "POST",
                Some(&alice),
                &format!("{path}/facts"),
                Some(json!({"fact_type": "seen", "state": {"head": head}})),
            )
            .await;
        assert_eq!((s, v["seq"].as_u64()), (200, Some(i as u64 + 1)), "{v}");
    }
    let (s, v) = bus.call("GET", Some(&alice), &format!("{path}/state"), None).await;
    assert_eq!(s, 200, "{v}");
    assert_eq!((v["plugin"].as_str(), v["seq"].as_i64()), (Some("alice/watcher"), Some(2)));
    assert_eq!(v["state"], json!({"head": "b2"}));
    let (_, v) = bus.call("GET", Some(&alice), &format!("{path}/facts?limit=10"), None).await;
    let seqs: Vec<i64> = v["facts"].as_array().unwrap().iter().map(|f| f["seq"].as_i64().unwrap()).collect();
    assert_eq!(seqs, vec![2, 1], "newest first");
    assert_eq!(v["facts"][0]["recorded_by"], "alice");

    let (s, _) =
        bus.call("POST", Some(&alice), "/v1/plugins/bob/facts", Some(json!({"fact_type": "x", "state": {}}))).await;
    assert_eq!(s, 403);
    let (s, _) = bus
        .call(
            "POST",
            Some(&alice),
            "/v1/plugins/signalbus%2Fsweeper/facts",
            Some(json!({"fact_type": "x", "state": {}})),
        )
        .await;
    assert_eq!(s, 403);
    let (s, _) = bus
        .call(
            "POST",
            Some(ADMIN),
            "/v1/plugins/signalbus%2Fsweeper/facts",
            Some(json!({"fact_type": "x", "state": {}})),
        )
        .await;
    assert_eq!(s, 200);
    let big = "z".repeat(1024 * 1024 + 1);
    let (s, v) = bus
        .call("POST", Some(&alice), "/v1/plugins/alice/facts", Some(json!({"fact_type": "x", "state": {"b": big}})))
        .await;
    assert_eq!((s, v["error"]["code"].as_str()), (413, Some("payload_too_large")));
    let (s, v) = bus.call("GET", Some(&alice), "/v1/plugins/alice/state", None).await;
    assert_eq!(s, 200);
    assert_eq!((v["state"].clone(), v["seq"].as_i64()), (json!({}), Some(0)), "nothing appended on overflow");
}

#[tokio::test]
async fn the_admin_records_facts_for_any_plugin_as_admin() {
    let bus = Bus::start().await;
    let alice = bus.register("alice").await;
    let (s, v) = bus
        .call(
            "POST",
            Some(ADMIN),
            "/v1/plugins/alice%2Fwatcher/facts",
            Some(json!({"fact_type": "note", "state": {"k": 1}})),
        )
        .await;
    assert_eq!((s, v["seq"].as_u64()), (200, Some(1)), "{v}");
    let (_, v) = bus.call("GET", Some(&alice), "/v1/plugins/alice%2Fwatcher/facts", None).await;
    assert_eq!(v["facts"][0]["recorded_by"], "admin", "{v}");
}
