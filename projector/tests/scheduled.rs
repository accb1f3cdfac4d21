//! Scheduled delivery in the read models (CONTRACT §16), against PostgreSQL and SQLite:
//! `deliver_at` and `released_at` land on the row; a scheduled row is drainable only once due
//! or released; the due-release query lists exactly the pending, unreleased, due rows in
//! `(deliver_at, id)` order; and the events applied one per batch, or sent and released in one
//! batch, equal a rebuild.

mod support;

use bus::catalog::Category;
use bus::event::*;
use chrono::{DateTime, Duration, SubsecRound, Utc};
use projector::queries::Queries;
use support::*;
use uuid::Uuid;

both_backends!(scheduled_rows_land_alike_live_and_rebuilt, a_send_released_in_its_own_batch_lands_alike);

/// A send to bob at `at`, scheduled for `deliver_at`, expiring a day after it.
fn scheduled(id: Uuid, at: DateTime<Utc>, deliver_at: DateTime<Utc>) -> Event {
    let mut event = sent(id, "alice", "bob", Category::Task, at, Duration::hours(1));
    if let EventBody::SignalSent(s) = &mut event.body {
        s.deliver_at = Some(deliver_at);
        s.expires_at = deliver_at + Duration::days(1);
        s.publish_path = PublishPath::Scheduled;
    }
    event
}

fn released(id: Uuid, deliver_at: DateTime<Utc>, at: DateTime<Utc>) -> Event {
    let body =
        SignalReleased { signal_id: id, to: "bob".into(), deliver_at, expires_at: deliver_at + Duration::days(1) };
    ev(at, EventBody::SignalReleased(body))
}

async fn scheduled_rows_land_alike_live_and_rebuilt(env: Env) {
    let m = &env.models;
    let now = Utc::now().trunc_subsecs(6);
    let t0 = now - Duration::minutes(10);
    let at = |s: i64| t0 + Duration::seconds(s);
    let later = now + Duration::hours(1);
    let [future, due, released_one, delivered_one, recalled_one, plain] = [(); 6].map(|_| Uuid::new_v4());
    let events = vec![
        registered("bob", at(0)),
        scheduled(future, at(1), later),
        scheduled(due, at(2), at(30)),
        scheduled(released_one, at(3), at(30)),
        released(released_one, at(30), at(31)),
        scheduled(delivered_one, at(4), at(30)),
        released(delivered_one, at(30), at(31)),
        delivered(delivered_one, "bob", DeliveredVia::Inbox, None, false, at(32)),
        scheduled(recalled_one, at(5), later),
        recalled(recalled_one, "alice", at(6)),
        sent(plain, "alice", "bob", Category::Info, at(7), Duration::hours(1)),
    ];
    let seqs = env.append_all(&events).await;
    for (i, event) in events.iter().enumerate() {
        assert!(m.apply_stored(&stored(seqs[i], vec![event.clone()]), seqs[i] - 1).await.unwrap());
    }
    let row = |id| async move { m.signal(TENANT, id).await.unwrap().expect("a row") };
    let f = row(future).await;
    assert_eq!((f.deliver_at, f.released_at), (Some(later), None));
    assert_eq!(f.publish_path.as_deref(), Some("scheduled"));
    let r = row(released_one).await;
    assert_eq!((r.deliver_at, r.released_at), (Some(at(30)), Some(at(31))));
    assert_eq!(r.last_event_seq, seqs[4] as i64, "the release is the subject's newest event");
    assert_eq!(row(plain).await.deliver_at, None);

    // Drainable: what is due by the clock or released, never what is still ahead.
    let drainable: Vec<Uuid> = m.drainable(TENANT, "bob", now, 100).await.unwrap().iter().map(|r| r.id).collect();
    assert_eq!(drainable, [due, released_one, plain], "drain order (priority, then age), the future one left out");
    let at_later: Vec<Uuid> = m.drainable(TENANT, "bob", later, 100).await.unwrap().iter().map(|r| r.id).collect();
    assert_eq!(at_later, [future, due, released_one], "once due, the future one drains too (plain has expired)");

    // Due releases: pending, scheduled, unreleased and due, in (deliver_at, id) order.
    let ids = |rows: Vec<projector::queries::DueRelease>| rows.iter().map(|r| r.id).collect::<Vec<_>>();
    assert_eq!(ids(m.due_releases(now, None, 10).await.unwrap()), [due]);
    let both = m.due_releases(later, None, 10).await.unwrap();
    assert_eq!(ids(both.clone()), [due, future]);
    assert_eq!((both[0].to_identity.as_str(), both[0].last_event_seq), ("bob", seqs[2]));
    assert_eq!(ids(m.due_releases(later, Some((at(30), due)), 10).await.unwrap()), [future], "keyset paging");

    let live = m.snapshot().await.unwrap();
    projector::rebuild(&env.log, m).await.unwrap();
    let rebuilt = m.snapshot().await.unwrap();
    assert_eq!(live, rebuilt, "{}", live.diff(&rebuilt));
}

/// A send and its release in one batch (the insert with its stamps) and in two (the patch).
async fn a_send_released_in_its_own_batch_lands_alike(env: Env) {
    let m = &env.models;
    let t0 = Utc::now().trunc_subsecs(6) - Duration::minutes(10);
    let at = |s: i64| t0 + Duration::seconds(s);
    let (one, two) = (Uuid::new_v4(), Uuid::new_v4());
    let events = vec![
        registered("bob", at(0)),
        scheduled(one, at(1), at(20)),
        released(one, at(20), at(21)),
        scheduled(two, at(2), at(20)),
        released(two, at(20), at(22)),
    ];
    let seqs = env.append_all(&events).await;
    // The first three in one batch, the last two one per batch.
    assert!(m.apply_stored(&stored(seqs[0], events[..3].to_vec()), seqs[0] - 1).await.unwrap());
    for i in 3..events.len() {
        assert!(m.apply_stored(&stored(seqs[i], vec![events[i].clone()]), seqs[i] - 1).await.unwrap());
    }
    for (id, released_at) in [(one, at(21)), (two, at(22))] {
        let r = m.signal(TENANT, id).await.unwrap().unwrap();
        assert_eq!((r.deliver_at, r.released_at), (Some(at(20)), Some(released_at)));
    }
    assert!(m.due_releases(Utc::now(), None, 10).await.unwrap().is_empty(), "both released");
    let live = m.snapshot().await.unwrap();
    projector::rebuild(&env.log, m).await.unwrap();
    let rebuilt = m.snapshot().await.unwrap();
    assert_eq!(live, rebuilt, "{}", live.diff(&rebuilt));
}
