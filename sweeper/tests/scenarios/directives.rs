//! Directive expiry on real backends: a backlog past its deadline is expired by the first
//! run's backstop, a directive falling due while the sweeper runs is expired by its timer (the
//! sweep interval is a minute), claimers completing right at the deadline race the expiry and
//! every directive ends exactly once, and an expiry tells the parties with ordinary signals.

use std::time::Duration;

use bus::agent::AgentCommand;
use bus::directive::{directive_id_for, CreateDirective, DirectiveCommand};
use bus::event::{Entity, EventBody, SessionKind};
use bus::send::signal_id_for;
use chrono::{DateTime, Utc};
use serde_json::json;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use crate::support::{config, eventually, Bed, TENANT};

const MINUTE: Duration = Duration::from_secs(60);

async fn create(bed: &Bed, key: &str, at: DateTime<Utc>, deadline_seconds: u64) -> Uuid {
    let id = directive_id_for(TENANT, "alice", key);
    let c = CreateDirective {
        directive_id: id,
        issuer: "alice".into(),
        to: "bob".into(),
        members: vec![],
        directive_type: "package.install".into(),
        params: json!({"key": key}),
        idempotency_key: key.into(),
        deadline_seconds,
        correlation_id: None,
    };
    let command = DirectiveCommand::Create(Box::new(c));
    bed.store.execute_directive(TENANT, id, &command, "alice", at).await.unwrap();
    id
}

/// The directive's terminal events, as `(type, actor)`.
async fn endings(bed: &Bed, id: Uuid) -> Vec<(&'static str, String)> {
    let subject = bed.log.subjects().of(TENANT, Entity::Directive(id));
    let stored = bed.log.read_subject(&subject).await.unwrap();
    stored
        .into_iter()
        .filter(|s| matches!(s.event.body, EventBody::DirectiveCompleted(_) | EventBody::DirectiveExpired(_)))
        .map(|s| (s.event.type_name(), s.event.actor.unwrap_or_default()))
        .collect()
}

async fn expired_at(bed: &Bed, id: Uuid) -> Option<DateTime<Utc>> {
    let subject = bed.log.subjects().of(TENANT, Entity::Directive(id));
    let stored = bed.log.read_subject(&subject).await.unwrap();
    stored.into_iter().find_map(|s| match s.event.body {
        EventBody::DirectiveExpired(e) => Some(e.at),
        _ => None,
    })
}

