//! Runs every PostgreSQL panel query of `dashboards/*.json` the way Grafana would (macros and
//! template variables expanded to concrete SQL) against a database, and checks each result's
//! shape: the columns its panel expects, in order, with types the panel can draw.
//!
//! Deliberately does not fill the database or assert numbers: `fixture_rows` and `live_bus`
//! each bring their own data and know what it should add up to.

use std::collections::BTreeSet;

use dashboards_check::dashboards::{self, Language, Query};
use dashboards_check::{dashboards_dir, sql_macros};
use sqlx::postgres::PgRow;
use sqlx::{Column, Executor, PgPool, Row, Statement, TypeInfo};

/// The columns, in order, each PostgreSQL query must return: (file, panel title, refId, columns).
/// A panel added to a dashboard without a row here fails the test.
pub const EXPECTED_COLUMNS: &[(&str, &str, &str, &[&str])] = &[
    ("signal-pipeline.json", "available_now", "A", &["available_now"]),
    ("signal-pipeline.json", "pending_pickup (transient)", "A", &["pending_pickup"]),
    ("signal-pipeline.json", "expired", "A", &["expired"]),
    ("signal-pipeline.json", "recalled", "A", &["recalled"]),
    ("signal-pipeline.json", "Signal flow per interval", "A", &["time", "metric", "value"]),
    (
        "signal-pipeline.json",
        "TTL countdown: pending rows",
        "A",
        &[
            "signal_id",
            "tenant",
            "from_identity",
            "to_identity",
            "signal_type",
            "delivery_class",
            "publish_path",
            "recipient_state",
            "created_at",
            "expires_at",
            "expires_in_seconds",
        ],
    ),
    ("signal-pipeline.json", "pending by publish_path", "A", &["publish_path", "pending"]),
    ("signal-pipeline.json", "scheduled backlog by due time", "A", &["due", "scheduled"]),
    ("signal-pipeline.json", "pending by recipient_state at send", "A", &["recipient_state", "pending"]),
    (
        "signal-pipeline.json",
        "Time to delivery per type and path (rows)",
        "A",
        &["signal_type", "delivered_via", "delivered", "p50_seconds", "p95_seconds", "max_seconds"],
    ),
    ("signal-pipeline.json", "Time to delivery p95 by delivered_via (rows)", "A", &["time", "metric", "value"]),
    ("signal-pipeline.json", "daemon sessions", "A", &["live", "stale", "released"]),
    ("signal-pipeline.json", "open sessions by kind and surface", "A", &["kind", "surface", "live", "stale"]),
    ("signal-pipeline.json", "daemon sessions opened and released", "A", &["time", "metric", "value"]),
    (
        "signal-pipeline.json",
        "daemon attached per identity",
        "A",
        &[
            "tenant",
            "identity",
            "registered_kind",
            "daemon",
            "live_daemon_sessions",
            "stale_daemon_sessions",
            "other_open_sessions",
            "open_surfaces",
            "last_heartbeat",
        ],
    ),
    ("signal-pipeline.json", "open directives by status", "A", &["status", "open"]),
    (
        "signal-pipeline.json",
        "open directives: claimer and deadline countdown",
        "A",
        &[
            "directive_id",
            "tenant",
            "directive_type",
            "issuer",
            "assignee",
            "status",
            "claimed_by",
            "progress_percent",
            "created_at",
            "deadline",
            "deadline_in_seconds",
        ],
    ),
    (
        "signal-pipeline.json",
        "groups and members' presence",
        "A",
        &["tenant", "group_name", "self_join", "announce", "members", "available", "stale", "offline", "presence"],
    ),
    ("signal-pipeline.json", "variable tenant", "var", &["tenant"]),
];

const NUMERIC: &[&str] = &["INT2", "INT4", "INT8", "NUMERIC", "FLOAT4", "FLOAT8"];
const TEXT: &[&str] = &["TEXT", "VARCHAR", "NAME", "BPCHAR"];

pub fn all_queries() -> Vec<Query> {
    dashboards::load_all(&dashboards_dir()).iter().flat_map(dashboards::queries).collect()
}

pub fn expected_columns(q: &Query) -> &'static [&'static str] {
    EXPECTED_COLUMNS
        .iter()
        .find(|(f, p, r, _)| *f == q.file && *p == q.panel && *r == q.ref_id)
        .map(|(_, _, _, cols)| *cols)
        .unwrap_or_else(|| panic!("{} / {:?} / {}: add its columns to EXPECTED_COLUMNS", q.file, q.panel, q.ref_id))
}

/// The dashboard's default range (`now-6h` to `now`), as Grafana would render it, with a minute
/// of slack at the end so rows stamped at `now()` are inside.
async fn time_range(pool: &PgPool) -> (String, String) {
    let fmt = "YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"";
    let row = sqlx::query(&format!(
        "SELECT to_char((now() - interval '6 hours') AT TIME ZONE 'UTC', '{fmt}'), \
                to_char((now() + interval '1 minute') AT TIME ZONE 'UTC', '{fmt}')"
    ))
    .fetch_one(pool)
    .await
    .expect("time range");
    (row.get(0), row.get(1))
}

