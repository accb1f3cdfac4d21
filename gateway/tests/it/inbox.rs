//! `GET /v1/inbox[?drain=true]`, `GET /v1/signals` with filters and cursor paging, and the
//! admin rebuild/doctor endpoints through `ProjectorAdmin`.

use std::collections::HashSet;

use serde_json::{json, Value};

use crate::support::{Bus, ADMIN};

#[tokio::test]
async fn inbox_lists_in_drain_order_and_drain_delivers_once() {
    let bus = Bus::start().await;
    let alice = bus.register("alice").await;
    let bob = bus.register("bob").await;
    let (_, low) = bus.send(&alice, json!({"to": "bob", "type": "StatusUpdate"})).await;
    let (_, high) = bus.send(&alice, json!({"to": "bob", "type": "Blocker", "delivery_class": "async"})).await;
    let (s, v) = bus.call("GET", Some(&bob), "/v1/inbox", None).await;
    assert_eq!(s, 200, "{v}");
    let ids: Vec<&Value> = v["signals"].as_array().unwrap().iter().map(|s| &s["id"]).collect();
    assert_eq!(ids, vec![&high["signal_id"], &low["signal_id"]]);
    let (_, again) = bus.call("GET", Some(&bob), "/v1/inbox", None).await;
    assert_eq!(again["signals"].as_array().unwrap().len(), 2, "listing delivers nothing");

    let (s, d) = bus.call("GET", Some(&bob), "/v1/inbox?drain=true", None).await;
    assert_eq!(s, 200, "{d}");
    assert_eq!(d["signals"].as_array().unwrap().len(), 2);
    assert_eq!(d["signals"][0]["from"], "alice");
    let (_, empty) = bus.call("GET", Some(&bob), "/v1/inbox?drain=true", None).await;
    assert_eq!(empty["signals"], json!([]));
    let (_, row) =
        bus.call("GET", Some(&bob), &format!("/v1/signals/{}", high["signal_id"].as_str().unwrap()), None).await;
    assert_eq!(row["delivered_via"], "inbox");
    let (s, _) = bus.call("GET", Some(&bob), "/v1/inbox?drain=maybe", None).await;
    assert_eq!(s, 400);
    let (s, _) = bus.call("GET", Some(ADMIN), "/v1/inbox", None).await;
    assert_eq!(s, 403);
}

#[tokio::test]
async fn signal_lists_filter_and_page_newest_first() {
    let bus = Bus::start().await;
    let alice = bus.register("alice").await;
    let bob = bus.register("bob").await;
    let mut sent = Vec::new();
    for n in 0..5 {
        let (_, v) = bus.send(&alice, json!({"to": "bob", "type": "StatusUpdate", "payload": {"n": n}})).await;
        sent.push(v["signal_id"].clone());
    }
    let (_, back) = bus.send(&bob, json!({"to": "alice", "type": "StatusUpdate"})).await;
    bus.recall(&alice, sent[0].as_str().unwrap()).await;

    let mut seen = Vec::new();
    let mut path = "/v1/signals?role=sent&limit=2".to_string();
    loop {
        let (s, v) = bus.call("GET", Some(&alice), &path, None).await;
        assert_eq!(s, 200, "{v}");
        seen.extend(v["signals"].as_array().unwrap().iter().map(|r| r["id"].clone()));
        match v["next_cursor"].as_str() {
            Some(c) => path = format!("/v1/signals?role=sent&limit=2&cursor={c}"),
            None => break,
        }
    }
    let expected: Vec<Value> = sent.iter().rev().cloned().collect();
    assert_eq!(seen, expected, "newest first, each once across pages");

    let (_, v) = bus.call("GET", Some(&alice), "/v1/signals?role=received", None).await;
    assert_eq!(v["signals"][0]["id"], back["signal_id"]);
    let (_, v) = bus.call("GET", Some(&alice), "/v1/signals?status=recalled", None).await;
    assert_eq!(v["signals"].as_array().unwrap().len(), 1);
    assert_eq!(v["next_cursor"], Value::Null);
    let (_, v) = bus.call("GET", Some(&alice), "/v1/signals", None).await;
    let all: HashSet<String> = v["signals"].as_array().unwrap().iter().map(|r| r["id"].to_string()).collect();
    assert_eq!(all.len(), 6);
    for bad in ["role=both", "status=lost", "limit=0", "limit=x", "cursor=zz"] {
        let (s, v) = bus.call("GET", Some(&alice), &format!("/v1/signals?{bad}"), None).await;
        assert_eq!((s, v["error"]["code"].as_str()), (400, Some("invalid_request")), "{bad}");
    }
}

#[tokio::test]
async fn admin_rebuild_and_doctor_go_through_the_hook() {
    let dir = tempfile::tempdir().unwrap();
    let log: bus::log::SharedLog =
        std::sync::Arc::new(bus::log::embedded::EmbeddedLog::open(dir.path()).await.unwrap());
    let models = projector::ReadModels::sqlite(dir.path()).await.unwrap();
    let stop = tokio_util::sync::CancellationToken::new();
    let mut config = crate::support::config("node-a");
    crate::support::spawn_projector(&log, &models, config.stale_after, &stop);
    config.admin_ops = Some(gateway::ProjectorAdmin::shared(log.clone(), models.clone()));
    let bus = Bus::node(log, models, config, stop, Some(dir)).await;
    let alice = bus.register("alice").await;
    bus.register("bob").await;
    bus.send(&alice, json!({"to": "bob", "type": "StatusUpdate"})).await;

    let (s, v) = bus.call("POST", Some(ADMIN), "/v1/admin/rebuild", None).await;
    assert_eq!(s, 200, "{v}");
    assert!(v["events"].as_u64().unwrap() >= 3, "{v}");
    let (s, v) = bus.call("GET", Some(ADMIN), "/v1/admin/doctor", None).await;
    assert_eq!(s, 200, "{v}");
    assert_eq!(v["ok"], true, "{v}");
    assert!(v["checks"].as_array().unwrap().iter().all(|c| c["check"].is_string() && c["ok"] == true));
    let (s, _) = bus.call("GET", Some(&alice), "/v1/admin/doctor", None).await;
    assert_eq!(s, 403);

    // Without the hook the endpoints say so.
    let plain = Bus::start().await;
    let (s, v) = plain.call("POST", Some(ADMIN), "/v1/admin/rebuild", None).await;
    assert_eq!((s, v["error"]["code"].as_str()), (503, Some("unavailable")));
}
