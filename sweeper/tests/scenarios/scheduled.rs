//! Scheduled delivery on both backends (CONTRACT §16): a scheduled signal is invisible until its
//! `deliver_at` and the sweeper's timer releases it within a second of it; after a restart,
//! overdue ones are released by the first run, exactly one `signal.released` each, while those
//! recalled or past their TTL are not; a release racing a recall leaves exactly one of them.
//!
//! Deliberately real time and real backends, like the other scenarios.

use std::time::Duration;

use bus::event::DeliveredVia;
use bus::signal::SignalCommand;
use bus::{DomainError, Refusal};
use chrono::{SubsecRound, Utc};
use projector::queries::Queries;
use tokio_util::sync::CancellationToken;

use crate::support::{config, eventually_some, Bed, TENANT};

const MINUTE: Duration = Duration::from_secs(60);

fn deliver() -> SignalCommand {
    SignalCommand::Deliver { to: "bob".into(), via: DeliveredVia::Inbox, session_id: None, redeliver: false }
}

pub async fn on_time(bed: Bed) {
    let stop = CancellationToken::new();
    // A long interval: only the release timers can make it on time.
    let sweeper = bed.sweeper(config(MINUTE, "a", bed.lease()), &stop);
    bed.wait_for_facts(1, Duration::from_secs(10)).await;

    let sent_at = Utc::now();
    let ids = bed.send_scheduled(20, sent_at, 2, 60).await;
    // Whole microseconds, as the send records it and the read models keep it.
    let deliver_at = (sent_at + chrono::Duration::seconds(2)).trunc_subsecs(6);

    // Before it is due: the stream refuses a delivery, the drains do not list it.
    let early = bed.store.execute(TENANT, ids[0], &deliver(), "bob", Utc::now()).await;
    assert!(
        matches!(early, Err(bus::Error::Domain(DomainError::Refused(Refusal::NotYetDue)))),
        "a scheduled signal is not deliverable before deliver_at: {early:?}"
    );
    bed.settle().await;
    let drainable = bed.models.drainable(TENANT, "bob", Utc::now(), 100).await.unwrap();
    assert!(drainable.is_empty(), "nothing scheduled is drainable before it is due: {drainable:?}");
    let row = bed.models.signal(TENANT, ids[0]).await.unwrap().unwrap();
    assert_eq!((row.deliver_at, row.released_at), (Some(deliver_at), None));
    assert_eq!(row.publish_path.as_deref(), Some("scheduled"));
    assert_eq!(row.expires_at, Some(deliver_at + chrono::Duration::seconds(60)), "the TTL counts from deliver_at");

    let mut worst = Duration::ZERO;
    for &id in &ids {
        let released = eventually_some(Duration::from_secs(30), "released", || async {
            Some(bed.releases(id).await).filter(|r| !r.is_empty())
        })
        .await;
        assert_eq!(released.len(), 1, "{id}: one release, {released:?}");
        let (at, actor) = &released[0];
        assert_eq!(actor, "signalbus/sweeper");
        assert!(*at >= deliver_at, "never before deliver_at");
        worst = worst.max((*at - deliver_at).to_std().unwrap_or_default());
    }
    println!("20 scheduled signals released, the latest {worst:?} after deliver_at");
    // The sweep runs once a minute: only a timer releases it this soon.
    assert!(worst < Duration::from_secs(1), "released {worst:?} after deliver_at");

    // Released: the read models show it, and it drains like any pending async signal.
    bed.settle().await;
    let row = bed.models.signal(TENANT, ids[0]).await.unwrap().unwrap();
    assert!(row.released_at.is_some() && row.delivered_at.is_none(), "{row:?}");
    let drainable = bed.models.drainable(TENANT, "bob", Utc::now(), 100).await.unwrap();
    assert_eq!(drainable.len(), ids.len());
    bed.store.execute(TENANT, ids[0], &deliver(), "bob", Utc::now()).await.expect("a released signal is delivered");
    assert!(bed.terminal_events(ids[1]).await.is_empty(), "released is not an outcome: still pending");

    stop.cancel();
    sweeper.await.unwrap().unwrap();
    bed.shutdown().await;
}

