//! The sweeper scenarios both backends run (`embedded.rs`, `distributed.rs`): on-time expiry,
//! races with delivery and recall, restart with overdue signals, archival, the status fact.
//!
//! Directive expiry is `directives.rs`; scheduled delivery's releases are `scheduled.rs`.
//!
//! Deliberately real time and real backends: the paused-time timer tests live in the crate.

pub mod directives;
pub mod scheduled;

use std::time::{Duration, Instant};

use crate::support::{config, eventually, eventually_some, Bed, TENANT};
use bus::event::DeliveredVia;
use bus::signal::SignalCommand;
use chrono::Utc;
use futures::StreamExt;
use projector::queries::Queries;
use tokio_util::sync::CancellationToken;

const MINUTE: Duration = Duration::from_secs(60);

pub async fn on_time(bed: Bed) {
    let stop = CancellationToken::new();
    // A long interval: only the timers can make it on time.
    let sweeper = bed.sweeper(config(MINUTE, "a", bed.lease()), &stop);
    bed.wait_for_facts(1, Duration::from_secs(10)).await;

    let sent_at = Utc::now();
    let id = bed.send(sent_at, 1).await;
    let expires_at = sent_at + chrono::Duration::seconds(1);
    let started = Instant::now();
    eventually(Duration::from_secs(30), "the signal expires", || async { bed.expired_at(id).await.is_some() }).await;
    let observed = started.elapsed();
    let appended_at = bed.expired_at(id).await.unwrap();
    let lag = (appended_at - expires_at).to_std().unwrap_or_default();
    println!("1 s ttl: expired event seen {observed:?} after the send; appended {lag:?} after expires_at");
    assert!(appended_at >= expires_at, "never before expires_at");
    // Not a speed check (bench/ measures the lag): the sweep runs once a minute, so only a
    // timer can have expired it this soon.
    assert!(lag < MINUTE / 2, "expired {lag:?} after expires_at: by the sweep, not a timer");
    assert_eq!(bed.terminal_events(id).await, vec![("signal.expired", "signalbus/sweeper".to_string())]);

    // The read models show it expired too.
    bed.settle().await;
    let row = bed.models.signal(TENANT, id).await.unwrap().unwrap();
    assert!(row.expired_at.is_some() && row.delivered_at.is_none() && row.recalled_at.is_none());

    stop.cancel();
    sweeper.await.unwrap().unwrap();
    bed.shutdown().await;
}

pub async fn races(bed: Bed) {
    let stop = CancellationToken::new();
    let sweeper = bed.sweeper(config(Duration::from_millis(300), "a", bed.lease()), &stop);
    bed.wait_for_facts(1, Duration::from_secs(10)).await;

    let sent_at = Utc::now();
    let ids = bed.send_many(150, sent_at, 1).await;
    let expires_at = sent_at + chrono::Duration::seconds(1);
    // Deliveries and recalls land around expires_at (−100 ms … +100 ms), racing the timers.
    let racers = futures::stream::iter(ids.iter().enumerate().map(|(i, &id)| {
        let store = bed.store.clone();
        async move {
            let at = expires_at + chrono::Duration::milliseconds((i as i64 % 21) * 10 - 100);
            let wait = (at - Utc::now()).to_std().unwrap_or_default();
            tokio::time::sleep(wait).await;
            let command = if i % 2 == 0 {
                SignalCommand::Deliver {
                    to: "bob".into(),
                    via: DeliveredVia::Inbox,
                    session_id: None,
                    redeliver: false,
                }
            } else {
                SignalCommand::Recall { by: "alice".into() }
            };
            let actor = if i % 2 == 0 { "bob" } else { "alice" };
            let _ = store.execute(TENANT, id, &command, actor, Utc::now()).await;
        }
    }))
    .buffer_unordered(150)
    .collect::<Vec<()>>();
    racers.await;

    let mut outcomes = std::collections::BTreeMap::<String, usize>::new();
    for &id in &ids {
        let terminal = eventually_some(Duration::from_secs(5), "a terminal event", || async {
            Some(bed.terminal_events(id).await).filter(|t| !t.is_empty())
        })
        .await;
        assert_eq!(terminal.len(), 1, "signal {id} has {terminal:?}");
        *outcomes.entry(format!("{} by {}", terminal[0].0, terminal[0].1)).or_default() += 1;
    }
    println!("race outcomes: {outcomes:?}");
    assert!(outcomes.keys().any(|k| k.contains("by signalbus/sweeper")), "the sweeper won some: {outcomes:?}");

    stop.cancel();
    sweeper.await.unwrap().unwrap();
    bed.shutdown().await;
}

