//! The projector's `recipient_state` SQL against the one rule it spells (`bus::presence`): for a
//! grid of identities — no session, open sessions with fresh, borderline and stale heartbeats,
//! closed sessions beside open ones — the row equals what the rule answers, on PostgreSQL and
//! SQLite.

mod support;

use bus::presence::{recipient_state, stale_threshold};
use chrono::{Duration, Utc};
use projector::queries::Queries;
use support::*;
use uuid::Uuid;

both_backends!(the_sql_answers_what_the_presence_rule_answers);

async fn the_sql_answers_what_the_presence_rule_answers(env: Env) {
    let m = &env.models;
    let now = Utc::now();
    let stale_after = std::time::Duration::from_secs(60);
    let ago = |s: i64| now - Duration::seconds(s);
    // (identity, open sessions' heartbeat ages in seconds, closed sessions' ages)
    let cases: &[(&str, &[i64], &[i64])] = &[
        ("nobody", &[], &[]),
        ("fresh", &[5], &[]),
        ("fresh-and-stale", &[120, 10], &[]),
        ("borderline", &[59], &[]),
        ("stale", &[61], &[]),
        ("two-stale", &[300, 90], &[]),
        ("closed-only", &[], &[1]),
        ("stale-beside-closed-fresh", &[200], &[1]),
    ];
    let mut events = Vec::new();
    for (identity, open, closed_ages) in cases {
        events.push(registered(identity, ago(1000)));
        for age in open.iter() {
            let s = Uuid::new_v4();
            events.push(opened(s, identity, ago(900)));
            events.push(heartbeat(s, identity, ago(*age)));
        }
        for age in closed_ages.iter() {
            let s = Uuid::new_v4();
            events.push(opened(s, identity, ago(900)));
            events.push(heartbeat(s, identity, ago(*age)));
            events.push(closed(s, identity, ago(*age)));
        }
    }
    assert!(m.apply_stored(&stored(1, events), 0).await.unwrap());
    m.refresh_recipient_state(now).await.unwrap();

    let rows = m.agents(TENANT).await.unwrap();
    let threshold = stale_threshold(now, stale_after);
    for (identity, open, _) in cases {
        let freshest = open.iter().min().map(|age| ago(*age));
        let expected = recipient_state(open.len(), freshest, threshold);
        let row = rows.iter().find(|r| r.identity == *identity).expect("a roster row");
        assert_eq!(row.state, expected.as_str(), "{identity} on {}", env.backend);
    }
}
