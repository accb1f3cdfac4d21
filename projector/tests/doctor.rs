//! The doctor finds violations planted behind the projector's back, and a rebuild repairs
//! them — against PostgreSQL and SQLite. Not the projection itself (projection.rs).

mod support;

use bus::catalog::Category;
use bus::event::DeliveredVia;
use chrono::{Duration, Utc};
use support::*;
use uuid::Uuid;

both_backends!(doctor_finds_planted_violations);

async fn doctor_finds_planted_violations(env: Env) {
    let m = &env.models;
    let t0 = Utc::now() - Duration::minutes(1);
    let (ok, bounce) = (Uuid::new_v4(), Uuid::new_v4());
    let events = vec![
        sent(ok, "x", "y", Category::Info, t0, Duration::hours(1)),
        bounced(bounce, "x", "y", t0),
        delivered(ok, "y", DeliveredVia::Inbox, None, false, t0),
    ];
    let seqs = env.append_all(&events).await;
    assert!(m.apply_stored(&stored(1, events.clone()), 0).await.unwrap());
    let report = projector::doctor(&env.log, m).await.unwrap();
    assert!(report.ok(), "{report:#?}");
    assert_eq!((report.stream_last_seq, report.checkpoint, report.lag_events), (3, 3, 0));

    // Plant: a second terminal stamp, and a row for the bounced signal (as if written by hand).
    let mut bad = stored(4, vec![expired(ok, t0, t0)]);
    bad.extend(stored(5, vec![sent(bounce, "x", "y", Category::Info, t0, Duration::hours(1))]));
    assert!(m.apply_stored(&bad, 3).await.unwrap());
    // And in PostgreSQL a delivered, unacked signal missing from the redelivery candidates.
    let postgres = env.backend == "postgres";
    if postgres {
        env.execute("DELETE FROM signal_inflight").await;
    }
    let report = projector::doctor(&env.log, m).await.unwrap();
    let failed: Vec<&str> = report.failed().map(|c| c.name).collect();
    let mut planted = vec!["one_terminal_stamp", "no_bounced_rows", "checkpoint_within_stream"];
    if postgres {
        planted.insert(1, "inflight_list");
    }
    assert_eq!(failed, planted, "{report:#?}");
    assert!(report.failed().all(|c| c.fix.as_deref().is_some_and(|f| !f.is_empty())));
    assert!(report.checks.iter().find(|c| c.name == "one_terminal_stamp").unwrap().detail.contains(&ok.to_string()));
    assert_eq!(seqs, [1, 2, 3]);

    // A rebuild from the stream repairs them all.
    let rebuilt = projector::rebuild(&env.log, m).await.unwrap();
    assert_eq!((rebuilt.events, rebuilt.last_seq), (3, 3));
    let report = projector::doctor(&env.log, m).await.unwrap();
    assert!(report.ok(), "{report:#?}");
}