pub async fn restart(bed: Bed) {
    let first = CancellationToken::new();
    let handle = bed.sweeper(config(MINUTE, "first", bed.lease()), &first);
    bed.wait_for_facts(1, Duration::from_secs(10)).await;
    first.cancel();
    handle.await.unwrap().unwrap();

    // While no sweeper runs: 120 scheduled signals fall due (sent 2 h ago for 1 h ago, expiring
    // in 3 h), 10 of them are recalled, 15 more ran past their TTL too, and 10 fall due in 2 s.
    let two_hours_ago = Utc::now() - chrono::Duration::hours(2);
    let overdue = bed.send_scheduled(120, two_hours_ago, 3600, 4 * 3600).await;
    let recall = SignalCommand::Recall { by: "alice".into() };
    for &id in &overdue[..10] {
        bed.store.execute(TENANT, id, &recall, "alice", Utc::now()).await.unwrap();
    }
    let ran_out = bed.send_scheduled(15, two_hours_ago, 3600, 60).await;
    let soon_at = Utc::now();
    let soon = bed.send_scheduled(10, soon_at, 2, 60).await;
    bed.settle().await;

    // The restart: its first run releases the backlog at once, its preload takes the soon ones.
    let second = CancellationToken::new();
    let handle = bed.sweeper(config(MINUTE, "second", bed.lease()), &second);
    bed.wait_for_facts(2, Duration::from_secs(20)).await;
    for &id in &overdue[10..] {
        assert_eq!(bed.releases(id).await.len(), 1, "overdue {id} released by the first run");
    }
    for &id in overdue[..10].iter().chain(&ran_out) {
        assert!(bed.releases(id).await.is_empty(), "{id} was recalled or ran out: never released");
    }
    for &id in &ran_out {
        assert!(bed.expired_at(id).await.is_some(), "{id} past its TTL is expired instead");
    }
    let deliver_at = soon_at + chrono::Duration::seconds(2);
    for &id in &soon {
        let released = eventually_some(Duration::from_secs(30), "soon-due released", || async {
            bed.releases(id).await.into_iter().next()
        })
        .await;
        let lag = (released.0 - deliver_at).to_std().unwrap_or_default();
        assert!(lag < MINUTE / 2, "soon-due {id} released {lag:?} late: by the sweep, not a preloaded timer");
    }
    second.cancel();
    handle.await.unwrap().unwrap();

    // Every role again (a sweeper whose timers and scan start from nothing): none twice.
    bed.settle().await;
    let third = CancellationToken::new();
    let handle = bed.sweeper(config(MINUTE, "third", bed.lease()), &third);
    let before = bed.sweep_facts().await.len();
    bed.wait_for_facts(before + 1, Duration::from_secs(20)).await;
    for &id in overdue[10..].iter().chain(&soon) {
        assert_eq!(bed.releases(id).await.len(), 1, "{id} released exactly once over three sweepers");
    }
    third.cancel();
    handle.await.unwrap().unwrap();
    bed.shutdown().await;
}

/// A release racing a recall at `deliver_at`: exactly one of them is on the stream, and a
/// recall after the release still wins over delivery.
pub async fn races(bed: Bed) {
    let stop = CancellationToken::new();
    let sweeper = bed.sweeper(config(Duration::from_millis(300), "a", bed.lease()), &stop);
    bed.wait_for_facts(1, Duration::from_secs(10)).await;
    let sent_at = Utc::now();
    let ids = bed.send_scheduled(60, sent_at, 1, 60).await;
    let deliver_at = sent_at + chrono::Duration::seconds(1);
    let racers = ids.iter().enumerate().map(|(i, &id)| {
        let store = bed.store.clone();
        async move {
            let at = deliver_at + chrono::Duration::milliseconds((i as i64 % 21) * 10 - 100);
            tokio::time::sleep((at - Utc::now()).to_std().unwrap_or_default()).await;
            store.execute(TENANT, id, &SignalCommand::Recall { by: "alice".into() }, "alice", Utc::now()).await.unwrap()
        }
    });
    futures::future::join_all(racers).await;
    let (mut recalled_first, mut released_first) = (0, 0);
    for &id in &ids {
        let terminal = bed.terminal_events(id).await;
        assert_eq!(terminal, vec![("signal.recalled", "alice".to_string())], "the recall always wins over delivery");
        match bed.releases(id).await.len() {
            0 => recalled_first += 1,
            1 => released_first += 1,
            n => panic!("{id} released {n} times"),
        }
    }
    println!("recall vs release: {recalled_first} recalled before release, {released_first} after");
    // A recalled signal is never released afterwards.
    tokio::time::sleep(Duration::from_millis(700)).await;
    let after: usize =
        futures::future::join_all(ids.iter().map(|&id| bed.releases(id))).await.iter().map(Vec::len).sum();
    assert_eq!(after, released_first);

    stop.cancel();
    sweeper.await.unwrap().unwrap();
    bed.shutdown().await;
}
