//! The directive store (`SignalStore::execute_directive`, `try_directive`) on a real stream, against every
//! backend of the log conformance suite that matters for a compare-and-set: JetStream (Debian's
//! release and the current one) and embedded SQLite. Races are run, not simulated: of complete
//! vs cancel vs expire exactly one terminal event lands; of group members starting at once
//! exactly one `directive.started`, the others told `AlreadyClaimed`. Also the create's
//! idempotency on the stream and the lifecycle effects recorded as ordinary signals.
//!
//! Deliberately mocks nothing.

mod support;

use bus::directive::{directive_id_for, CreateDirective, DirectiveCommand, DirectiveEffects};
use bus::event::{DirectiveStatus, Entity, EventBody, PublishPath, RecipientState};
use bus::send::RecipientView;
use bus::store::SignalStore;
use bus::{DomainError, Error};
use chrono::{DateTime, Duration, Utc};
use serde_json::json;
use support::{Backend, Current, Debian, Embedded, JetStream, TENANT};

fn create(issuer: &str, key: &str, to: &str, members: &[String], deadline_seconds: u64) -> DirectiveCommand {
    DirectiveCommand::Create(Box::new(CreateDirective {
        directive_id: directive_id_for(TENANT, issuer, key),
        issuer: issuer.into(),
        to: to.into(),
        members: members.to_vec(),
        directive_type: "package.install".into(),
        params: json!({"name": key}),
        idempotency_key: key.into(),
        deadline_seconds,
        correlation_id: None,
    }))
}

async fn events_of(store: &SignalStore, id: uuid::Uuid) -> Vec<EventBody> {
    let subject = store.log().subjects().of(TENANT, Entity::Directive(id));
    store.log().read_subject(&subject).await.unwrap().into_iter().map(|s| s.event.body).collect()
}

fn is_terminal_event(e: &EventBody) -> bool {
    matches!(e, EventBody::DirectiveCompleted(_) | EventBody::DirectiveCanceled(_) | EventBody::DirectiveExpired(_))
}

/// 200 directives, each raced by its assignee completing, its issuer canceling and the bus
/// expiring it (past its deadline), all at once: each ends with exactly one terminal event,
/// the winner's, and the two losers are told `InvalidTransition` on the terminal state; a late
/// complete is refused with the ended directive (`try_directive`).
async fn terminal_race<B: Backend>() {
    let b = B::open().await;
    let store = SignalStore::new(b.log());
    let t0 = Utc::now();
    let ids: Vec<_> = (0..200).map(|i| directive_id_for(TENANT, "alice", &format!("k{i}"))).collect();
    for (i, id) in ids.iter().enumerate() {
        let c = create("alice", &format!("k{i}"), "bob", &[], 1);
        store.execute_directive(TENANT, *id, &c, "alice", t0).await.unwrap();
    }
    let later = t0 + Duration::seconds(2);
    let mut tasks = Vec::new();
    for id in &ids {
        let commands = [
            (DirectiveCommand::Complete { by: "bob".into(), result: json!({"ok": true}) }, "bob"),
            (DirectiveCommand::Cancel { by: "alice".into(), reason: None }, "alice"),
            (DirectiveCommand::Expire, "signalbus"),
        ];
        for (command, actor) in commands {
            let (store, id) = (store.clone(), *id);
            tasks.push(tokio::spawn(async move { store.execute_directive(TENANT, id, &command, actor, later).await }));
        }
    }
    let mut outcomes = Vec::new();
    for t in tasks {
        outcomes.push(t.await.unwrap());
    }
    let mut wins = [0usize; 3];
    for (i, id) in ids.iter().enumerate() {
        let three = &outcomes[i * 3..i * 3 + 3];
        let won: Vec<usize> = (0..3).filter(|k| three[*k].as_ref().is_ok_and(|e| e.appended.is_some())).collect();
        assert_eq!(won.len(), 1, "directive {i}: exactly one of complete, cancel, expire wins: {three:?}");
        wins[won[0]] += 1;
        for (k, o) in three.iter().enumerate().filter(|(k, _)| *k != won[0]) {
            assert!(
                matches!(o, Err(Error::Domain(DomainError::InvalidTransition { status, .. })) if status.is_terminal()),
                "directive {i}: loser {k} is told the directive ended: {o:?}"
            );
        }
        let events = events_of(&store, *id).await;
        assert_eq!(events.iter().filter(|e| is_terminal_event(e)).count(), 1, "directive {i}: {events:?}");
        let (state, _) = store.load_directive(TENANT, *id).await.unwrap();
        let expected = [DirectiveStatus::Completed, DirectiveStatus::Canceled, DirectiveStatus::Expired][won[0]];
        assert_eq!(state.status, expected, "directive {i}: the stream says the winner's outcome");
        // A late complete is refused with the directive as the refusal found it: the ended one.
        let late = DirectiveCommand::Complete { by: "bob".into(), result: json!({}) };
        match store.try_directive(TENANT, *id, &late, "bob", later).await.unwrap() {
            Err(refused) => {
                assert!(matches!(refused.error, DomainError::InvalidTransition { status, .. } if status == expected));
                assert_eq!(refused.state.status, expected, "directive {i}: refused on the state the stream has");
            }
            Ok(executed) => panic!("directive {i}: a complete after the end was accepted: {executed:?}"),
        }
    }
    assert_eq!(wins.iter().sum::<usize>(), 200);
}

