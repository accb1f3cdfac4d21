//! Hostile events on the stream, written past the gateway as another program (or a signalbus from
//! before the NUL guard) could: NUL characters in every text, an event that cannot be decoded,
//! JSON no backend can read back, a correlation id longer than its column, and a timestamp only
//! PostgreSQL refuses. Projection never halts on them: NUL becomes U+FFFD in both backends, the
//! rest is dead-lettered and skipped, other tenants' events keep landing, the doctor and the
//! health check say so, and a rebuild equals the live model, dead letters included. Both
//! backends, through the real projector over the real embedded log.

mod support;

use std::time::Duration;

use bus::catalog::Category;
use bus::event::{DeliveredVia, Entity, Event, EventBody, Subjects};
use chrono::{TimeZone, Utc};
use projector::queries::Queries;
use projector::{Projector, ProjectorConfig};
use serde_json::{json, Value};
use support::*;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

both_backends!(
    nul_characters_are_stored_as_replacement_characters,
    poison_events_are_dead_lettered_and_projection_goes_on,
    a_send_recorded_twice_keeps_the_row_and_takes_the_later_stamps,
    a_stuck_projection_is_reported
);

const R: char = '\u{FFFD}';

struct Running(CancellationToken, tokio::task::JoinHandle<projector::Result<()>>);

impl Running {
    fn start(env: &Env) -> Running {
        let token = CancellationToken::new();
        let p = Projector::new(env.log.clone(), env.models.clone(), ProjectorConfig::default());
        Running(token.clone(), tokio::spawn(p.run(token)))
    }

    async fn stop(self) {
        self.0.cancel();
        self.1.await.unwrap().unwrap();
    }
}

async fn caught_up(env: &Env) {
    let last = env.log.last_seq().await.unwrap();
    env.models.wait_for(last, Duration::from_secs(30)).await.expect("the projector passed every event");
}

async fn assert_equals_rebuild(env: &Env) {
    let live = env.models.snapshot().await.unwrap();
    projector::rebuild(&env.log, &env.models).await.expect("a rebuild passes the same events");
    let rebuilt = env.models.snapshot().await.unwrap();
    assert_eq!(live, rebuilt, "{}", live.diff(&rebuilt));
}

fn in_tenant(mut e: Event, tenant: &str) -> Event {
    e.tenant = tenant.into();
    e
}

fn sent_with(id: Uuid, change: impl FnOnce(&mut bus::event::SignalSent)) -> Event {
    let mut e = sent(id, "alice", "bob", Category::Info, Utc::now(), chrono::Duration::hours(1));
    let EventBody::SignalSent(s) = &mut e.body else { unreachable!() };
    change(s);
    e
}

async fn nul_characters_are_stored_as_replacement_characters(env: Env) {
    let m = &env.models;
    let now = Utc::now();
    let id = Uuid::new_v4();
    let send = sent_with(id, |s| {
        s.from = "al\0ice".into();
        s.signal_type = "Type\0".into();
        s.correlation_id = Some("corr\0".into());
        // `to_string` writes the NULs as `\u0000` escapes, as the gateway stored them before.
        s.payload = json!({"k\u{0}ey": ["x\u{0}y", {"n": "\u{0}"}]}).to_string();
    });
    let mut f = fact("alice/w", 1, &json!({"s\u{0}": "v\u{0}"}).to_string(), now);
    let EventBody::PluginFactRecorded(p) = &mut f.body else { unreachable!() };
    p.fact_type = "t\0".into();
    env.append_all(&[registered("al\0ice", now), registered("bob", now), send, f]).await;
    let running = Running::start(&env);
    caught_up(&env).await;

    let row = m.signal(TENANT, id).await.unwrap().expect("the signal is projected");
    assert_eq!(row.from_identity, format!("al{R}ice"));
    assert_eq!(row.signal_type, format!("Type{R}"));
    assert_eq!(row.correlation_id, Some(format!("corr{R}")));
    let payload = json!({ format!("k{R}ey"): [format!("x{R}y"), {"n": R.to_string()}] });
    assert_eq!(row.payload, payload);
    let agents: Vec<String> = m.agents(TENANT).await.unwrap().into_iter().map(|a| a.identity).collect();
    assert_eq!(agents, [format!("al{R}ice"), "bob".to_string()]);
    let page = projector::queries::FactsPage {
        tenant: TENANT.into(),
        plugin: "alice/w".into(),
        fact_type: None,
        before_seq: None,
        limit: 10,
        max_bytes: 1 << 20,
    };
    let facts = m.plugin_facts(&page).await.unwrap().facts;
    let state = json!({ format!("s{R}"): format!("v{R}") });
    assert_eq!(
        (facts[0].fact_type.clone(), serde_json::from_str::<serde_json::Value>(&facts[0].state_json).unwrap()),
        (format!("t{R}"), state.clone())
    );
    assert_eq!(m.plugin_state(TENANT, "alice/w").await.unwrap().state, state);
    assert_eq!(m.projection_status().await.unwrap().dead_letters, 0, "nothing was skipped");
    running.stop().await;
    assert_equals_rebuild(&env).await;
}

