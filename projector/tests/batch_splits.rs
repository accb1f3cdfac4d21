//! Batch splits: the same events applied one per batch and rebuilt in one batch give the same
//! rows — for agent removals and for sends that recorded their push with batched acks — against
//! PostgreSQL and SQLite.

mod support;

use bus::catalog::Category;
use bus::event::DeliveredVia;
use chrono::{Duration, Utc};
use projector::queries::Queries;
use support::*;
use uuid::Uuid;

both_backends!(
    a_removed_agent_leaves_the_roster_in_any_batch_split,
    a_pushed_send_and_batched_acks_land_alike_in_any_batch_split
);

/// A `signal.sent` that recorded its push is a delivered row; a `signals.acked` batch stamps
/// `acked_at` once per signal (the first batch wins) and leaves `last_event_seq` at the signal's
/// own subject (the sweeper's compare-and-set): the same rows whether the events are applied one
/// per batch or rebuilt in one.
async fn a_pushed_send_and_batched_acks_land_alike_in_any_batch_split(env: Env) {
    let m = &env.models;
    let t0 = Utc::now() - Duration::minutes(10);
    let at = |s: i64| t0 + Duration::seconds(s);
    let (session, s1, s2, s3) = (Uuid::new_v4(), Uuid::new_v4(), Uuid::new_v4(), Uuid::new_v4());
    let events = vec![
        registered("bob", at(0)),
        opened(session, "bob", at(1)),
        sent_pushed(s1, "alice", "bob", session, at(2)),
        sent(s2, "alice", "bob", Category::Task, at(3), Duration::hours(1)),
        delivered(s2, "bob", DeliveredVia::StartupDrain, Some(session), false, at(4)),
        sent_pushed(s3, "alice", "bob", session, at(5)),
        acks(&[s1, s2, s1], "bob", Some(session), at(6)),
        acks(&[s1], "bob", None, at(7)),
    ];
    let seqs = env.append_all(&events).await;
    for (i, event) in events.iter().enumerate() {
        assert!(m.apply_stored(&stored(seqs[i], vec![event.clone()]), seqs[i] - 1).await.unwrap());
    }
    let r1 = m.signal(TENANT, s1).await.unwrap().expect("s1 row");
    assert_eq!(r1.delivered_at.map(|t| t.timestamp()), Some(at(2).timestamp()));
    assert_eq!((r1.delivered_via.as_deref(), r1.resolved_to_session), (Some("ws_push"), Some(session)));
    assert_eq!(r1.acked_at.map(|t| t.timestamp()), Some(at(6).timestamp()), "the first ack stands");
    assert_eq!(r1.last_event_seq, seqs[2] as i64, "acks are not on the signal's subject");
    let r2 = m.signal(TENANT, s2).await.unwrap().expect("s2 row");
    assert_eq!(r2.acked_at.map(|t| t.timestamp()), Some(at(6).timestamp()));
    assert_eq!(r2.last_event_seq, seqs[4] as i64);
    let r3 = m.signal(TENANT, s3).await.unwrap().expect("s3 row");
    assert!(r3.delivered_at.is_some() && r3.acked_at.is_none(), "delivered, not acked: {r3:?}");
    let live = m.snapshot().await.unwrap();
    projector::rebuild(&env.log, m).await.unwrap();
    let rebuilt = m.snapshot().await.unwrap();
    assert_eq!(live, rebuilt, "{}", live.diff(&rebuilt));
}

/// `agent.removed` deletes the agent's `agents` and `recipient_state` rows and nothing else;
/// the closes that follow it do not bring its recipient state back; a registration after it
/// holds. Applied one event per batch, the tables equal a rebuild (one batch).
async fn a_removed_agent_leaves_the_roster_in_any_batch_split(env: Env) {
    let m = &env.models;
    let t0 = Utc::now() - Duration::minutes(10);
    let at = |s: i64| t0 + Duration::seconds(s);
    let (session, signal) = (Uuid::new_v4(), Uuid::new_v4());
    let events = vec![
        registered("alice", at(0)),
        registered("bob", at(1)),
        opened(session, "bob", at(2)),
        sent(signal, "alice", "bob", Category::Task, at(3), Duration::hours(1)),
        removed("bob", at(4)),
        closed(session, "bob", at(5)),
        expired(signal, at(3) + Duration::hours(1), at(6)),
        registered("carol", at(7)),
        removed("carol", at(8)),
        registered("carol", at(9)),
    ];
    let seqs = env.append_all(&events).await;
    for (i, event) in events.iter().enumerate() {
        assert!(m.apply_stored(&stored(seqs[i], vec![event.clone()]), seqs[i] - 1).await.unwrap());
    }
    let agents = m.agents(TENANT).await.unwrap();
    let names: Vec<_> = agents.iter().map(|a| (a.identity.as_str(), a.registered_at.timestamp())).collect();
    assert_eq!(names, [("alice", at(0).timestamp()), ("carol", at(9).timestamp())]);
    let row = m.signal(TENANT, signal).await.unwrap().expect("history stays");
    assert!(row.expired_at.is_some());
    let live = m.snapshot().await.unwrap();
    projector::rebuild(&env.log, m).await.unwrap();
    let rebuilt = m.snapshot().await.unwrap();
    assert_eq!(live, rebuilt, "{}", live.diff(&rebuilt));
    let recipient_rows = live.tables.get("recipient_state").map(Vec::len);
    assert_eq!(recipient_rows, Some(2), "alice and carol only");
}
