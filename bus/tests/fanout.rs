//! Groups and sends to many against a real JetStream (CONTRACT §15): a fan-out whose server is
//! SIGSTOPped half way answers each member truthfully and a repeat with its dedupe key completes
//! exactly the missing members; group commands race through their compare-and-set; a bulk
//! recall decides each signal on its own.
//!
//! Deliberately counts on the stream itself (`read_subject`), never on what the store answered.

mod support;

use std::time::Duration;

use bus::catalog::TypeTable;
use bus::event::{Entity, EventBody, RecipientState};
use bus::fanout::{plan_fanout, plan_roster, FanoutLimits, FanoutPlan};
use bus::group::{GroupCommand, DEFAULT_MAX_FANOUT};
use bus::group_store::FanoutSent;
use bus::send::{RecipientView, SendLimits, SendRequest};
use bus::signal::RecallOutcome;
use bus::store::SignalStore;
use bus::{DomainError, Error};
use chrono::Utc;
use futures::StreamExt;
use serde_json::json;
use support::{connect, unique_stream, TENANT};
use testkit::NatsServer;
use uuid::Uuid;

fn offline(_: &str) -> RecipientView {
    RecipientView {
        registered: true,
        state: RecipientState::NotAvailableOffline,
        has_live_ws: false,
        freshest_session: None,
    }
}

fn plan(types: &TypeTable, members: &[String], key: Option<&str>) -> FanoutPlan {
    let limits = FanoutLimits { types, send: SendLimits::default(), max_fanout: DEFAULT_MAX_FANOUT, now: Utc::now() };
    let req = SendRequest {
        to: "@reviewers".into(),
        signal_type: "StatusUpdate".into(),
        payload: json!({"review": 7}),
        delivery_class: None,
        ttl_seconds: None,
        correlation_id: Some("review-7".into()),
        dedupe_key: key.map(str::to_string),
        deliver_after_seconds: None,
        deliver_at: None,
    };
    plan_fanout(limits, TENANT, "alice", req, members, offline).expect("a valid group send")
}

/// How many `signal.sent` that count are on `signal_id`'s subject.
async fn sent_on_stream(store: &SignalStore, signal_id: Uuid) -> usize {
    let subject = store.log().subjects().of(TENANT, Entity::Signal(signal_id));
    let stored = store.log().read_subject(&subject).await.expect("read the signal's subject");
    stored.iter().filter(|s| matches!(s.event.body, EventBody::SignalSent(_))).count()
}