/// Group directives to 2..=10 members, every member starting at once: one `directive.started`,
/// by the member the state names as claimer; every other member is told `AlreadyClaimed` by it.
async fn claim_race<B: Backend>() {
    let b = B::open().await;
    let store = SignalStore::new(b.log());
    let now = Utc::now();
    for n in 2..=10usize {
        for round in 0..5 {
            let members: Vec<String> = (0..n).map(|m| format!("m{m}")).collect();
            let key = format!("g{n}-{round}");
            let id = directive_id_for(TENANT, "alice", &key);
            store
                .execute_directive(TENANT, id, &create("alice", &key, "@crew", &members, 600), "alice", now)
                .await
                .unwrap();
            let tasks: Vec<_> = members
                .iter()
                .map(|m| {
                    let (store, m) = (store.clone(), m.clone());
                    tokio::spawn(async move {
                        let command = DirectiveCommand::Start { by: m.clone() };
                        (m.clone(), store.execute_directive(TENANT, id, &command, &m, now).await)
                    })
                })
                .collect();
            let mut winners = Vec::new();
            let mut losers = Vec::new();
            for t in tasks {
                match t.await.unwrap() {
                    (m, Ok(e)) if e.appended.is_some() => winners.push(m),
                    (m, Err(Error::Domain(DomainError::AlreadyClaimed { claimed_by }))) => losers.push((m, claimed_by)),
                    (m, other) => panic!("{m} starting {key}: {other:?}"),
                }
            }
            assert_eq!(winners.len(), 1, "{key}: one member claims it");
            assert_eq!(losers.len(), n - 1, "{key}");
            assert!(losers.iter().all(|(_, by)| *by == winners[0]), "{key}: losers are told who claimed it");
            let events = events_of(&store, id).await;
            let started: Vec<_> = events.iter().filter(|e| matches!(e, EventBody::DirectiveStarted(_))).collect();
            assert_eq!(started.len(), 1, "{key}: {events:?}");
            let (state, _) = store.load_directive(TENANT, id).await.unwrap();
            assert_eq!(state.claimed_by.as_ref(), Some(&winners[0]));
        }
    }
}

fn view(registered: bool) -> RecipientView {
    RecipientView { registered, state: RecipientState::NotAvailableOffline, has_live_ws: false, freshest_session: None }
}

