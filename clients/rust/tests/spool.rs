//! Scenarios S13, S14 and S19 of clients/SCENARIOS.md: the offline spool against a real
//! `signalbus serve` that is killed and restarted — spooling while it is down, replaying newest
//! first with no duplicate and the TTL left, the spool's size, age and TTL caps, and the sends
//! it never takes (sync sends and asks).
//!
//! Deliberately checks the outcome on the bus (what the recipient drains), not only what the
//! client reports.

mod support;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::Utc;
use serde_json::{json, Value};
use signalbus_client::{Client, Error, SendOutcome, SendRequest, SendResult, Spool};
use support::{eventually, Bus};

type Replayed = Arc<Mutex<Vec<(String, signalbus_client::Result<SendResult>)>>>;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s13_spool_while_the_bus_is_down_then_replay_without_duplicates() {
    let mut bus = Bus::start_new().await;
    let (at, bt) = (bus.token("alice").await, bus.token("bob").await);
    let spool_dir = bus.dir.path().join("spool");
    let replayed: Replayed = Arc::default();
    let log = replayed.clone();
    let alice = Client::builder(&bus.url, &at)
        .spool_dir(&spool_dir)
        .replay_interval(Duration::from_millis(200))
        .reconnect(Duration::from_millis(200), Duration::from_millis(500))
        .on_replay(move |e, r| log.lock().unwrap().push((e.dedupe_key().to_string(), r.clone())))
        .build()
        .unwrap();
    alice.connect().await.unwrap();
    let task0 = SendRequest::new("bob", "TaskAssigned").payload(json!({"n": 0})).dedupe_key("task-0");
    let stored = match alice.send(task0.clone()).await.unwrap() {
        SendOutcome::Sent(r) => r,
        other => panic!("expected the bus to take it, got {other:?}"),
    };
    bus.kill();
    alice.wait_disconnected(Duration::from_secs(5)).await.unwrap();
    let mut keys = Vec::new();
    for n in 1..=3 {
        let req = SendRequest::new("bob", "TaskAssigned").payload(json!({"n": n})).ttl_seconds(3600);
        match alice.send(req).await.unwrap() {
            SendOutcome::Spooled(s) => keys.push(s.dedupe_key),
            other => panic!("expected Spooled, got {other:?}"),
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let resend = alice.send(task0).await.unwrap(); // the outcome is "unknown" to the caller
    assert!(matches!(&resend, SendOutcome::Spooled(s) if s.dedupe_key == "task-0"), "{resend:?}");
    let sync = alice.send(SendRequest::new("bob", "Blocker").payload(json!({"b": 1}))).await; // never spooled (S19)
    assert!(matches!(sync, Err(Error::Unreachable { .. })), "{sync:?}");
    let spool = alice.spool().unwrap().clone();
    assert_eq!(spool.len(), 4);
    assert!(keys.iter().all(|k| k.starts_with("sbc-")), "{keys:?}");
    bus.start().await;
    let (r, s) = (replayed.clone(), spool.clone());
    eventually("spool replayed", 20, || {
        let (r, s) = (r.clone(), s.clone());
        async move { Ok((r.lock().unwrap().len() == 4 && s.is_empty()).then_some(())) }
    })
    .await;
    let done = replayed.lock().unwrap().clone();
    let order: Vec<&str> = done.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(order, vec!["task-0", &keys[2], &keys[1], &keys[0]]); // newest first
    let outcome = |key: &str| done.iter().find(|(k, _)| k == key).map(|(_, r)| r.clone()).unwrap();
    assert_eq!(outcome("task-0").unwrap().signal_id, stored.signal_id); // the original signal
    alice.close().await;

    let bob = Client::new(&bus.url, &bt).unwrap();
    let drained = bob.drain(None).await.unwrap();
    let mut ns: Vec<i64> = drained.iter().map(|s| s.payload["n"].as_i64().unwrap()).collect();
    ns.sort();
    assert_eq!(ns, vec![0, 1, 2, 3]); // each exactly once: no duplicate of task-0
    let by_n = |n: i64| drained.iter().find(|s| s.payload["n"] == json!(n)).unwrap();
    assert!(by_n(3).created_at < by_n(2).created_at && by_n(2).created_at < by_n(1).created_at);
    for n in 1..=3 {
        let ttl = (by_n(n).expires_at - by_n(n).created_at).num_milliseconds();
        assert!(3_500_000 < ttl && ttl <= 3_600_000, "n={n}: ttl {ttl} ms is not the TTL left");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s19_sync_sends_and_asks_are_never_spooled() {
    let mut bus = Bus::start_new().await;
    let at = bus.token("alice").await;
    let bt = bus.token("bob").await;
    let alice = Client::builder(&bus.url, &at)
        .spool_dir(bus.dir.path().join("a"))
        .reconnect(Duration::from_secs(5), Duration::from_secs(5))
        .build()
        .unwrap();
    // Never connected.
    let never = Client::builder(&bus.url, &at).spool_dir(bus.dir.path().join("n")).identity("alice").build().unwrap();
    alice.connect().await.unwrap();
    bus.kill(); // the bus is unreachable
    alice.wait_disconnected(Duration::from_secs(5)).await.unwrap();
    let nothing_sent = |r: &signalbus_client::Result<_>| matches!(r, Err(e @ Error::Unreachable { .. }) if e.to_string().contains("nothing was sent"));
    for client in [&alice, &never] {
        // A lost session and no session behave the same.
        let spool = client.spool().unwrap().clone();
        let blocker = client.send(SendRequest::new("bob", "Blocker").payload(json!({"b": 1}))).await; // sync by default
        assert!(nothing_sent(&blocker), "{blocker:?}");
        let sync = client.send(SendRequest::new("bob", "TaskAssigned").delivery_class("sync")).await;
        assert!(nothing_sent(&sync), "{sync:?}");
        let started = std::time::Instant::now();
        let ask = client.ask("bob", "Question", json!({"q": 1}), Duration::from_secs(10)).await;
        assert!(
            matches!(&ask, Err(e @ Error::Unreachable { .. }) if e.to_string().contains("nothing was sent")),
            "{ask:?}"
        );
        let req = SendRequest::new("bob", "StatusUpdate").delivery_class("async");
        let ask = client.ask_with(req, Duration::from_secs(10)).await;
        assert!(matches!(&ask, Err(Error::Unreachable { .. })), "{ask:?}");
        assert!(started.elapsed() < Duration::from_secs(2), "at once, not after the ask's timeout");
        assert_eq!(spool.len(), 0);
        let queued = client.send(SendRequest::new("bob", "TaskAssigned").payload(json!({"t": 2}))).await.unwrap();
        assert!(queued.is_spooled() && queued.signal_id().is_none(), "async: still spooled, {queued:?}");
        assert_eq!(spool.len(), 1);
    }
    // The bus is back: the spooled async sends arrive; the failed sync sends and asks never do.
    bus.start().await;
    alice.wait_connected(Duration::from_secs(15)).await.unwrap();
    for client in [&alice, &never] {
        client.replay_spool().await;
        assert_eq!(client.spool().unwrap().len(), 0);
    }
    tokio::time::sleep(Duration::from_secs(1)).await; // room for anything replayed late
    let pending = Client::new(&bus.url, &bt).unwrap().inbox(None).await.unwrap();
    let got: Vec<(String, Value)> = pending.into_iter().map(|s| (s.signal_type, s.payload)).collect();
    assert_eq!(got, vec![("TaskAssigned".to_string(), json!({"t": 2})); 2], "only the async sends");
    alice.close().await;
    never.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s14_spool_caps_and_ttl() {
    let bus = Bus::start_new().await;
    let (at, bt) = (bus.token("alice").await, bus.token("bob").await);
    let dir = bus.dir.path().join("spool");
    let spool = Spool::open(&dir, 2000, 3600).unwrap();
    let now = Utc::now();
    let ago = |s: i64| now - chrono::Duration::seconds(s);
    let small = |n: &str| SendRequest::new("bob", "StatusUpdate").payload(json!({"n": n})).dedupe_key(n);
    let put = |req: SendRequest, ttl: u64, at| spool.put(&req, ttl, Some("alice"), "test", at);
    let old = put(small("old"), 86_400, ago(7200)).unwrap();
    let expired = put(small("exp"), 60, ago(120)).unwrap();
    let aged = put(small("aged"), 600, ago(100)).unwrap();
    assert!(!old.path.exists(), "past the age cap (1 h): evicted when the next entry was written");
    let big = |k: &str| SendRequest::new("bob", "StatusUpdate").payload(json!({"pad": "x".repeat(700)})).dedupe_key(k);
    let first = put(big("big-1"), 600, ago(50)).unwrap();
    let second = put(big("big-2"), 600, ago(40)).unwrap();
    assert!(!expired.path.exists() && !aged.path.exists(), "filling the spool evicts the oldest first");
    assert!(first.path.exists() && second.path.exists());
    assert!(spool.total_bytes() <= 2000);
    let huge = SendRequest::new("bob", "StatusUpdate").payload(json!({"pad": "x".repeat(5000)})).dedupe_key("huge");
    assert_eq!(put(huge, 60, now).unwrap_err().code(), "spool_full");
    put(small("gone"), 30, ago(60)).unwrap();
    assert!(!first.path.exists(), "writing gone needed room: the oldest (big-1) was evicted");

    let seen: Arc<Mutex<Vec<(String, bool)>>> = Arc::default();
    let log = seen.clone();
    let alice = Client::builder(&bus.url, &at)
        .spool_dir(&dir)
        .spool_caps(2000, Duration::from_secs(3600))
        .on_replay(move |e, r| {
            log.lock().unwrap().push((e.dedupe_key().to_string(), matches!(r, Err(Error::SpoolExpired { .. }))))
        })
        .build()
        .unwrap();
    let report = alice.replay_spool().await;
    assert_eq!(report.expired, vec!["gone".to_string()]);
    assert!(seen.lock().unwrap().contains(&("gone".to_string(), true)), "SpoolExpired reported");
    assert_eq!(report.replayed.iter().map(|r| r.dedupe_key.as_str()).collect::<Vec<_>>(), vec!["big-2"]);
    assert!(spool.is_empty());
    let rows = Client::new(&bus.url, &bt).unwrap().drain(None).await.unwrap();
    assert_eq!(rows.len(), 1);
    let ttl = (rows[0].expires_at - rows[0].created_at).num_seconds();
    assert!((550..=560).contains(&ttl), "600 s less the ~40 s spent spooled, got {ttl}");
}