fn accepted(sent: &FanoutSent) -> Vec<&str> {
    sent.results
        .iter()
        .filter(|r| r.outcome.as_ref().is_ok_and(|o| o.state.sent.is_some()))
        .map(|r| r.to.as_str())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fanout_cut_by_a_stalled_stream_answers_each_member_truly_and_its_repeat_fills_in_the_rest() {
    let mut nats = NatsServer::start().await;
    let log = connect(&nats.url(), &unique_stream(), 1).await;
    let store = SignalStore::new(log.clone());
    let types = TypeTable::default();
    let members: Vec<String> = (0..500).map(|n| format!("m{n:03}")).chain(["alice".to_string()]).collect();

    // The pause must fall after the first few appends and before the last. It is taken once
    // five have reached the server (a subscriber sees each as it is stored), but on a loaded
    // machine the server may store all 500 before this task runs again: such a round proves
    // nothing, so the fan-out is made again under a new key (a new fan-out), up to three times.
    let mut round = 0;
    let (sent, key, fanout_id) = loop {
        round += 1;
        let key = format!("review-7-{round}");
        let watcher = async_nats::connect(nats.url()).await.unwrap();
        let mut published = watcher.subscribe(store.log().subjects().all()).await.unwrap();
        watcher.flush().await.unwrap();
        let first = plan(&types, &members, Some(&key));
        let fanout_id = first.fanout_id;
        let task = tokio::spawn({
            let store = store.clone();
            async move { store.record_fanout(TENANT, "alice", first).await }
        });
        for _ in 0..5 {
            tokio::time::timeout(Duration::from_secs(10), published.next()).await.expect("appends reach the server");
        }
        nats.pause();
        tokio::time::sleep(Duration::from_secs(12)).await;
        nats.resume();
        let sent = tokio::time::timeout(Duration::from_secs(60), task).await.expect("the fan-out ends").unwrap();
        if round == 3 || sent.results.iter().any(|r| r.outcome.is_err()) {
            break (sent, key, fanout_id);
        }
        eprintln!("round {round}: every append was stored before the pause; again under a new key");
    };

    assert_eq!(sent.fanout_id, fanout_id);
    assert_eq!(sent.results.len(), 500, "one entry per member but the sender");
    let ok = accepted(&sent);
    let unavailable: Vec<&str> = sent
        .results
        .iter()
        .filter(|r| matches!(r.outcome, Err(Error::Unavailable(_))))
        .map(|r| r.to.as_str())
        .collect();
    eprintln!("stream paused mid-fan-out: {} accepted, {} unavailable", ok.len(), unavailable.len());
    assert_eq!(ok.len() + unavailable.len(), 500, "each entry is accepted or unavailable: {:?}", sent.results);
    assert!(ok.len() >= 5, "the appends before the pause were accepted: {}", ok.len());
    assert!(!unavailable.is_empty(), "the pause cut some appends: {ok:?}");
    for entry in &sent.results {
        let on_stream = sent_on_stream(&store, entry.signal_id).await;
        match &entry.outcome {
            Ok(recorded) => {
                assert!(recorded.created, "{}: the first attempt recorded it", entry.to);
                let s = recorded.state.sent.as_ref().unwrap();
                assert_eq!(
                    (s.fanout_id, s.signal_id, s.to.as_str()),
                    (Some(fanout_id), entry.signal_id, entry.to.as_str())
                );
                assert_eq!(on_stream, 1, "{} was answered accepted", entry.to);
            }
            Err(_) => assert_eq!(on_stream, 0, "{} was answered unavailable but counts on the stream", entry.to),
        }
    }

    // The repeat answers the accepted members with their signals and sends to the others.
    let again = store.record_fanout(TENANT, "alice", plan(&types, &members, Some(&key))).await;
    assert_eq!(again.fanout_id, fanout_id, "the same fanout_id");
    assert_eq!(accepted(&again).len(), 500, "every member accepted now: {:?}", again.results);
    for (before, after) in sent.results.iter().zip(&again.results) {
        assert_eq!((&before.to, before.signal_id), (&after.to, after.signal_id), "each member keeps its signal");
        let recorded = after.outcome.as_ref().unwrap();
        assert_eq!(recorded.created, before.outcome.is_err(), "{}: only the missing members are sent to", after.to);
        assert_eq!(recorded.state.sent.as_ref().unwrap().fanout_id, Some(fanout_id));
        assert_eq!(sent_on_stream(&store, after.signal_id).await, 1, "{}: one signal, never a second", after.to);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn group_commands_race_through_their_compare_and_set_and_announce_members() {
    let nats = NatsServer::start().await;
    let store = SignalStore::new(connect(&nats.url(), &unique_stream(), 1).await);
    let now = Utc::now();
    let group = "@reviewers";
    let upsert = GroupCommand::Upsert { group: group.into(), self_join: false, announce: true };
    let created = store.execute_group(TENANT, group, &upsert, "admin", now).await.unwrap();
    assert!(!created.before.exists && created.after.exists && created.appended.len() == 1);
    let repeat = store.execute_group(TENANT, group, &upsert, "admin", now).await.unwrap();
    assert!(repeat.appended.is_empty(), "an unchanged upsert appends nothing");

    // Eight admins add eight members at once: every add lands, none is lost to a race.
    let adds = (0..8).map(|n| {
        let store = store.clone();
        tokio::spawn(async move {
            let add = GroupCommand::AddMember { group: group.into(), identity: format!("m{n}"), by: "admin".into() };
            store.execute_group(TENANT, group, &add, "admin", now).await
        })
    });
    for add in futures::future::join_all(adds).await {
        assert_eq!(add.unwrap().unwrap().appended.len(), 1);
    }
    let (state, _) = store.load_group(TENANT, group).await.unwrap();
    assert_eq!(state.members.len(), 8, "{state:?}");

    let join = GroupCommand::Join { group: group.into(), identity: "dave".into() };
    let refused = store.execute_group(TENANT, group, &join, "dave", now).await.unwrap_err();
    assert!(matches!(refused, Error::Domain(DomainError::Forbidden(_))), "{refused:?}");
    let other = store.execute_group(TENANT, "@other", &join, "dave", now).await.unwrap_err();
    assert!(matches!(other, Error::Domain(DomainError::Invalid(_))), "a command names its own group: {other:?}");

    // A removal is announced to the seven others, from signalbus, once however often recorded.
    let remove = GroupCommand::RemoveMember { group: group.into(), identity: "m3".into(), by: "signalbus".into() };
    let removed = store.execute_group(TENANT, group, &remove, "signalbus", now).await.unwrap();
    let [(seq, signals)] = &removed.roster[..] else { panic!("one event, one roster: {:?}", removed.roster) };
    assert_eq!((removed.appended[0].0, signals.len()), (*seq, 7));
    // The removed agent m5 leaves every group it is in, announced; a group it is not in is untouched.
    let other = GroupCommand::Upsert { group: "@other".into(), self_join: true, announce: true };
    store.execute_group(TENANT, "@other", &other, "admin", now).await.unwrap();
    let left = store.remove_from_groups(TENANT, "m5", &[group.into(), "@other".into(), "@gone".into()], now).await;
    let outcomes: Vec<(usize, usize)> = left[..2]
        .iter()
        .map(|(_, r)| r.as_ref().map(|e| (e.appended.len(), e.roster.iter().map(|r| r.1.len()).sum())).unwrap())
        .collect();
    assert_eq!(outcomes, [(1, 6), (0, 0)], "left @reviewers (6 told), was never in @other");
    assert!(matches!(left[2].1, Err(Error::Domain(DomainError::UnknownGroup(_)))));
    assert!(!store.load_group(TENANT, group).await.unwrap().0.members.contains("m5"));

    let types = TypeTable::default();
    let limits = FanoutLimits { types: &types, send: SendLimits::default(), max_fanout: 1000, now };
    for round in 0..2 {
        let roster = plan_roster(limits, TENANT, group, *seq, signals, offline).unwrap().unwrap();
        let recorded = store.record_roster(TENANT, roster).await;
        assert_eq!(accepted(&recorded).len(), 7);
        for r in &recorded.results {
            assert_eq!(r.outcome.as_ref().unwrap().created, round == 0, "a roster signal is sent once");
            assert_eq!(sent_on_stream(&store, r.signal_id).await, 1);
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bulk_recall_decides_each_signal_on_its_own() {
    let nats = NatsServer::start().await;
    let store = SignalStore::new(connect(&nats.url(), &unique_stream(), 1).await);
    let types = TypeTable::default();
    let members = ["bob", "carol", "dave"].map(String::from);
    let sent = store.record_fanout(TENANT, "alice", plan(&types, &members, None)).await;
    let mut ids: Vec<Uuid> = sent.results.iter().map(|r| r.signal_id).collect();
    // Carol's signal is delivered before the recall: hers stays delivered.
    let deliver = bus::signal::SignalCommand::Deliver {
        to: "carol".into(),
        via: bus::event::DeliveredVia::Inbox,
        session_id: None,
        redeliver: false,
    };
    store.execute(TENANT, ids[1], &deliver, "carol", Utc::now()).await.unwrap();
    ids.push(Uuid::new_v4());

    let outcomes: Vec<RecallOutcome> =
        store.recall_many(TENANT, "alice", &ids, Utc::now()).await.into_iter().map(|e| e.outcome.unwrap()).collect();
    use RecallOutcome::*;
    assert_eq!(outcomes, [Recalled, AlreadyDelivered, Recalled, NotFound]);
    let by_bob: Vec<RecallOutcome> =
        store.recall_many(TENANT, "bob", &ids[..1], Utc::now()).await.into_iter().map(|e| e.outcome.unwrap()).collect();
    assert_eq!(by_bob, [NotFound], "only the sender recalls");
}
