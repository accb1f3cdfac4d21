//! Projection of each event into its table, idempotence of a re-applied batch, drain order and
//! archiving with late events — each against PostgreSQL and SQLite (the doctor: doctor.rs).

mod support;

use bus::catalog::Category;
use bus::event::{AcksRecorded, DeliveredVia, EventBody, SendsRecorded, SignalsAcked};
use chrono::{Duration, Utc};
use projector::queries::{FactsPage, ListSignals, Queries, Role, StatusFilter};
use support::*;
use uuid::Uuid;

both_backends!(
    each_event_lands_in_its_table,
    a_batch_applied_twice_changes_nothing,
    drain_order_and_redelivery,
    a_gateways_ack_batch_stamps_each_sessions_signals,
    gathered_sends_fold_as_each_alone_on_an_empty_subject,
    archived_rows_still_take_late_events,
    fact_pages_are_bounded_in_bytes_and_continue_before_a_seq
);

fn facts_page(plugin: &str, fact_type: Option<&str>, before_seq: Option<i64>, max_bytes: u64) -> FactsPage {
    FactsPage {
        tenant: TENANT.into(),
        plugin: plugin.into(),
        fact_type: fact_type.map(str::to_string),
        before_seq,
        limit: 10,
        max_bytes,
    }
}