pub async fn directives(bed: Bed) {
    for who in ["alice", "bob"] {
        let register =
            AgentCommand::Register { identity: who.into(), kind: SessionKind::Daemon, token_hash: "h".into() };
        bed.store.execute_agent(TENANT, who, &register, "admin", Utc::now()).await.unwrap();
    }
    // A backlog whose deadlines passed while no sweeper ran.
    let long_ago = Utc::now() - chrono::Duration::hours(1);
    let mut backlog = Vec::new();
    for i in 0..5 {
        backlog.push(create(&bed, &format!("backlog-{i}"), long_ago, 1).await);
    }
    bed.settle().await;

    let stop = CancellationToken::new();
    let sweeper = bed.sweeper(config(MINUTE, "a", bed.lease()), &stop);
    for id in &backlog {
        eventually(Duration::from_secs(30), "the backlog expires at the first run", || async {
            expired_at(&bed, *id).await.is_some()
        })
        .await;
        assert_eq!(endings(&bed, *id).await, [("directive.expired", "signalbus/sweeper".to_string())]);
    }

    // Falling due while the sweeper runs: only a timer can be on time (the run is a minute away).
    let now = Utc::now();
    let on_time = create(&bed, "on-time", now, 1).await;
    eventually(Duration::from_secs(30), "the directive expires", || async {
        expired_at(&bed, on_time).await.is_some()
    })
    .await;
    let at = expired_at(&bed, on_time).await.unwrap();
    let deadline = now + chrono::Duration::seconds(1);
    assert!(at >= deadline, "never before the deadline");
    assert!((at - deadline).to_std().unwrap_or_default() < MINUTE / 2, "by a timer, not the next run");

    // The expiry tells the issuer and the assignee with ordinary async signals from `signalbus`.
    for to in ["alice", "bob"] {
        let key = format!("{}:DirectiveExpired:{to}", on_time.simple());
        let id = signal_id_for(TENANT, "signalbus", Some(&key));
        // Sent right after the expiry is appended, so looked for until it is there.
        eventually(Duration::from_secs(10), "the DirectiveExpired signal", || async {
            bed.store.load(TENANT, id).await.unwrap().0.sent.is_some()
        })
        .await;
        let (signal, _) = bed.store.load(TENANT, id).await.unwrap();
        let sent = signal.sent.expect("a DirectiveExpired signal");
        assert_eq!((sent.to.as_str(), sent.correlation_id.clone()), (to, Some(on_time.to_string())));
    }

    // Claimers completing around the deadline race the timers: each directive ends once.
    let created = Utc::now();
    let mut racing = Vec::new();
    for i in 0..20 {
        racing.push(create(&bed, &format!("race-{i}"), created, 2).await);
    }
    let racers: Vec<_> = racing
        .iter()
        .enumerate()
        .map(|(i, &id)| {
            let store = bed.store.clone();
            tokio::spawn(async move {
                let at = created + chrono::Duration::milliseconds(1_900 + 10 * i as i64);
                tokio::time::sleep((at - Utc::now()).to_std().unwrap_or_default()).await;
                let complete = DirectiveCommand::Complete { by: "bob".into(), result: json!({"i": i}) };
                store.execute_directive(TENANT, id, &complete, "bob", Utc::now()).await
            })
        })
        .collect();
    for r in racers {
        let _ = r.await.unwrap();
    }
    for id in &racing {
        eventually(Duration::from_secs(30), "the directive ends", || async { !endings(&bed, *id).await.is_empty() })
            .await;
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let mut outcomes = std::collections::BTreeMap::new();
    for id in &racing {
        let ends = endings(&bed, *id).await;
        assert_eq!(ends.len(), 1, "{id}: exactly one terminal event: {ends:?}");
        *outcomes.entry(ends[0].0).or_insert(0) += 1;
    }
    println!("complete vs expire at the deadline: {outcomes:?}");

    // Nobody carried out the completions' effects (they were appended straight through the
    // store, as by a gateway killed right after): the sweeper's backstop records them, once.
    for id in &racing {
        if endings(&bed, *id).await[0].0 != "directive.completed" {
            continue;
        }
        let key = format!("{}:DirectiveCompleted:alice", id.simple());
        let signal_id = signal_id_for(TENANT, "bob", Some(&key));
        eventually(Duration::from_secs(30), "the backstop records DirectiveCompleted", || async {
            bed.store.load(TENANT, signal_id).await.unwrap().0.sent.is_some()
        })
        .await;
    }
    // A request is handed out late only while the directive still waits: the expired one's
    // never is, an open one's is.
    let request_of =
        |id: Uuid| signal_id_for(TENANT, "alice", Some(&format!("{}:DirectiveRequested:bob", id.simple())));
    assert!(bed.store.load(TENANT, request_of(on_time)).await.unwrap().0.sent.is_none(), "no request for gone work");
    let open = create(&bed, "open", Utc::now(), 3600).await;
    eventually(Duration::from_secs(30), "the backstop hands out the open directive's request", || async {
        bed.store.load(TENANT, request_of(open)).await.unwrap().0.sent.is_some()
    })
    .await;

    // The read model agrees with the stream.
    bed.settle().await;
    let row = projector::Queries::directive(&bed.models, TENANT, on_time).await.unwrap().unwrap();
    assert_eq!(row.status, "expired");
    assert!(projector::Queries::overdue_directives(&bed.models, Utc::now(), None, 100).await.unwrap().is_empty());
    assert_eq!(projector::Queries::directive(&bed.models, TENANT, open).await.unwrap().unwrap().status, "requested");

    stop.cancel();
    sweeper.await.unwrap().unwrap();
    bed.shutdown().await;
}