pub async fn restart(bed: Bed) {
    // A first sweeper runs and stops: the restart below starts from its own state of nothing.
    let first = CancellationToken::new();
    let handle = bed.sweeper(config(MINUTE, "first", bed.lease()), &first);
    bed.wait_for_facts(1, Duration::from_secs(10)).await;
    first.cancel();
    handle.await.unwrap().unwrap();

    // While no sweeper runs: 300 signals already overdue, 20 due in 2 s.
    let overdue = bed.send_many(300, Utc::now() - chrono::Duration::hours(2), 60).await;
    let soon_at = Utc::now();
    let soon = bed.send_many(20, soon_at, 2).await;
    bed.settle().await; // in the read models: the restart reaches them through the scan and preload

    let second = CancellationToken::new();
    let restarted = Instant::now();
    let handle = bed.sweeper(config(MINUTE, "second", bed.lease()), &second);
    let facts = bed.wait_for_facts(2, Duration::from_secs(10)).await;
    println!("restart: first run took {:?}, fact {}", restarted.elapsed(), facts[1]);
    assert!(facts[1]["expired"].as_u64().unwrap() >= 300, "the startup run expired the backlog: {}", facts[1]);
    assert_eq!(facts[1]["leader"], "second");
    for &id in &overdue {
        assert!(bed.expired_at(id).await.is_some(), "overdue {id} expired at start");
    }
    // The soon-due ones were pending at restart and are only in the read models: preload → timers.
    let expires_at = soon_at + chrono::Duration::seconds(2);
    for &id in &soon {
        eventually(Duration::from_secs(30), "soon-due signal expired", || async { bed.expired_at(id).await.is_some() })
            .await;
        let at = bed.expired_at(id).await.unwrap();
        let lag = (at - expires_at).to_std().unwrap_or_default();
        // The sweep runs once a minute: only a preloaded timer expires it this soon.
        assert!(lag < MINUTE / 2, "soon-due {id} expired {lag:?} late: by the sweep, not a timer");
    }
    // The status view shows the newest run.
    bed.settle().await;
    let state = bed.models.plugin_state(TENANT, sweeper::status::PLUGIN).await.unwrap();
    assert_eq!(state.state["leader"], "second");

    second.cancel();
    handle.await.unwrap().unwrap();
    bed.shutdown().await;
}

pub async fn archival(bed: Bed) {
    let ids = bed.send_many(40, Utc::now() - chrono::Duration::hours(1), 60).await;
    let pending = bed.send(Utc::now(), 3600).await;
    bed.settle().await;
    let mut cfg = config(Duration::from_millis(300), "a", bed.lease());
    cfg.archive_after = Duration::ZERO;
    cfg.archive_batch = 7; // several batches
    let stop = CancellationToken::new();
    let handle = bed.sweeper(cfg, &stop);

    // Run 1 expires them; a later run (once the projector stamped expired_at) archives them.
    let archived = eventually_some(Duration::from_secs(10), "all 40 archived", || async {
        let archived: u64 = bed.sweep_facts().await.iter().map(|f| f["archived"].as_u64().unwrap()).sum();
        Some(archived).filter(|&a| a >= 40)
    })
    .await;
    assert_eq!(archived, 40);
    for &id in &ids {
        let row = bed.models.signal(TENANT, id).await.unwrap().expect("archived signal still readable");
        assert!(row.expired_at.is_some());
    }
    assert_eq!(bed.hot_and_history().await, (1, 40), "(signal_queue, signal_history) rows");
    let row = bed.models.signal(TENANT, pending).await.unwrap().unwrap();
    assert!(row.expired_at.is_none(), "a pending signal stays hot and pending");

    stop.cancel();
    handle.await.unwrap().unwrap();
    bed.shutdown().await;
}

