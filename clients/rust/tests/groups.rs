//! Scenario S31 of clients/SCENARIOS.md: groups and fan-out — a self-join group, the roster
//! signals, a send to a group (one entry per member, one fan-out id, repeated with its
//! dedupe_key without a second signal to anyone), recalling the fan-out, and the refusals —
//! against a real `signalbus serve`.
//!
//! Deliberately over both paths: alice sends over her session, carol (never connected) calls
//! over HTTP and stays offline, so her signals queue.

mod support;

use std::time::Duration;

use serde_json::json;
use signalbus_client::{Client, Error, GroupOptions, RecallBy, RecallOutcome, SendRequest};
use support::Bus;

const WAIT: Duration = Duration::from_secs(15);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s31_groups_and_fanout() {
    let bus = Bus::start_new().await;
    let admin = bus.admin();
    let (at, bt, ct) = (bus.token("alice").await, bus.token("bob").await, bus.token("carol").await);
    let self_join = GroupOptions { self_join: true, ..Default::default() };
    let created = admin.create_group("@reviewers", &self_join).await.unwrap();
    assert_eq!((created.group.as_str(), created.self_join, created.announce), ("@reviewers", true, true));
    let with_bob = admin.add_member("reviewers", "bob", None).await.unwrap();
    assert_eq!(with_bob.identities(), vec!["bob"]);
    let bob = bus.connected(&bt).await;
    let carol = Client::new(&bus.url, &ct).unwrap();
    let joined = carol.join_group("@reviewers").await.unwrap();
    assert_eq!(joined.identities(), vec!["bob", "carol"]);

    let peer = bob.receive(WAIT).await.unwrap();
    bob.ack([&peer]).await.unwrap();
    assert_eq!(
        (peer.signal_type.as_str(), peer.from.as_str(), &peer.payload),
        ("PeerJoined", "signalbus", &json!({"group": "@reviewers", "identity": "carol"}))
    );
    let alice = bus.connected(&at).await;
    let listed = alice.groups().await.unwrap();
    let reviewers = listed.iter().find(|g| g.group == "@reviewers").expect("@reviewers listed");
    assert_eq!((reviewers.members.clone(), reviewers.self_join), (vec!["bob".to_string(), "carol".to_string()], true));
    let shown = alice.group("reviewers").await.unwrap();
    let states: Vec<(&str, Option<&str>)> =
        shown.members.iter().map(|m| (m.identity.as_str(), m.recipient_state.as_deref())).collect();
    assert_eq!(states, vec![("bob", Some("available")), ("carol", Some("not_available_offline"))]);
    assert!(shown.members.iter().all(|m| m.added_by.is_some() && m.added_at.is_some()), "{shown:?}");

    let req = SendRequest::new("@reviewers", "ReviewRequested").payload(json!({"pr": 31})).dedupe_key("review-31");
    let fan = alice.send_group(req.clone()).await.unwrap();
    assert_eq!((fan.to.as_str(), fan.results.len(), fan.dedupe_key.as_str()), ("@reviewers", 2, "review-31"));
    let to: Vec<&str> = fan.results.iter().map(|r| r.to.as_str()).collect();
    assert_eq!(to, vec!["bob", "carol"]);
    let (b, c) = (fan.member("bob").unwrap(), fan.member("carol").unwrap());
    assert!(b.accepted() && b.delivered && !b.queued, "{b:?}");
    assert!(c.accepted() && c.queued && !c.delivered, "{c:?}");
    assert_eq!(c.recipient_state.as_deref(), Some("not_available_offline"));
    let got = bob.receive(WAIT).await.unwrap();
    bob.ack([&got]).await.unwrap();
    assert_eq!((got.signal_type.as_str(), Some(got.id.as_str())), ("ReviewRequested", b.signal_id.as_deref()));

    let again = alice.send_group(req).await.unwrap();
    assert_eq!(again.fanout_id, fan.fanout_id);
    let ids = |f: &signalbus_client::FanoutResult| f.results.iter().map(|r| r.signal_id.clone()).collect::<Vec<_>>();
    assert_eq!(ids(&again), ids(&fan));
    assert!(matches!(bob.receive(Duration::from_secs(1)).await, Err(Error::Timeout { .. })), "no second signal to bob");
    let pending = carol.inbox(None).await.unwrap();
    assert_eq!(pending.iter().filter(|s| s.signal_type == "ReviewRequested").count(), 1, "{pending:?}");

    let mut recalled = alice.recall_many(RecallBy::Fanout(fan.fanout_id.clone())).await.unwrap();
    recalled.sort_by(|x, y| x.to.cmp(&y.to));
    let outcomes: Vec<(&str, RecallOutcome)> = recalled.iter().map(|r| (r.to.as_str(), r.outcome)).collect();
    assert_eq!(outcomes, vec![("bob", RecallOutcome::AlreadyDelivered), ("carol", RecallOutcome::Recalled)]);
    assert!(carol.inbox(None).await.unwrap().iter().all(|s| s.signal_type != "ReviewRequested"));
    assert!(bob.recall_many(RecallBy::Fanout(fan.fanout_id.clone())).await.unwrap().is_empty()); // not bob's
    let corr = SendRequest::new("@reviewers", "StatusUpdate").correlation_id("thread-9");
    alice.send_group(corr).await.unwrap();
    let by_corr = alice.recall_many(RecallBy::Correlation("thread-9".into())).await.unwrap();
    assert_eq!(by_corr.len(), 2, "{by_corr:?}");
    let status = bob.receive(WAIT).await.unwrap(); // pushed to bob before the recall
    bob.ack([&status]).await.unwrap();
    assert_eq!(status.signal_type, "StatusUpdate");

    admin.create_group("@core", &GroupOptions::default()).await.unwrap();
    assert!(matches!(carol.join_group("core").await, Err(Error::Forbidden(_))));
    match alice.send_group(SendRequest::new("@nope", "StatusUpdate")).await {
        Err(e @ Error::UnknownGroup(_)) => assert_eq!(e.status(), Some(404)),
        other => panic!("expected UnknownGroup, got {other:?}"),
    }
    assert!(matches!(alice.send(SendRequest::new("@reviewers", "StatusUpdate")).await, Err(Error::Usage(_))));
    assert!(matches!(alice.group("@nope").await, Err(Error::UnknownGroup(_))));

    let left = carol.leave_group("reviewers").await.unwrap();
    assert_eq!(left.identities(), vec!["bob"]);
    let gone = bob.receive(WAIT).await.unwrap();
    bob.ack([&gone]).await.unwrap();
    assert_eq!(
        (gone.signal_type.as_str(), &gone.payload),
        ("PeerLeft", &json!({"group": "@reviewers", "identity": "carol"}))
    );
    assert_eq!(admin.remove_member("reviewers", "bob", None).await.unwrap().identities(), Vec::<&str>::new());
    admin.delete_group("reviewers", None).await.unwrap();
    assert!(matches!(admin.delete_group("reviewers", None).await, Err(Error::UnknownGroup(_))));
    alice.close().await;
    bob.close().await;
}