/// A create repeated (concurrently) is recorded once; the same key with other params is an
/// `IdempotencyConflict` naming the directive. The lifecycle effects become queued async
/// signals once, however often they are carried out, and a claim recalls the requests still
/// pending for the other members.
async fn create_and_effects<B: Backend>() {
    let b = B::open().await;
    let store = SignalStore::new(b.log());
    let now: DateTime<Utc> = Utc::now();
    let members: Vec<String> = ["alice", "bob", "carol", "dave"].map(String::from).to_vec();
    let id = directive_id_for(TENANT, "alice", "once");
    let tasks: Vec<_> = (0..5)
        .map(|_| {
            let (store, c) = (store.clone(), create("alice", "once", "@crew", &members, 600));
            tokio::spawn(async move { store.execute_directive(TENANT, id, &c, "alice", now).await.unwrap() })
        })
        .collect();
    let mut created = Vec::new();
    for t in tasks {
        created.push(t.await.unwrap());
    }
    assert_eq!(created.iter().filter(|e| e.appended.is_some()).count(), 1, "one create is recorded");
    assert!(created.iter().all(|e| e.state.status == DirectiveStatus::Requested));
    assert_eq!(events_of(&store, id).await.len(), 1);
    let other = match create("alice", "once", "@crew", &members, 600) {
        DirectiveCommand::Create(mut c) => {
            c.params = json!({"name": "other"});
            DirectiveCommand::Create(c)
        }
        _ => unreachable!(),
    };
    let conflict = store.execute_directive(TENANT, id, &other, "alice", now).await.unwrap_err();
    assert!(matches!(conflict, Error::Domain(DomainError::IdempotencyConflict { directive_id }) if directive_id == id));
    let wrong_id = store.execute_directive(TENANT, uuid::Uuid::new_v4(), &other, "alice", now).await;
    assert!(matches!(wrong_id, Err(Error::Domain(DomainError::Invalid(_)))));

    let winner = created.iter().find(|e| e.appended.is_some()).unwrap();
    let effects = winner.effects(TENANT);
    assert_eq!(effects.signals.len(), 3, "bob, carol and dave are handed the request, not its issuer");
    let table = bus::catalog::TypeTable::default();
    let carol_gone = |to: &str| view(to != "carol");
    for round in 0..2 {
        let sent = store.send_lifecycle(TENANT, &table, &effects, carol_gone, now).await.unwrap();
        assert_eq!(sent.sent.len(), 2);
        assert_eq!(sent.refused.len(), 1, "carol is no longer registered");
        for (to, recorded) in &sent.sent {
            assert_eq!(recorded.created, round == 0, "{to}: a second carrying out records nothing");
            let s = recorded.state.sent.as_deref().unwrap();
            assert_eq!(
                (s.from.as_str(), s.to.as_str(), s.signal_type.as_str()),
                ("alice", to.as_str(), "DirectiveRequested")
            );
            assert_eq!(s.publish_path, PublishPath::QueuedOffline);
            assert_eq!(
                s.expires_at.timestamp(),
                (now + Duration::seconds(600)).timestamp(),
                "the TTL runs to the deadline"
            );
            assert_eq!(s.correlation_id.as_deref(), Some(id.to_string().as_str()));
            assert_eq!((s.category, s.priority), (bus::catalog::Category::Task, 1));
        }
    }

    let started =
        store.execute_directive(TENANT, id, &DirectiveCommand::Start { by: "bob".into() }, "bob", now).await.unwrap();
    let effects: DirectiveEffects = started.effects(TENANT);
    assert_eq!(effects.recalls.len(), 2, "carol's and dave's requests");
    let done = store.send_lifecycle(TENANT, &table, &effects, |_| view(true), now).await.unwrap();
    assert_eq!(done.sent.len(), 1, "the issuer learns of the start");
    let outcomes: Vec<_> = done.recalled.iter().map(|(_, o)| o.as_str()).collect();
    assert_eq!(outcomes, vec!["not_found", "recalled"], "carol never had a request; dave's pending one is recalled");
}

macro_rules! directive_store {
    ($backend:ident, $ty:ty) => {
        mod $backend {
            use super::*;

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn terminal_race() {
                super::terminal_race::<$ty>().await
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn claim_race() {
                super::claim_race::<$ty>().await
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn create_and_effects() {
                super::create_and_effects::<$ty>().await
            }
        }
    };
}

directive_store!(jetstream, JetStream<Debian>);
directive_store!(jetstream_current, JetStream<Current>);
directive_store!(embedded, Embedded);