/// The dead letters' sequences and event types.
async fn dead_letters(env: &Env) -> Vec<(u64, String)> {
    let snap = env.models.snapshot().await.unwrap();
    snap.tables["projection_dead_letters"]
        .iter()
        .map(|row| {
            let v: Value = serde_json::from_str(row).unwrap();
            (v[1].as_u64().unwrap(), v[3].as_str().unwrap().to_string())
        })
        .collect()
}

async fn poison_events_are_dead_lettered_and_projection_goes_on(env: Env) {
    let m = &env.models;
    let now = Utc::now();
    let (bad_json, long_corr, ancient, good, later) =
        (Uuid::new_v4(), Uuid::new_v4(), Uuid::new_v4(), Uuid::new_v4(), Uuid::new_v4());
    env.append_all(&[registered("alice", now), registered("bob", now)]).await;
    let subject = Subjects::new("signalbus").of(TENANT, Entity::Signal(Uuid::new_v4()));
    assert_eq!(env.append_raw(&subject, b"\xc1 not an event").await, 3);
    let year_5000_bc = Utc.with_ymd_and_hms(-5000, 1, 1, 0, 0, 0).unwrap();
    env.append_all(&[
        sent_with(bad_json, |s| s.payload = "{not json".into()),
        sent_with(long_corr, |s| s.correlation_id = Some("c".repeat(65))),
        // PostgreSQL's timestamptz starts at 4713 BC; SQLite stores any text.
        in_tenant(sent_with(ancient, |s| s.created_at = year_5000_bc), "other"),
        in_tenant(sent_with(good, |_| {}), "other"),
        // Later events of a dead-lettered signal change nothing.
        delivered(bad_json, "bob", DeliveredVia::Inbox, None, false, now),
        sent_with(later, |_| {}),
        // An identity far too long for PostgreSQL's btree index (SQLSTATE 54000).
        registered(&(0..600).map(|_| Uuid::new_v4().simple().to_string()).collect::<String>(), now),
    ])
    .await;
    let running = Running::start(&env);
    caught_up(&env).await;

    assert_eq!(m.checkpoint().await.unwrap(), 10, "the checkpoint moved past every poison event");
    assert!(m.signal("other", good).await.unwrap().is_some(), "another tenant's signal landed");
    assert!(m.signal(TENANT, later).await.unwrap().is_some(), "and so did everything after");
    assert!(m.signal(TENANT, bad_json).await.unwrap().is_none());
    let mut expected = vec![(3, "unknown"), (4, "signal.sent"), (5, "signal.sent")];
    if env.backend == "postgres" {
        expected.extend([(6, "signal.sent"), (10, "agent.registered")]);
    } else {
        assert!(m.signal("other", ancient).await.unwrap().is_some());
    }
    let expected: Vec<(u64, String)> = expected.into_iter().map(|(s, t)| (s, t.to_string())).collect();
    assert_eq!(dead_letters(&env).await, expected);

    if env.backend == "postgres" {
        let snap = m.snapshot().await.unwrap();
        let rows = &snap.tables["projection_dead_letters"];
        assert!(rows[3].contains("out of range"), "found by halving the batch: {}", rows[3]);
        assert!(rows[4].contains("index row"), "{}", &rows[4][rows[4].len() - 200..]);
    }
    let status = m.projection_status().await.unwrap();
    assert_eq!(status.dead_letters, expected.len() as u64);
    let first = status.first_dead_letter.unwrap();
    assert!(first.reason.contains("cannot be decoded"), "{first:?}");
    let problems = projector::health::problems(&env.log, m).await.unwrap();
    assert_eq!(problems.iter().map(|p| p.check).collect::<Vec<_>>(), ["dead_letters"]);
    assert!(problems[0].summary.contains("first at stream sequence 3"), "{problems:?}");
    assert!(!problems[0].summary.contains(TENANT), "the public summary names no tenant");
    let report = projector::doctor(&env.log, m).await.unwrap();
    assert_eq!(report.failed().map(|c| c.name).collect::<Vec<_>>(), ["dead_letters"], "{report:#?}");
    let check = report.failed().next().unwrap();
    assert!(check.fix.as_deref().is_some_and(|f| f.contains("projection_dead_letters")));

    // A rebuild meets the same events and dead-letters them the same way.
    running.stop().await;
    assert_equals_rebuild(&env).await;
    assert_eq!(dead_letters(&env).await, expected);

    // Acknowledged after investigating: the doctor is satisfied again.
    env.execute("DELETE FROM projection_dead_letters").await;
    let report = projector::doctor(&env.log, m).await.unwrap();
    assert!(report.ok(), "{report:#?}");
}

