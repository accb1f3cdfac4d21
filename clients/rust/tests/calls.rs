//! Scenarios S4–S6, S11, S12 and S15–S17 of clients/SCENARIOS.md: send outcomes by recipient
//! state, send fields and errors, recall, ask/reply, inbox/drain/get/list, plugin facts and the
//! admin calls — each against its own real `signalbus serve`.
//!
//! Deliberately over both paths where the scenario says so: a connected client calls over its
//! session, a never-connected one over HTTP.

mod support;

use std::time::Duration;

use reqwest::Method;
use serde_json::{json, Value};
use signalbus_client::{Client, Error, ListQuery, RecallOutcome, SendOutcome, SendRequest, SendResult, Signal};
use support::{eventually, Bus};

fn sent(out: SendOutcome) -> SendResult {
    match out {
        SendOutcome::Sent(r) => r,
        SendOutcome::Spooled(s) => panic!("expected a send the bus accepted, got {s:?}"),
    }
}

fn bounce(r: signalbus_client::Result<SendOutcome>) -> (String, Option<String>, Option<u16>) {
    match r {
        Err(Error::RecipientUnavailable { recipient_state, signal_id, error }) => {
            (recipient_state, signal_id, error.status)
        }
        other => panic!("expected RecipientUnavailable, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s04_send_every_class_to_an_offline_recipient() {
    let bus = Bus::start_new().await;
    let (at, bt) = (bus.token("alice").await, bus.token("bob").await);
    let alice = bus.connected(&at).await;
    let q = sent(
        alice
            .send(SendRequest::new("bob", "Question").payload(json!({"q": "async"})).delivery_class("async"))
            .await
            .unwrap(),
    );
    assert_eq!(
        (q.delivered, q.queued, q.recipient_state.as_str(), q.publish_path.as_str()),
        (false, true, "not_available_offline", "queued_offline")
    );
    let (state, signal_id, status) =
        bounce(alice.send(SendRequest::new("bob", "Question").payload(json!({"q": "sync"}))).await);
    assert_eq!((state.as_str(), status), ("not_available_offline", Some(409))); // over the session: the §8 status all the same (S22)
    uuid::Uuid::parse_str(&signal_id.unwrap()).expect("the bounce's signal_id");
    alice.close().await;
    let bob = Client::new(&bus.url, &bt).unwrap();
    let pending: Vec<String> = bob.inbox(None).await.unwrap().into_iter().map(|s| s.id).collect();
    assert_eq!(pending, vec![q.signal_id]); // the bounce was never queued
    let http_alice = Client::new(&bus.url, &at).unwrap();
    let (state, _, status) = bounce(http_alice.send(SendRequest::new("bob", "Blocker").payload(json!({"b": 1}))).await);
    assert_eq!((state.as_str(), status), ("not_available_offline", Some(409)));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s05_send_every_class_to_a_stale_recipient() {
    let bus = Bus::start_new().await;
    let (at, bt) = (bus.token("alice").await, bus.token("bob").await);
    let bob = Client::new(&bus.url, &bt).unwrap();
    let (status, body) =
        bob.http().raw(Method::POST, "/v1/sessions", &[], Some(&json!({"kind": "shim"}))).await.unwrap();
    assert!(status.is_success(), "{status} {body}");
    let alice = bus.connected(&at).await;
    // Older than --stale-after, not yet closed: wait for the roster to say so.
    eventually("bob's silent session turns stale", 15, || async {
        let roster = alice.agents().await?;
        Ok(roster.into_iter().find(|a| a.identity == "bob" && a.state == "not_available_stale").map(|_| ()))
    })
    .await;
    let req = SendRequest::new("bob", "Blocker").payload(json!({"b": "stale"})).delivery_class("sync");
    assert_eq!(bounce(alice.send(req).await).0, "not_available_stale");
    let q = sent(alice.send(SendRequest::new("bob", "TaskAssigned").payload(json!({"t": "stale"}))).await.unwrap());
    assert_eq!(
        (q.queued, q.recipient_state.as_str(), q.publish_path.as_str()),
        (true, "not_available_stale", "queued_offline")
    );
    alice.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s06_send_fields_errors_and_dedupe() {
    let bus = Bus::start_new().await;
    let at = bus.token("alice").await;
    bus.token("bob").await;
    let alice = bus.connected(&at).await;
    let req = SendRequest::new("bob", "ReviewRequested")
        .payload(json!({"pr": 7, "db": {"password": "hunter2"}}))
        .delivery_class("async")
        .ttl_seconds(120)
        .correlation_id("corr-1")
        .dedupe_key("review-7");
    let res = sent(alice.send(req).await.unwrap());
    assert_eq!((res.redacted.clone(), res.dedupe_key.as_str()), (vec!["db.password".to_string()], "review-7"));
    assert_eq!((res.expires_at - res.created_at).num_seconds(), 120);
    let again = SendRequest::new("bob", "ReviewRequested")
        .payload(json!({"pr": 7}))
        .delivery_class("async")
        .dedupe_key("review-7");
    assert_eq!(sent(alice.send(again).await.unwrap()).signal_id, res.signal_id);
    let row = alice.get(&res.signal_id).await.unwrap();
    assert_eq!(
        (
            row.from_identity.as_str(),
            row.to_identity.as_str(),
            row.signal_type.as_str(),
            row.correlation_id.as_deref(),
            row.status()
        ),
        ("alice", "bob", "ReviewRequested", Some("corr-1"), "pending")
    );
    assert_eq!(row.payload, json!({"pr": 7, "db": {"password": "[REDACTED]"}}));
    let page = alice.list(&ListQuery { role: Some("sent".into()), ..Default::default() }).await.unwrap();
    assert_eq!(page.signals.iter().map(|r| r.id.as_str()).collect::<Vec<_>>(), vec![res.signal_id.as_str()]);
    let auto = sent(alice.send(SendRequest::new("bob", "StatusUpdate")).await.unwrap());
    assert!(auto.dedupe_key.starts_with("sbc-"), "{}", auto.dedupe_key);
    match alice.send(SendRequest::new("nobody", "StatusUpdate")).await {
        Err(e @ Error::UnknownRecipient(_)) => assert!(e.to_string().contains("register"), "{e}"),
        other => panic!("expected UnknownRecipient, got {other:?}"),
    }
    assert!(matches!(alice.send(SendRequest::new("bob", "not a type!")).await, Err(Error::InvalidRequest(_))));
    let zero = SendRequest::new("bob", "StatusUpdate").ttl_seconds(0);
    assert!(matches!(alice.send(zero).await, Err(Error::InvalidRequest(_))));
    alice.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s11_recall() {
    let bus = Bus::start_new().await;
    let (at, bt) = (bus.token("alice").await, bus.token("bob").await);
    let alice = bus.connected(&at).await;
    let res = sent(alice.send(SendRequest::new("bob", "TaskAssigned").payload(json!({"t": 1}))).await.unwrap());
    assert_eq!(alice.recall(&res.signal_id).await.unwrap(), RecallOutcome::Recalled);
    assert_eq!(alice.recall(&res.signal_id).await.unwrap(), RecallOutcome::Recalled);
    let unknown = uuid::Uuid::new_v4().to_string();
    assert_eq!(alice.recall(&unknown).await.unwrap(), RecallOutcome::NotFound);
    let kept = sent(alice.send(SendRequest::new("bob", "TaskAssigned").payload(json!({"t": 2}))).await.unwrap());
    let bob = Client::new(&bus.url, &bt).unwrap();
    assert_eq!(bob.recall(&kept.signal_id).await.unwrap(), RecallOutcome::NotFound); // only the sender
    let drained: Vec<String> = bob.drain(None).await.unwrap().into_iter().map(|s| s.id).collect();
    assert_eq!(drained, vec![kept.signal_id.clone()]); // never the recalled one
    assert_eq!(alice.recall(&kept.signal_id).await.unwrap(), RecallOutcome::AlreadyDelivered);
    assert_eq!(alice.get(&res.signal_id).await.unwrap().status(), "recalled");
    alice.close().await;
    let http_alice = Client::new(&bus.url, &at).unwrap(); // the same answers over HTTP
    assert_eq!(http_alice.recall(&unknown).await.unwrap(), RecallOutcome::NotFound);
    assert_eq!(http_alice.recall(&res.signal_id).await.unwrap(), RecallOutcome::Recalled);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s12_ask_and_reply() {
    let bus = Bus::start_new().await;
    let (at, bt, ct) = (bus.token("alice").await, bus.token("bob").await, bus.token("carol").await);
    bus.token("dave").await; // registered, never connected
    let bob = Client::builder(&bus.url, &bt)
        .on_signal(|s: Signal, me: Client| async move {
            let q = s.payload["q"].as_i64().unwrap_or_default();
            me.reply(&s, "Answer", json!({"a": q * 2})).await?;
            Ok(())
        })
        .build()
        .unwrap();
    bob.connect().await.unwrap();
    let carol = bus.connected(&ct).await;
    let alice = bus.connected(&at).await;
    let reply = alice.ask("bob", "Question", json!({"q": 21}), Duration::from_secs(10)).await.unwrap();
    assert_eq!((reply.from.as_str(), reply.signal_type.as_str(), &reply.payload), ("bob", "Answer", &json!({"a": 42})));
    assert!(reply.correlation_id.is_some());
    match alice.ask("carol", "Question", json!({"q": 1}), Duration::from_millis(500)).await {
        Err(Error::AskTimeout { signal_id, correlation_id, .. }) => {
            assert!(signal_id.is_some() && !correlation_id.is_empty())
        }
        other => panic!("expected AskTimeout, got {other:?}"),
    }
    match alice.ask("dave", "Question", json!({"q": 0}), Duration::from_secs(5)).await {
        Err(Error::RecipientUnavailable { recipient_state, .. }) => {
            assert_eq!(recipient_state, "not_available_offline")
        }
        other => panic!("expected RecipientUnavailable, got {other:?}"),
    }
    for c in [alice, bob, carol] {
        c.close().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s15_inbox_drain_get_list() {
    let bus = Bus::start_new().await;
    let (at, bt) = (bus.token("alice").await, bus.token("bob").await);
    let (alice, bob) = (Client::new(&bus.url, &at).unwrap(), Client::new(&bus.url, &bt).unwrap()); // HTTP only
    let low = sent(alice.send(SendRequest::new("bob", "StatusUpdate").payload(json!({"n": "low"}))).await.unwrap());
    let high = sent(
        alice
            .send(SendRequest::new("bob", "Blocker").payload(json!({"n": "high"})).delivery_class("async"))
            .await
            .unwrap(),
    );
    let ids = |v: Vec<Signal>| v.into_iter().map(|s| s.id).collect::<Vec<_>>();
    let order = vec![high.signal_id.clone(), low.signal_id.clone()];
    assert_eq!(ids(bob.inbox(None).await.unwrap()), order); // priority first
    assert_eq!(ids(bob.inbox(None).await.unwrap()), order); // inbox delivers nothing
    let q = ListQuery { role: Some("sent".into()), status: Some("pending".into()), limit: Some(1), cursor: None };
    let page = alice.list(&q).await.unwrap();
    assert_eq!(page.signals[0].id, high.signal_id);
    assert_eq!(page.signals.len(), 1);
    let page2 = alice.list(&ListQuery { cursor: page.next_cursor.clone(), ..q }).await.unwrap();
    assert!(page.next_cursor.is_some());
    assert_eq!(page2.signals.iter().map(|r| r.id.clone()).collect::<Vec<_>>(), vec![low.signal_id.clone()]);
    let drained = ids(bob.drain(None).await.unwrap());
    assert_eq!(drained, order);
    assert!(bob.drain(None).await.unwrap().is_empty());
    let row = bob.get(&high.signal_id).await.unwrap();
    assert_eq!((row.delivered_via.as_deref(), row.status()), (Some("inbox"), "delivered"));
    assert_eq!(bob.ack(&drained).await.unwrap(), 2);
    let recv = ListQuery { role: Some("received".into()), status: Some("delivered".into()), ..Default::default() };
    let mut got: Vec<String> = bob.list(&recv).await.unwrap().signals.into_iter().map(|r| r.id).collect();
    got.sort();
    let mut want = order.clone();
    want.sort();
    assert_eq!(got, want);
    assert!(matches!(bob.get(&uuid::Uuid::new_v4().to_string()).await, Err(Error::NotFound(_))));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s16_plugin_facts() {
    let bus = Bus::start_new().await;
    let bt = bus.token("bob").await;
    bus.token("alice").await;
    let bob = bus.connected(&bt).await;
    assert_eq!(bob.record_fact("bob/watcher", "seen", json!({"head": "a1"})).await.unwrap(), 1); // over the session
    bob.close().await;
    let http_bob = Client::new(&bus.url, &bt).unwrap();
    assert_eq!(http_bob.record_fact("bob/watcher", "seen", json!({"head": "b2", "token": "x"})).await.unwrap(), 2);
    let st = http_bob.state("bob/watcher").await.unwrap();
    assert_eq!(
        (st.plugin.as_str(), &st.state, st.seq),
        ("bob/watcher", &json!({"head": "b2", "token": "[REDACTED]"}), 2)
    );
    let page = http_bob.facts("bob/watcher", None, Some(1), None).await.unwrap();
    assert_eq!((page.facts.iter().map(|f| f.seq).collect::<Vec<_>>(), page.next_before_seq), (vec![2], Some(2)));
    assert_eq!(page.facts[0].recorded_by, "bob");
    let older = http_bob.facts("bob/watcher", Some("seen"), None, page.next_before_seq).await.unwrap();
    assert_eq!((older.facts.iter().map(|f| f.seq).collect::<Vec<_>>(), older.next_before_seq), (vec![1], None));
    let forbidden = http_bob.record_fact("alice", "seen", json!({})).await.unwrap_err();
    assert_eq!(forbidden.code(), "forbidden");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s17_admin_register_rotate_remove() {
    let bus = Bus::start_new().await;
    let admin = bus.admin();
    let reg = admin.register("erin", None, Some("daemon")).await.unwrap();
    assert_eq!((reg.identity.as_str(), reg.tenant.as_str()), ("erin", "default"));
    assert!(reg.token.starts_with("sb_"));
    assert!(matches!(admin.register("erin", None, None).await, Err(Error::AlreadyRegistered(_))));
    let erin = Client::builder(&bus.url, &reg.token)
        .reconnect(Duration::from_millis(200), Duration::from_millis(500))
        .build()
        .unwrap();
    erin.connect().await.unwrap();
    let rotated = admin.rotate("erin", None).await.unwrap();
    assert_ne!(rotated.token, reg.token);
    erin.wait_disconnected(Duration::from_secs(5)).await.unwrap(); // closed 1008: no reconnect
    assert!(matches!(erin.wait_connected(Duration::from_secs(5)).await, Err(Error::Unauthorized(_))));
    erin.close().await;
    let old = Client::new(&bus.url, &reg.token).unwrap();
    assert!(matches!(old.agents().await, Err(Error::Unauthorized(_))));
    let roster: Vec<String> = admin.agents(None).await.unwrap().into_iter().map(|a| a.identity).collect();
    assert_eq!(roster, vec!["erin".to_string()]);
    let frank = Client::new(&bus.url, &bus.token("frank").await).unwrap();
    let pending = frank.send(SendRequest::new("erin", "StatusUpdate").payload(json!({"s": 1}))).await.unwrap();
    assert!(pending.sent().unwrap().queued, "erin is offline: queued");
    let removal = admin.remove("erin", None).await.unwrap(); // what the bus answers
    assert_eq!((removal.identity.as_str(), removal.tenant.as_str(), removal.signals_expired), ("erin", "default", 1));
    assert!((chrono::Utc::now() - removal.removed_at).num_seconds().abs() < 60);
    let gone = Client::new(&bus.url, &rotated.token).unwrap();
    assert!(matches!(gone.agents().await, Err(Error::Unauthorized(_))));
    let _: Value = admin.rebuild().await.unwrap();
}
