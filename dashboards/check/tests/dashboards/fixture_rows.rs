//! The PostgreSQL panels against hand-written read-model rows (`fixtures/read_models.sql`): rows
//! a live bus in a test cannot produce quickly — archived history, a pre-v0.3 row without
//! `publish_path` or `expires_at`, a release two days ago, a second tenant — with exact counts,
//! so every branch of every panel query (NULL handling, UNION with history, tenant lists, sort
//! order) is pinned down.
//!
//! Deliberately inserts rows directly: `live_bus` covers the same panels with data the real
//! bus wrote, and this file covers what that workload cannot reach.

use std::collections::{BTreeMap, BTreeSet};

use dashboards_check::repo_root;
use sqlx::postgres::PgPoolOptions;
use sqlx::{PgPool, Row};

use crate::panels::{check_shapes, find, int, run_all, single, text};

async fn database_with_schema(db: &testkit::TestDb) -> PgPool {
    let pool = PgPoolOptions::new().max_connections(2).connect(db.url()).await.expect("connect to the test database");
    let dir = repo_root().join("schema/postgres");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", dir.display()))
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "sql"))
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no migrations in {}", dir.display());
    for f in files {
        let text = std::fs::read_to_string(&f).expect("read migration");
        sqlx::raw_sql(&text).execute(&pool).await.unwrap_or_else(|e| panic!("{}: {e}", f.display()));
    }
    sqlx::raw_sql(include_str!("fixtures/read_models.sql")).execute(&pool).await.expect("insert the fixture rows");
    pool
}