/// A send the stream holds twice (another writer's duplicate: the bus's own appends cannot make
/// one), the second in a later batch and carrying its push. Sends are inserted without a conflict
/// arm; the second meets the row and its batch is applied again with the arm: the delivery is
/// stamped, nothing is dead-lettered, and a rebuild (both in one batch) agrees.
async fn a_send_recorded_twice_keeps_the_row_and_takes_the_later_stamps(env: Env) {
    let m = &env.models;
    let now = Utc::now();
    let (id, other, session) = (Uuid::new_v4(), Uuid::new_v4(), Uuid::new_v4());
    env.append_all(&[registered("alice", now), registered("bob", now), sent_with(id, |_| {})]).await;
    let running = Running::start(&env);
    caught_up(&env).await;
    assert_eq!(m.signal(TENANT, id).await.unwrap().expect("projected").delivered_at, None);

    env.append_all(&[sent_pushed(id, "alice", "bob", session, now), sent_with(other, |_| {})]).await;
    caught_up(&env).await;
    let row = m.signal(TENANT, id).await.unwrap().expect("still one row");
    assert!(row.delivered_at.is_some(), "the later push is stamped: {row:?}");
    assert_eq!(row.resolved_to_session, Some(session));
    assert_eq!(row.last_event_seq, 4);
    assert!(m.signal(TENANT, other).await.unwrap().is_some(), "the rest of the batch landed");
    assert_eq!(dead_letters(&env).await, []);
    running.stop().await;
    assert_equals_rebuild(&env).await;
}

async fn a_stuck_projection_is_reported(env: Env) {
    let m = &env.models;
    let checks = |p: Vec<projector::health::Problem>| p.into_iter().map(|p| p.check).collect::<Vec<_>>();
    let five_minutes_ago = Utc::now() - chrono::Duration::minutes(5);
    env.append_all(&[registered("alice", five_minutes_ago)]).await;
    // No projector runs, but the checkpoint moved just now (the migration wrote it).
    assert!(checks(projector::health::problems(&env.log, m).await.unwrap()).is_empty());

    env.execute("UPDATE projection_checkpoints SET updated_at = '2000-01-01T00:00:00.000000Z'").await;
    let problems = projector::health::problems(&env.log, m).await.unwrap();
    assert_eq!(checks(problems.clone()), ["projection_progress"]);
    assert!(problems[0].summary.contains("stuck at stream sequence 0, 1 event behind"), "{problems:?}");
    let report = projector::doctor(&env.log, m).await.unwrap();
    assert_eq!(report.failed().map(|c| c.name).collect::<Vec<_>>(), ["projection_progress"], "{report:#?}");

    let running = Running::start(&env);
    caught_up(&env).await;
    running.stop().await;
    assert!(checks(projector::health::problems(&env.log, m).await.unwrap()).is_empty());

    // After a quiet spell the checkpoint is old, but a fresh event has not waited: not stuck.
    env.execute("UPDATE projection_checkpoints SET updated_at = '2000-01-01T00:00:00.000000Z'").await;
    env.append_all(&[registered("bob", Utc::now())]).await;
    assert!(checks(projector::health::problems(&env.log, m).await.unwrap()).is_empty());
}
