//! Scenarios S30 and S31 of clients/SCENARIOS.md: a directive to a group (one claim wins, the
//! others' requests are recalled, declined by all is rejected), and groups and fan-out — a
//! self-join group, the roster signals, a send to a group (one entry per member, one fan-out id,
//! repeated with its dedupe_key without a second signal to anyone), recalling the fan-out, and
//! the refusals — each against its own real `signalbus serve`.
//!
//! Deliberately over both paths: alice sends over her session, carol (never connected) calls
//! over HTTP and stays offline, so her signals queue.

mod support;

use std::time::Duration;

use serde_json::json;
use signalbus_client::{
    Client, Directive, DirectiveQuery, DirectiveRequest, DirectiveStatus, Error, GroupOptions, RecallMany,
    RecallOutcome, SendRequest, Signal,
};
use support::{eventually, Bus};

const WAIT: Duration = Duration::from_secs(15);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s31_groups_and_fanout() {
    let bus = Bus::start_new().await;
    let admin = bus.admin();
    let (at, bt, ct) = (bus.token("alice").await, bus.token("bob").await, bus.token("carol").await);
    let self_join = GroupOptions { self_join: true, ..Default::default() };
    let created = admin.create_group("@reviewers", &self_join, None).await.unwrap();
    assert_eq!((created.name.as_str(), created.self_join, created.announce), ("@reviewers", true, true));
    admin.add_member("reviewers", "bob", None).await.unwrap();
    let with_bob = admin.add_member("@reviewers", "bob", None).await.unwrap(); // idempotent
    assert_eq!(with_bob.identities(), vec!["bob"]);
    assert!(matches!(admin.add_member("reviewers", "nobody", None).await, Err(Error::UnknownRecipient(_))));
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
    let reviewers = listed.iter().find(|g| g.name == "@reviewers").expect("@reviewers listed");
    assert_eq!((reviewers.identities(), reviewers.self_join), (vec!["bob", "carol"], true));
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
    assert_eq!((b.publish_path.as_deref(), c.publish_path.as_deref()), (Some("pushed_to_ws"), Some("queued_offline")));
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

    let mut recalled = alice.recall_many(RecallMany::Fanout(fan.fanout_id.clone())).await.unwrap();
    recalled.sort_by(|x, y| x.to.cmp(&y.to));
    let outcomes: Vec<(&str, RecallOutcome)> = recalled.iter().map(|r| (r.to.as_str(), r.outcome)).collect();
    assert_eq!(outcomes, vec![("bob", RecallOutcome::AlreadyDelivered), ("carol", RecallOutcome::Recalled)]);
    assert!(carol.inbox(None).await.unwrap().iter().all(|s| s.signal_type != "ReviewRequested"));
    assert!(bob.recall_many(RecallMany::Fanout(fan.fanout_id.clone())).await.unwrap().is_empty()); // not bob's
    let unknown = uuid::Uuid::new_v4().to_string();
    assert!(alice.recall_many(RecallMany::Fanout(unknown)).await.unwrap().is_empty());
    let corr = SendRequest::new("@reviewers", "StatusUpdate").correlation_id("thread-9");
    alice.send_group(corr).await.unwrap();
    assert!(carol.recall_many(RecallMany::Correlation("thread-9".into())).await.unwrap().is_empty()); // not carol's
    let by_corr = alice.recall_many(RecallMany::Correlation("thread-9".into())).await.unwrap();
    assert_eq!(by_corr.len(), 2, "{by_corr:?}");
    let status = bob.receive(WAIT).await.unwrap(); // pushed to bob before the recall
    bob.ack([&status]).await.unwrap();
    assert_eq!(status.signal_type, "StatusUpdate");

    let mine = carol.send_group(SendRequest::new("@reviewers", "StatusUpdate").payload(json!({"from": "carol"}))).await;
    assert_eq!(mine.unwrap().results.iter().map(|r| r.to.as_str()).collect::<Vec<_>>(), vec!["bob"]); // never the sender
    let from_carol = bob.receive(WAIT).await.unwrap();
    bob.ack([&from_carol]).await.unwrap();
    assert_eq!((from_carol.from.as_str(), &from_carol.payload), ("carol", &json!({"from": "carol"})));

    admin.create_group("@leads", &GroupOptions::default(), None).await.unwrap();
    assert!(matches!(carol.join_group("leads").await, Err(Error::Forbidden { .. })));
    let http_alice = Client::new(&bus.url, &at).unwrap();
    for sender in [&alice, &http_alice] {
        match sender.send_group(SendRequest::new("@nope", "StatusUpdate")).await {
            Err(e @ Error::UnknownGroup(_)) => assert_eq!(e.status(), Some(404)),
            other => panic!("expected UnknownGroup, got {other:?}"),
        }
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
    let names = |gs: Vec<signalbus_client::Group>| gs.into_iter().map(|g| g.name).collect::<Vec<_>>();
    assert_eq!(names(admin.groups(None).await.unwrap()), vec!["@leads", "@reviewers"]);
    assert_eq!(names(admin.groups(Some("default")).await.unwrap()), vec!["@leads", "@reviewers"]);
    assert_eq!(admin.group("@reviewers", None).await.unwrap().members, vec![]);
    admin.delete_group("@leads", None).await.unwrap();
    assert!(matches!(admin.delete_group("leads", None).await, Err(Error::UnknownGroup(_))));
    alice.close().await;
    bob.close().await;
}

/// How many of `sigs` are `signal_type` about `directive_id`.
fn about(sigs: &[Signal], signal_type: &str, directive_id: &str) -> usize {
    sigs.iter().filter(|s| s.signal_type == signal_type && s.correlation_id.as_deref() == Some(directive_id)).count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s30_a_group_directive() {
    let bus = Bus::start_new().await;
    let admin = bus.admin();
    let at = bus.token("alice").await;
    let mut members = Vec::new();
    for m in ["m1", "m2", "m3"] {
        members.push(Client::new(&bus.url, &bus.token(m).await).unwrap()); // HTTP only: their requests queue
    }
    admin.create_group("@builders", &GroupOptions::default(), None).await.unwrap();
    for m in ["m1", "m2", "m3"] {
        admin.add_member("builders", m, None).await.unwrap();
    }
    let alice = Client::new(&bus.url, &at).unwrap();
    let build = DirectiveRequest::new("@builders", "build.run").params(json!({"ref": "main"}));
    let d = alice.create_directive(build).await.unwrap();
    assert_eq!(
        (d.assignee.as_str(), d.status, d.claimed_by.as_deref()),
        ("@builders", DirectiveStatus::Requested, None)
    );
    let id = d.directive_id.clone();
    for m in &members {
        assert_eq!(about(&m.inbox(None).await.unwrap(), "DirectiveRequested", &id), 1, "each member is handed it");
    }
    let assigned = DirectiveQuery { role: Some("assigned".into()), ..Default::default() };
    let m3_sees: Vec<String> =
        members[2].list_directives(&assigned).await.unwrap().directives.into_iter().map(|d| d.directive_id).collect();
    assert_eq!(m3_sees, vec![id.clone()]);

    let (one, two) = tokio::join!(members[0].start_directive(&id), members[1].start_directive(&id));
    let (winner, loser) = match (one, two) {
        (Ok(w), Err(l)) => (w, l),
        (Err(l), Ok(w)) => (w, l),
        other => panic!("expected exactly one claim, got {other:?}"),
    };
    let claimer = winner.claimed_by.clone().unwrap();
    assert!(claimer == "m1" || claimer == "m2", "{claimer}");
    match loser {
        Error::AlreadyClaimed { claimed_by, error } => {
            assert_eq!((claimed_by, error.status), (claimer.clone(), Some(409)))
        }
        other => panic!("expected AlreadyClaimed, got {other:?}"),
    }
    let m3 = &members[2];
    eventually("m3's request recalled", 10, || async {
        Ok((about(&m3.inbox(None).await?, "DirectiveRequested", &id) == 0).then_some(()))
    })
    .await;
    let told = alice.inbox(None).await.unwrap();
    let started = told.iter().find(|s| s.signal_type == "DirectiveStarted").expect("alice is told it started");
    assert_eq!((started.from.as_str(), started.correlation_id.as_deref()), (claimer.as_str(), Some(id.as_str())));

    let old = DirectiveRequest::new("@builders", "build.run").params(json!({"ref": "old"}));
    let second = alice.create_directive(old).await.unwrap().directive_id;
    let declined = |d: &Directive| (d.status, d.declined_by.clone());
    let after_m1 = members[0].reject_directive(&second, Some("busy")).await.unwrap();
    assert_eq!(declined(&after_m1), (DirectiveStatus::Requested, vec!["m1".to_string()]));
    assert!(matches!(members[0].start_directive(&second).await, Err(Error::Forbidden { .. })));
    let after_m2 = members[1].reject_directive(&second, None).await.unwrap();
    assert_eq!(declined(&after_m2), (DirectiveStatus::Requested, vec!["m1".to_string(), "m2".to_string()]));
    let after_m3 = members[2].reject_directive(&second, None).await.unwrap();
    assert_eq!(declined(&after_m3), (DirectiveStatus::Rejected, vec!["m1".into(), "m2".into(), "m3".into()]));
    assert_eq!(alice.get_directive(&second, None).await.unwrap().status, DirectiveStatus::Rejected);
    assert_eq!(about(&alice.inbox(None).await.unwrap(), "DirectiveRejected", &second), 1);
}