async fn fact_pages_are_bounded_in_bytes_and_continue_before_a_seq(env: Env) {
    let m = &env.models;
    let t0 = Utc::now();
    let big = |n: u64| format!(r#"{{"x":"{}"}}"#, n.to_string().repeat(1000));
    let events: Vec<_> = (1..=5).map(|n| fact("p", n, &big(n), t0 + Duration::seconds(n as i64))).collect();
    assert!(m.apply_stored(&stored(1, events), 0).await.unwrap());
    let seqs = |a: &projector::queries::FactsAnswer| a.facts.iter().map(|f| f.seq).collect::<Vec<_>>();

    // ~1 KB each: a 2,500-byte page stops after the fact that crosses the budget.
    let first = m.plugin_facts(&facts_page("p", None, None, 2500)).await.unwrap();
    assert_eq!((seqs(&first), first.next_before_seq), (vec![5, 4, 3], Some(3)));
    let second = m.plugin_facts(&facts_page("p", None, first.next_before_seq, 2500)).await.unwrap();
    assert_eq!((seqs(&second), second.next_before_seq), (vec![2, 1], None));
    let one = m.plugin_facts(&facts_page("p", None, None, 1)).await.unwrap();
    assert_eq!((seqs(&one), one.next_before_seq), (vec![5], Some(5)), "a page holds at least one fact");
    let odd = m.plugin_facts(&facts_page("p", Some("odd"), None, 2500)).await.unwrap();
    assert_eq!((seqs(&odd), odd.next_before_seq), (vec![5, 3, 1], None));
    assert!(first.facts[0].state_json.contains(&"5".repeat(1000)));
}

async fn each_event_lands_in_its_table(env: Env) {
    let m = &env.models;
    let t0 = Utc::now() - Duration::minutes(10);
    let at = |s: i64| t0 + Duration::seconds(s);
    let (s1, s2, s3, s4, s5) = (Uuid::new_v4(), Uuid::new_v4(), Uuid::new_v4(), Uuid::new_v4(), Uuid::new_v4());
    let bob_session = Uuid::new_v4();
    let events = vec![
        registered("alice", at(0)),
        registered("bob", at(1)),
        opened(bob_session, "bob", at(2)),
        sent(s1, "alice", "bob", Category::Blocker, at(3), Duration::hours(4)),
        delivered(s1, "bob", DeliveredVia::WsPush, Some(bob_session), false, at(4)),
        acked(s1, "bob", at(5)),
        sent(s2, "alice", "bob", Category::Info, at(6), Duration::seconds(1)),
        expired(s2, at(7), at(8)),
        sent(s3, "alice", "bob", Category::Ask, at(9), Duration::hours(1)),
        recalled(s3, "alice", at(10)),
        bounced(s4, "alice", "bob", at(11)),
        fact("alice/w", 1, r#"{"a": 1}"#, at(12)),
        fact("alice/w", 2, r#"{"a": 2}"#, at(13)),
        heartbeat(bob_session, "bob", at(14)),
        sent(s5, "bob", "alice", Category::Task, at(15), Duration::hours(1)),
    ];
    let n = events.len() as u64;
    assert!(m.apply_stored(&stored(1, events), 0).await.unwrap());
    assert_eq!(m.applied_seq().await.unwrap(), n);

    let r1 = m.signal(TENANT, s1).await.unwrap().expect("s1 row");
    assert_eq!((r1.from_identity.as_str(), r1.to_identity.as_str()), ("alice", "bob"));
    assert_eq!((r1.category.as_str(), r1.priority), ("BLOCKER", 3));
    assert_eq!(r1.payload, serde_json::json!({"n": 1, "token": "[REDACTED]"}));
    assert_eq!(r1.delivery_class, "async");
    assert_eq!(r1.recipient_state, "not_available_offline");
    assert_eq!(r1.publish_path.as_deref(), Some("queued_offline"));
    assert_eq!(r1.correlation_id, Some(format!("corr-{}", s1.simple())));
    assert_eq!(r1.created_at.timestamp(), at(3).timestamp());
    assert_eq!(r1.expires_at.unwrap().timestamp(), (at(3) + Duration::hours(4)).timestamp());
    assert_eq!(r1.delivered_at.unwrap().timestamp(), at(4).timestamp());
    assert_eq!(r1.delivered_via.as_deref(), Some("ws_push"));
    assert_eq!(r1.resolved_to_session, Some(bob_session));
    assert_eq!(r1.acked_at.unwrap().timestamp(), at(5).timestamp());
    assert!(r1.expired_at.is_none() && r1.recalled_at.is_none());
    assert_eq!(r1.last_event_seq, 6);

    let r2 = m.signal(TENANT, s2).await.unwrap().unwrap();
    assert_eq!(r2.expired_at.unwrap().timestamp(), at(8).timestamp());
    assert!(r2.delivered_at.is_none() && r2.recalled_at.is_none());
    let r3 = m.signal(TENANT, s3).await.unwrap().unwrap();
    assert_eq!(r3.recalled_at.unwrap().timestamp(), at(10).timestamp());
    assert!(r3.delivered_at.is_none() && r3.expired_at.is_none());
    assert!(m.signal(TENANT, s4).await.unwrap().is_none(), "a bounce never enters signal_queue");
    assert!(m.signal("other", s1).await.unwrap().is_none(), "nothing crosses tenants");

    let agents = m.agents(TENANT).await.unwrap();
    assert_eq!(agents.iter().map(|a| a.identity.as_str()).collect::<Vec<_>>(), ["alice", "bob"]);
    assert_eq!(agents[0].state, "not_available_offline");
    // Bob's heartbeat is ten minutes old: open, but stale.
    assert_eq!((agents[1].state.as_str(), agents[1].live_sessions), ("not_available_stale", 1));
    assert_eq!(agents[1].last_heartbeat.unwrap().timestamp(), at(14).timestamp());

    let st = m.plugin_state(TENANT, "alice/w").await.unwrap();
    assert_eq!((st.state, st.seq), (serde_json::json!({"a": 2}), 2));
    let facts = m.plugin_facts(&facts_page("alice/w", None, None, 1 << 20)).await.unwrap();
    assert_eq!(facts.facts.iter().map(|f| f.seq).collect::<Vec<_>>(), [2, 1]);
    let state: serde_json::Value = serde_json::from_str(&facts.facts[0].state_json).unwrap();
    assert_eq!(state, serde_json::json!({"a": 2}));
    assert_eq!(facts.next_before_seq, None);
    let odd = m.plugin_facts(&facts_page("alice/w", Some("odd"), None, 1 << 20)).await.unwrap();
    assert_eq!(odd.facts.len(), 1);
    let none = m.plugin_state(TENANT, "nobody").await.unwrap();
    assert_eq!((none.state, none.seq), (serde_json::json!({}), 0));

    // A fresh heartbeat makes bob available; closing the session makes him offline.
    let now = Utc::now();
    let more = vec![heartbeat(bob_session, "bob", now)];
    assert!(m.apply_stored(&stored(n + 1, more), n).await.unwrap());
    assert_eq!(m.agents(TENANT).await.unwrap()[1].state, "available");
    assert!(m.apply_stored(&stored(n + 2, vec![closed(bob_session, "bob", now)]), n + 1).await.unwrap());
    let bob = &m.agents(TENANT).await.unwrap()[1];
    assert_eq!((bob.state.as_str(), bob.live_sessions), ("not_available_offline", 0));

    let sent_by_alice = m
        .list_signals(&ListSignals {
            tenant: TENANT.into(),
            identity: "alice".into(),
            role: Some(Role::Sent),
            status: None,
            limit: 2,
            cursor: None,
        })
        .await
        .unwrap();
    assert_eq!(sent_by_alice.iter().map(|r| r.id).collect::<Vec<_>>(), [s3, s2]);
    let next = m
        .list_signals(&ListSignals {
            tenant: TENANT.into(),
            identity: "alice".into(),
            role: Some(Role::Sent),
            status: None,
            limit: 10,
            cursor: Some((sent_by_alice[1].created_at, sent_by_alice[1].id)),
        })
        .await
        .unwrap();
    assert_eq!(next.iter().map(|r| r.id).collect::<Vec<_>>(), [s1]);
    let pending_for_alice = m
        .list_signals(&ListSignals {
            tenant: TENANT.into(),
            identity: "alice".into(),
            role: None,
            status: Some(StatusFilter::Pending),
            limit: 10,
            cursor: None,
        })
        .await
        .unwrap();
    assert_eq!(pending_for_alice.iter().map(|r| r.id).collect::<Vec<_>>(), [s5]);
    let overdue = m.overdue(Utc::now(), None, 10).await.unwrap();
    assert!(overdue.is_empty(), "s2 is already expired: {overdue:?}");
    let overdue = m.overdue(Utc::now() + Duration::hours(2), None, 10).await.unwrap();
    assert_eq!(overdue.iter().map(|o| o.id).collect::<Vec<_>>(), [s5]);
    // Keyset paging: nothing strictly after the last row handed out.
    let after = Some((overdue[0].expires_at, overdue[0].id));
    assert!(m.overdue(Utc::now() + Duration::hours(2), after, 10).await.unwrap().is_empty());
}

async fn a_batch_applied_twice_changes_nothing(env: Env) {
    let m = &env.models;
    let mut w = workload::Workload::new(7);
    let batch = stored(1, w.events(500));
    assert!(m.apply_stored(&batch, 0).await.unwrap());
    let before = m.snapshot().await.unwrap();
    assert!(!m.apply_stored(&batch, 0).await.unwrap(), "the checkpoint compare-and-set refuses it");
    assert!(!m.apply_stored(&batch[250..], 249).await.unwrap(), "so does a tail of it");
    let after = m.snapshot().await.unwrap();
    assert_eq!(before, after, "{}", before.diff(&after));
    assert_eq!(m.applied_seq().await.unwrap(), 500);
}

async fn drain_order_and_redelivery(env: Env) {
    let m = &env.models;
    let t0 = Utc::now() - Duration::minutes(5);
    let at = |s: i64| t0 + Duration::seconds(s);
    let ids: Vec<Uuid> = (0..6).map(|_| Uuid::new_v4()).collect();
    let (old_session, new_session) = (Uuid::new_v4(), Uuid::new_v4());
    let events = vec![
        registered("bob", at(0)),
        opened(old_session, "bob", at(0)),
        sent(ids[0], "a", "bob", Category::Info, at(1), Duration::hours(1)),
        sent(ids[1], "a", "bob", Category::Blocker, at(2), Duration::hours(1)),
        sent(ids[2], "a", "bob", Category::Ask, at(3), Duration::hours(1)),
        sent(ids[3], "a", "bob", Category::Blocker, at(4), Duration::hours(1)),
        // Past its expiry already: never drained, even though no sweeper has run.
        sent(ids[4], "a", "bob", Category::Blocker, at(5), Duration::seconds(1)),
        sent(ids[5], "a", "bob", Category::Task, at(6), Duration::hours(1)),
        delivered(ids[5], "bob", DeliveredVia::WsPush, Some(old_session), false, at(7)),
        sent(Uuid::new_v4(), "a", "carol", Category::Blocker, at(8), Duration::hours(1)),
    ];
    assert!(m.apply_stored(&stored(1, events), 0).await.unwrap());
    let drain = m.drainable(TENANT, "bob", Utc::now(), 100).await.unwrap();
    assert_eq!(drain.iter().map(|r| r.id).collect::<Vec<_>>(), [ids[1], ids[3], ids[2], ids[0]]);
    let two = m.drainable(TENANT, "bob", Utc::now(), 2).await.unwrap();
    assert_eq!(two.iter().map(|r| r.id).collect::<Vec<_>>(), [ids[1], ids[3]]);

    // The delivering session closes without an ack: the signal is drainable again...
    assert!(m.apply_stored(&stored(11, vec![closed(old_session, "bob", at(9))]), 10).await.unwrap());
    let drain = m.drainable(TENANT, "bob", Utc::now(), 100).await.unwrap();
    assert_eq!(drain.iter().map(|r| r.id).collect::<Vec<_>>(), [ids[1], ids[3], ids[2], ids[5], ids[0]]);
    // ...until it is redelivered to a live session (which moves it there) and then acked.
    let redeliver = vec![
        opened(new_session, "bob", at(10)),
        delivered(ids[5], "bob", DeliveredVia::StartupDrain, Some(new_session), true, at(11)),
    ];
    assert!(m.apply_stored(&stored(12, redeliver), 11).await.unwrap());
    let row = m.signal(TENANT, ids[5]).await.unwrap().unwrap();
    assert_eq!(row.delivered_at.unwrap().timestamp(), at(7).timestamp(), "first delivery time is kept");
    assert_eq!((row.delivered_via.as_deref(), row.resolved_to_session), (Some("startup_drain"), Some(new_session)));
    assert!(!m.drainable(TENANT, "bob", Utc::now(), 100).await.unwrap().iter().any(|r| r.id == ids[5]));
    assert!(m.apply_stored(&stored(14, vec![closed(new_session, "bob", at(12))]), 13).await.unwrap());
    assert!(m.drainable(TENANT, "bob", Utc::now(), 100).await.unwrap().iter().any(|r| r.id == ids[5]));
    assert!(m.apply_stored(&stored(15, vec![acked(ids[5], "bob", at(13))]), 14).await.unwrap());
    assert!(!m.drainable(TENANT, "bob", Utc::now(), 100).await.unwrap().iter().any(|r| r.id == ids[5]));
}

/// An `acks.recorded` (several sessions' batches in one event) stamps each listed signal as its
/// own `signals.acked` would: the first ack time kept, the signal subject's sequence left alone,
/// nothing acked that no entry lists.
async fn a_gateways_ack_batch_stamps_each_sessions_signals(env: Env) {
    let m = &env.models;
    let t0 = Utc::now() - Duration::minutes(5);
    let at = |s: i64| t0 + Duration::seconds(s);
    let (bob_s, carol_s) = (Uuid::new_v4(), Uuid::new_v4());
    let (a, b, c) = (Uuid::new_v4(), Uuid::new_v4(), Uuid::new_v4());
    let sends = vec![
        sent_pushed(a, "x", "bob", bob_s, at(0)),
        sent_pushed(b, "x", "carol", carol_s, at(1)),
        sent_pushed(c, "x", "carol", carol_s, at(2)),
    ];
    assert!(m.apply_stored(&stored(1, sends), 0).await.unwrap());
    let entry =
        |by: &str, session, ids: Vec<Uuid>| SignalsAcked { by: by.into(), session_id: Some(session), signal_ids: ids };
    let batch = ev(
        at(3),
        EventBody::AcksRecorded(AcksRecorded {
            acks: vec![entry("bob", bob_s, vec![a]), entry("carol", carol_s, vec![b])],
        }),
    );
    let again = ev(at(9), EventBody::AcksRecorded(AcksRecorded { acks: vec![entry("bob", bob_s, vec![a])] }));
    assert!(m.apply_stored(&stored(4, vec![batch, again]), 3).await.unwrap());
    for (id, acked) in [(a, Some(at(3).timestamp())), (b, Some(at(3).timestamp())), (c, None)] {
        let row = m.signal(TENANT, id).await.unwrap().unwrap();
        assert_eq!(row.acked_at.map(|t| t.timestamp()), acked, "{id}");
    }
    let row = m.signal(TENANT, a).await.unwrap().unwrap();
    assert_eq!(row.last_event_seq, 1, "an ack leaves the signal subject's sequence alone");
}

/// A `sends.recorded` (a gateway's gathered sends) folds as each entry's own `signal.sent`
/// would — a pushed one delivered by it — except that each signal's subject is still empty:
/// `last_event_seq` stays 0 (the first compare-and-set's expectation) until its next event.
async fn gathered_sends_fold_as_each_alone_on_an_empty_subject(env: Env) {
    let m = &env.models;
    let t0 = Utc::now() - Duration::minutes(5);
    let at = |s: i64| t0 + Duration::seconds(s);
    let (a, b, c) = (Uuid::now_v7(), Uuid::now_v7(), Uuid::now_v7());
    let bob_s = Uuid::new_v4();
    let body = |e: bus::event::Event| match e.body {
        EventBody::SignalSent(s) => *s,
        _ => unreachable!(),
    };
    let sends = vec![
        body(sent(a, "x", "carol", Category::Info, at(0), Duration::hours(1))),
        body(sent_pushed(b, "x", "bob", bob_s, at(0))),
        body(sent(c, "x", "carol", Category::Info, at(0), Duration::hours(1))),
    ];
    let gathered = ev(at(0), EventBody::SendsRecorded(SendsRecorded { window: 1, sends }));
    assert!(m.apply_stored(&stored(1, vec![gathered]), 0).await.unwrap());
    assert!(m.apply_stored(&stored(2, vec![recalled(c, "x", at(1))]), 1).await.unwrap());
    let row = |id| async move { m.signal(TENANT, id).await.unwrap().unwrap() };
    let (ra, rb, rc) = (row(a).await, row(b).await, row(c).await);
    assert_eq!((ra.to_identity.as_str(), ra.last_event_seq, ra.delivered_at.is_none()), ("carol", 0, true));
    assert_eq!((rb.delivered_via.as_deref(), rb.last_event_seq), (Some("ws_push"), 0), "delivered by its send");
    assert_eq!((rc.recalled_at.is_some(), rc.last_event_seq), (true, 2), "its next event is on its own subject");
}

async fn archived_rows_still_take_late_events(env: Env) {
    let m = &env.models;
    let t0 = Utc::now() - Duration::hours(2);
    let at = |s: i64| t0 + Duration::seconds(s);
    let (a, b, c) = (Uuid::new_v4(), Uuid::new_v4(), Uuid::new_v4());
    let events = vec![
        sent(a, "x", "y", Category::Info, at(0), Duration::seconds(10)),
        sent(b, "x", "y", Category::Info, at(1), Duration::seconds(10)),
        sent(c, "x", "y", Category::Info, at(2), Duration::hours(10)),
        expired(a, at(10), at(20)),
        delivered(b, "y", DeliveredVia::Inbox, None, false, at(3)),
    ];
    assert!(m.apply_stored(&stored(1, events), 0).await.unwrap());
    let moved = m.archive(Utc::now(), 1).await.unwrap();
    assert_eq!(moved, 2, "a (expired) and b (delivered, past expiry) are settled; c is pending");
    // A late ack of an archived row still lands, in the history, beside a stamp on a hot row
    // in the same batch.
    let late = vec![acked(b, "y", at(30)), delivered(c, "y", DeliveredVia::Inbox, None, false, at(31))];
    assert!(m.apply_stored(&stored(6, late), 5).await.unwrap());
    let row = m.signal(TENANT, b).await.unwrap().unwrap();
    assert_eq!(row.acked_at.unwrap().timestamp(), at(30).timestamp());
    assert_eq!(row.last_event_seq, 6);
    let hot = m.signal(TENANT, c).await.unwrap().unwrap();
    assert_eq!((hot.delivered_at.map(|t| t.timestamp()), hot.last_event_seq), (Some(at(31).timestamp()), 7));
    let received = m
        .list_signals(&ListSignals {
            tenant: TENANT.into(),
            identity: "y".into(),
            role: Some(Role::Received),
            status: None,
            limit: 10,
            cursor: None,
        })
        .await
        .unwrap();
    assert_eq!(received.iter().map(|r| r.id).collect::<Vec<_>>(), [c, b, a], "history is listed too");
    assert_eq!(m.purge_history(Utc::now() + Duration::minutes(1), 1).await.unwrap(), 2);
    assert!(m.signal(TENANT, b).await.unwrap().is_none());
}

#[tokio::test]
async fn a_database_migrated_by_a_newer_binary_is_refused() {
    let db = testkit::TestDb::create().await;
    drop(projector::ReadModels::postgres(db.url()).await.unwrap());
    let pool = sqlx::PgPool::connect(db.url()).await.unwrap();
    sqlx::query(
        "INSERT INTO _sqlx_migrations (version, description, success, checksum, execution_time) \
         VALUES (9999, 'from the future', true, '\\x00', 0)",
    )
    .execute(&pool)
    .await
    .unwrap();
    pool.close().await;
    let err = projector::ReadModels::postgres(db.url()).await.unwrap_err();
    assert!(matches!(err, projector::Error::SchemaTooNew(9999)), "{err}");
    assert!(err.to_string().contains("newer signalbus"), "{err}");

    let dir = tempfile::tempdir().unwrap();
    drop(projector::ReadModels::sqlite(dir.path()).await.unwrap());
    let file = dir.path().join("readmodels.sqlite");
    let pool = sqlx::SqlitePool::connect(&format!("sqlite://{}", file.display())).await.unwrap();
    sqlx::query(
        "INSERT INTO _sqlx_migrations (version, description, success, checksum, execution_time) \
         VALUES (9999, 'from the future', 1, x'00', 0)",
    )
    .execute(&pool)
    .await
    .unwrap();
    pool.close().await;
    let err = projector::ReadModels::sqlite(dir.path()).await.unwrap_err();
    assert!(matches!(err, projector::Error::SchemaTooNew(9999)), "{err}");
}