/// One query as run: the panel it belongs to, its result columns (name, type) and rows.
pub struct Ran {
    pub query: Query,
    pub columns: Vec<(String, String)>,
    pub rows: Vec<PgRow>,
}

/// Runs every SQL query with `$tenant` as `tenant_sql` (a quoted list, as Grafana renders a
/// multi-value variable) and `$stale_after` as `stale_after_seconds`.
pub async fn run_all(pool: &PgPool, tenant_sql: &str, stale_after_seconds: u64) -> Vec<Ran> {
    let (from, to) = time_range(pool).await;
    let ctx = sql_macros::Context {
        from,
        to,
        interval_seconds: 60,
        variables: vec![("tenant".into(), tenant_sql.into()), ("stale_after".into(), stale_after_seconds.to_string())],
    };
    let mut out = Vec::new();
    for q in all_queries().into_iter().filter(|q| matches!(q.language, Language::Sql { .. })) {
        let sql = sql_macros::expand(&q.text, &ctx).unwrap_or_else(|e| panic!("{} / {:?}: {e}", q.file, q.panel));
        let stmt = pool.prepare(&sql).await.unwrap_or_else(|e| panic!("{} / {:?}: {e}\n{sql}", q.file, q.panel));
        let columns = stmt.columns().iter().map(|c| (c.name().to_string(), c.type_info().name().to_string())).collect();
        let rows = sqlx::query(&sql)
            .fetch_all(pool)
            .await
            .unwrap_or_else(|e| panic!("{} / {:?}: {e}\n{sql}", q.file, q.panel));
        if matches!(&q.language, Language::Sql { format } if format == "time_series") {
            assert!(sql.contains("ORDER BY 1"), "{} / {:?}: time series rows must be ordered by time", q.file, q.panel);
        }
        out.push(Ran { query: q, columns, rows });
    }
    assert!(out.len() >= 17, "found only {} SQL queries", out.len());
    out
}

/// Every result has its panel's columns and types, at least one row, and every override of the
/// panel addresses a column (tables) or a series (long-format time series) that is there.
pub fn check_shapes(ran: &[Ran], data: &str) {
    for r in ran {
        let q = &r.query;
        let what = format!("{} / {:?}", q.file, q.panel);
        let names: Vec<&str> = r.columns.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, expected_columns(q), "{what}: columns");
        assert!(!r.rows.is_empty(), "{what}: {data} should give it at least one row");
        let type_of = |name: &str| r.columns.iter().find(|(n, _)| n == name).map(|(_, t)| t.as_str()).unwrap_or("");
        match (&q.language, q.panel_type.as_str()) {
            (Language::Sql { format }, _) if format == "time_series" => {
                assert_eq!(names[0], "time", "{what}: a time series starts with its time column");
                assert!(
                    NUMERIC.contains(&type_of("time")) || type_of("time") == "TIMESTAMPTZ",
                    "{what}: time is {}",
                    type_of("time")
                );
                assert!(TEXT.contains(&type_of("metric")), "{what}: metric is {}", type_of("metric"));
                assert!(NUMERIC.contains(&type_of("value")), "{what}: value is {}", type_of("value"));
                // Overrides of a long-format time series address series named by `metric`.
                let metrics: BTreeSet<String> = r.rows.iter().map(|row| text(row, "metric")).collect();
                for o in &q.override_names {
                    assert!(metrics.contains(o), "{what}: override {o:?} matches no series (have {metrics:?})");
                }
            }
            (Language::Sql { format }, panel_type) => {
                assert_eq!(format, "table", "{what}: format");
                if matches!(panel_type, "stat" | "bargauge") {
                    let numeric = names.iter().filter(|n| NUMERIC.contains(&type_of(n))).count();
                    assert!(numeric >= 1, "{what}: a {panel_type} needs a numeric column");
                    assert!(
                        names.iter().all(|n| NUMERIC.contains(&type_of(n)) || TEXT.contains(&type_of(n))),
                        "{what}: {:?}",
                        r.columns
                    );
                }
                for o in &q.override_names {
                    assert!(names.contains(&o.as_str()), "{what}: override {o:?} matches no column");
                }
            }
            (Language::PromQl, _) => unreachable!(),
        }
    }
}

pub fn find<'a>(ran: &'a [Ran], panel: &str) -> &'a Ran {
    ran.iter().find(|r| r.query.panel == panel).unwrap_or_else(|| panic!("no SQL panel {panel:?}"))
}

pub fn int(row: &PgRow, col: &str) -> i64 {
    row.try_get::<i64, _>(col).unwrap_or_else(|e| panic!("column {col}: {e}"))
}

pub fn text(row: &PgRow, col: &str) -> String {
    row.try_get::<String, _>(col).unwrap_or_else(|e| panic!("column {col}: {e}"))
}

/// The one row's `col` of a single-row panel.
pub fn single(ran: &[Ran], panel: &str, col: &str) -> i64 {
    let r = find(ran, panel);
    assert_eq!(r.rows.len(), 1, "{panel:?} returns one row");
    int(&r.rows[0], col)
}

/// `col` of every row of `panel`, in order.
pub fn column(ran: &[Ran], panel: &str, col: &str) -> Vec<String> {
    find(ran, panel).rows.iter().map(|row| text(row, col)).collect()
}