#[tokio::test]
async fn sql_panels_run_against_the_read_models_and_return_what_their_panels_expect() {
    let db = testkit::TestDb::create().await;
    let pool = database_with_schema(&db).await;
    let ran = run_all(&pool, "'default'", 60).await;
    check_shapes(&ran, "the fixture");

    // The five state breakdowns, against the fixture's known rows.
    assert_eq!(single(&ran, "available_now", "available_now"), 5, "4 hot + 1 archived deliveries");
    assert_eq!(single(&ran, "pending_pickup (transient)", "pending_pickup"), 4);
    assert_eq!(single(&ran, "expired", "expired"), 2, "1 hot + 1 archived expiry");
    assert_eq!(single(&ran, "recalled", "recalled"), 1);

    // TTL clock: every pending row of the tenant, soonest expiry first, NULL publish_path as unknown.
    let ttl = find(&ran, "TTL countdown: pending rows");
    assert_eq!(ttl.rows.len(), 4);
    assert!(ttl.rows.iter().all(|row| text(row, "tenant") == "default"));
    let paths: BTreeSet<String> = ttl.rows.iter().map(|row| text(row, "publish_path")).collect();
    assert_eq!(paths, ["buffered_for_piggyback", "queued_offline", "unknown"].map(String::from).into_iter().collect());
    let first = ttl.rows[0].try_get::<Option<i64>, _>("expires_in_seconds").expect("countdown");
    assert!(first.is_some_and(|s| s < 0), "the overdue row comes first with a negative countdown, got {first:?}");
    let last = ttl.rows[3].try_get::<Option<i64>, _>("expires_in_seconds").expect("countdown");
    assert_eq!(last, None, "the row without expires_at comes last and has no countdown");
    let by_path: BTreeMap<String, i64> = find(&ran, "pending by publish_path")
        .rows
        .iter()
        .map(|row| (text(row, "publish_path"), int(row, "pending")))
        .collect();
    assert_eq!(by_path.get("unknown"), Some(&1));
    assert_eq!(by_path.get("queued_offline"), Some(&2));

    // Time to delivery from rows: every delivery path shows up.
    let ttd = find(&ran, "Time to delivery per type and path (rows)");
    let vias: BTreeSet<String> = ttd.rows.iter().map(|row| text(row, "delivered_via")).collect();
    assert_eq!(vias, ["inbox", "piggyback", "startup_drain", "ws_push"].map(String::from).into_iter().collect());
    assert_eq!(ttd.rows.iter().map(|row| int(row, "delivered")).sum::<i64>(), 5);

    // Daemon cluster.
    assert_eq!(single(&ran, "daemon sessions", "live"), 1);
    assert_eq!(single(&ran, "daemon sessions", "stale"), 1);
    assert_eq!(single(&ran, "daemon sessions", "released"), 1, "the release two days ago is outside the range");
    let attached: Vec<(String, String)> = find(&ran, "daemon attached per identity")
        .rows
        .iter()
        .map(|row| (text(row, "identity"), text(row, "daemon")))
        .collect();
    let expect =
        [("carol", "stale"), ("dave", "daemon-less"), ("alice", "offline"), ("erin", "offline"), ("bob", "attached")];
    assert_eq!(attached, expect.map(|(i, s)| (i.to_string(), s.to_string())).to_vec(), "problems sort first");
    let daemon_ws = find(&ran, "open sessions by kind and surface")
        .rows
        .iter()
        .find(|row| text(row, "kind") == "daemon" && text(row, "surface") == "ws")
        .map(|row| (int(row, "live"), int(row, "stale")));
    assert_eq!(daemon_ws, Some((1, 1)));

    // Directives: both open statuses listed; the overdue claimed one first in the countdown.
    let by_status: Vec<(String, i64)> = find(&ran, "open directives by status")
        .rows
        .iter()
        .map(|row| (text(row, "status"), int(row, "open")))
        .collect();
    assert_eq!(by_status, [("requested".to_string(), 1), ("started".to_string(), 1)]);
    let open = find(&ran, "open directives: claimer and deadline countdown");
    assert_eq!(open.rows.len(), 2, "the two open directives of the tenant, not the ended ones");
    let claimers: Vec<Option<String>> = open.rows.iter().map(|row| row.get("claimed_by")).collect();
    assert_eq!(claimers, [Some("bob".to_string()), None], "overdue first; NULL when unclaimed");
    let left: Vec<i64> = open.rows.iter().map(|row| int(row, "deadline_in_seconds")).collect();
    assert!(left[0] < 0 && left[1] > 7_000 && left[1] <= 7_200, "countdowns {left:?}");
    let percent: Vec<Option<i32>> = open.rows.iter().map(|row| row.get("progress_percent")).collect();
    assert_eq!(percent, [Some(40), None]);

    // Groups: every group of the tenant, members' presence from recipient_state.
    let groups: Vec<(String, i64, i64, i64, String)> = find(&ran, "groups and members' presence")
        .rows
        .iter()
        .map(|row| {
            (
                text(row, "group_name"),
                int(row, "members"),
                int(row, "available"),
                int(row, "offline"),
                text(row, "presence"),
            )
        })
        .collect();
    let want = [("@builders", 3, 2, 1, "bob: available, carol: available, erin: offline"), ("@reviewers", 0, 0, 0, "")];
    assert_eq!(groups, want.map(|(g, m, a, o, p)| (g.to_string(), m, a, o, p.to_string())).to_vec());

    // Scheduled delivery: every bucket listed, released and recalled rows out of the backlog.
    let sched = run_all(&pool, "'sched'", 60).await;
    let backlog: Vec<(String, i64)> = find(&sched, "scheduled backlog by due time")
        .rows
        .iter()
        .map(|row| (text(row, "due"), int(row, "scheduled")))
        .collect();
    let want =
        [("overdue, not released", 1), ("within 1 minute", 1), ("within 1 hour", 0), ("within 1 day", 1), ("later", 1)];
    assert_eq!(backlog, want.map(|(d, n)| (d.to_string(), n)).to_vec());
    assert!(find(&ran, "scheduled backlog by due time").rows.iter().all(|row| int(row, "scheduled") == 0));

    // The tenant variable with several values (and "All") expands to a quoted list.
    let all = run_all(&pool, "'acme','default'", 60).await;
    assert_eq!(single(&all, "pending_pickup (transient)", "pending_pickup"), 5);
    assert_eq!(single(&all, "available_now", "available_now"), 7);
    assert_eq!(single(&all, "daemon sessions", "stale"), 2);
    let open_all: Vec<i64> = find(&all, "open directives by status").rows.iter().map(|row| int(row, "open")).collect();
    assert_eq!(open_all, [2, 1]);
    assert_eq!(find(&all, "groups and members' presence").rows.len(), 3);
    let tenants: BTreeSet<String> = find(&all, "variable tenant").rows.iter().map(|row| text(row, "tenant")).collect();
    assert_eq!(tenants, ["acme", "default"].map(String::from).into_iter().collect());
}