pub async fn purge(bed: Bed) {
    let ids = bed.send_many(25, Utc::now() - chrono::Duration::hours(1), 60).await;
    bed.settle().await;
    let mut cfg = config(Duration::from_millis(300), "a", bed.lease());
    cfg.archive_after = Duration::ZERO;
    cfg.retention = Duration::ZERO;
    cfg.archive_batch = 10;
    let stop = CancellationToken::new();
    let handle = bed.sweeper(cfg, &stop);

    // Expired, then archived, then (history older than the retention) deleted.
    eventually(Duration::from_secs(10), "all 25 purged", || async {
        bed.sweep_facts().await.iter().map(|f| f["purged"].as_u64().unwrap()).sum::<u64>() >= 25
    })
    .await;
    assert_eq!(bed.hot_and_history().await, (0, 0));
    for &id in &ids {
        assert!(bed.models.signal(TENANT, id).await.unwrap().is_none(), "past retention, {id} is gone");
        assert_eq!(bed.terminal_events(id).await.len(), 1, "the stream keeps its own retention");
    }
    stop.cancel();
    handle.await.unwrap().unwrap();
    bed.shutdown().await;
}

/// The read-free expiry trusts a hint (the read model's `last_event_seq`) only as far as the
/// compare-and-set does: a stale hint falls back to reading the stream and loses cleanly.
pub async fn stale_hints(bed: Bed) {
    use sweeper::expire::{expire_pending, Outcome, Pending};
    let types = bus::catalog::TypeTable::default();
    let hour_ago = Utc::now() - chrono::Duration::hours(1);
    // `delivered` expires in a second: listed by a sweep that looks that far ahead, and still
    // deliverable now (a delivery is stored only before its signal's expiry).
    let (delivered, current) = (bed.send(Utc::now(), 1).await, bed.send(hour_ago, 1).await);
    bed.settle().await;
    let rows = bed.queries().overdue(Utc::now() + chrono::Duration::seconds(2), None, 10).await.unwrap();
    let hint = |id| Pending::from(rows.iter().find(|r| r.id == id).expect("listed overdue"));
    assert!(hint(delivered).last_seq > 0);

    // Delivered after the read model listed it (as a delivery racing the sweeper would be): the
    // hint is stale, the delivery stands once the signal is due.
    let deliver =
        SignalCommand::Deliver { to: "bob".into(), via: DeliveredVia::Inbox, session_id: None, redeliver: false };
    bed.store.execute(TENANT, delivered, &deliver, "bob", Utc::now()).await.unwrap();
    while !bus::signal::is_due(hint(delivered).expires_at, Utc::now()) {
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let outcome = expire_pending(&bed.store, &types, TENANT, delivered, &hint(delivered)).await.unwrap();
    assert_eq!(outcome, Outcome::AlreadyTerminal);
    assert_eq!(bed.terminal_events(delivered).await, vec![("signal.delivered", "bob".to_string())]);

    // Not due by our clock: nothing appended, whatever the hint says.
    let early = Pending { expires_at: Utc::now() + chrono::Duration::hours(1), ..hint(current) };
    let outcome = expire_pending(&bed.store, &types, TENANT, current, &early).await.unwrap();
    assert_eq!(outcome, Outcome::NotYetDue);
    assert!(bed.terminal_events(current).await.is_empty());

    // A current hint: one append, with the send's expiry in the event.
    let outcome = expire_pending(&bed.store, &types, TENANT, current, &hint(current)).await.unwrap();
    assert!(matches!(outcome, Outcome::Expired { .. }), "{outcome:?}");
    let subject = bed.log.subjects().of(TENANT, bus::event::Entity::Signal(current));
    let last = bed.log.last_on_subject(&subject).await.unwrap().unwrap();
    match last.event.body {
        bus::event::EventBody::SignalExpired(e) => assert_eq!(e.expires_at, hint(current).expires_at),
        other => panic!("expected signal.expired, got {other:?}"),
    }
    // Twice: the hint is stale now (our own expiry), so it reads and finds it terminal.
    let outcome = expire_pending(&bed.store, &types, TENANT, current, &hint(current)).await.unwrap();
    assert_eq!(outcome, Outcome::AlreadyTerminal);
    bed.shutdown().await;
}
