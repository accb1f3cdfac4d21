//! Checks the Grafana dashboards and provisioning against reality: every PostgreSQL panel query
//! runs against a real database with the schema of `schema/postgres/*.sql` and representative
//! rows and returns the columns (and, for key panels, the numbers) its panel expects; every
//! PromQL expression references only contract series and labels (and passes `promtool check
//! rules` when promtool is installed); the provisioning YAML names the datasources the
//! dashboards use; the docs cover the metrics and the provisioning environment.
//!
//! Deliberately does not start Grafana or Prometheus, and does not yet fill the database through
//! the real bus (rows are inserted directly from `tests/fixtures/read_models.sql`).

use std::collections::{BTreeMap, BTreeSet};
use std::process::Command;

use dashboards_check::dashboards::{self, Language, Query, PG_TYPE, PROM_TYPE};
use dashboards_check::{dashboards_dir, promql, repo_root, sql_macros, yaml};
use serde_json::Value;
use sqlx::postgres::{PgPoolOptions, PgRow};
use sqlx::{Column, Executor, PgPool, Row, Statement, TypeInfo};

/// The columns, in order, each PostgreSQL query must return: (file, panel title, refId, columns).
/// A panel added to a dashboard without a row here fails the test.
const EXPECTED_COLUMNS: &[(&str, &str, &str, &[&str])] = &[
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
    ("signal-pipeline.json", "variable tenant", "var", &["tenant"]),
];

const NUMERIC: &[&str] = &["INT2", "INT4", "INT8", "NUMERIC", "FLOAT4", "FLOAT8"];
const TEXT: &[&str] = &["TEXT", "VARCHAR", "NAME", "BPCHAR"];

fn all_queries() -> Vec<Query> {
    dashboards::load_all(&dashboards_dir()).iter().flat_map(dashboards::queries).collect()
}

fn expected_columns(q: &Query) -> &'static [&'static str] {
    EXPECTED_COLUMNS
        .iter()
        .find(|(f, p, r, _)| *f == q.file && *p == q.panel && *r == q.ref_id)
        .map(|(_, _, _, cols)| *cols)
        .unwrap_or_else(|| panic!("{} / {:?} / {}: add its columns to EXPECTED_COLUMNS", q.file, q.panel, q.ref_id))
}

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

struct Ran {
    query: Query,
    columns: Vec<(String, String)>,
    rows: Vec<PgRow>,
}

async fn run_all(pool: &PgPool, tenant_sql: &str) -> Vec<Ran> {
    let (from, to) = time_range(pool).await;
    let ctx = sql_macros::Context {
        from,
        to,
        interval_seconds: 60,
        variables: vec![("tenant".into(), tenant_sql.into()), ("stale_after".into(), "60".into())],
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
    out
}

fn find<'a>(ran: &'a [Ran], panel: &str) -> &'a Ran {
    ran.iter().find(|r| r.query.panel == panel).unwrap_or_else(|| panic!("no SQL panel {panel:?}"))
}

fn int(row: &PgRow, col: &str) -> i64 {
    row.try_get::<i64, _>(col).unwrap_or_else(|e| panic!("column {col}: {e}"))
}

fn text(row: &PgRow, col: &str) -> String {
    row.try_get::<String, _>(col).unwrap_or_else(|e| panic!("column {col}: {e}"))
}

fn single(ran: &[Ran], panel: &str, col: &str) -> i64 {
    let r = find(ran, panel);
    assert_eq!(r.rows.len(), 1, "{panel:?} returns one row");
    int(&r.rows[0], col)
}

#[tokio::test]
async fn sql_panels_run_against_the_read_models_and_return_what_their_panels_expect() {
    let db = testkit::TestDb::create().await;
    let pool = database_with_schema(&db).await;
    let ran = run_all(&pool, "'default'").await;
    assert!(ran.len() >= 14, "found only {} SQL queries", ran.len());

    for r in &ran {
        let q = &r.query;
        let what = format!("{} / {:?}", q.file, q.panel);
        let names: Vec<&str> = r.columns.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, expected_columns(q), "{what}: columns");
        assert!(!r.rows.is_empty(), "{what}: the fixture should give it at least one row");
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

    // The tenant variable with several values (and "All") expands to a quoted list.
    let all = run_all(&pool, "'acme','default'").await;
    assert_eq!(single(&all, "pending_pickup (transient)", "pending_pickup"), 5);
    assert_eq!(single(&all, "available_now", "available_now"), 7);
    assert_eq!(single(&all, "daemon sessions", "stale"), 2);
    let tenants: BTreeSet<String> = find(&all, "variable tenant").rows.iter().map(|row| text(row, "tenant")).collect();
    assert_eq!(tenants, ["acme", "default"].map(String::from).into_iter().collect());
}

#[test]
fn every_sql_panel_has_expected_columns_and_every_row_of_the_table_a_panel() {
    let queries = all_queries();
    for q in queries.iter().filter(|q| matches!(q.language, Language::Sql { .. })) {
        expected_columns(q);
    }
    for (f, p, r, _) in EXPECTED_COLUMNS {
        assert!(
            queries.iter().any(|q| q.file == *f && q.panel == *p && q.ref_id == *r),
            "EXPECTED_COLUMNS names {f} / {p:?} / {r}, which no dashboard has"
        );
    }
}

#[test]
fn promql_references_only_contract_series_and_labels() {
    let dashboards = dashboards::load_all(&dashboards_dir());
    let mut exprs = Vec::new();
    let mut seen = BTreeSet::new();
    for d in &dashboards {
        let vars = dashboards::variable_names(d);
        for q in dashboards::queries(d).into_iter().filter(|q| q.language == Language::PromQl) {
            let what = format!("{} / {:?} / {}", q.file, q.panel, q.ref_id);
            let expr = promql::substitute_grafana(&q.text, &vars).unwrap_or_else(|e| panic!("{what}: {e}"));
            let refs = promql::check(&expr).unwrap_or_else(|e| panic!("{what}: {e}\n{expr}"));
            seen.extend(refs.selectors.into_iter().map(|(name, _)| name));
            exprs.push(expr);
        }
    }
    assert!(exprs.len() >= 30, "found only {} PromQL expressions", exprs.len());
    // Every contract series appears on some dashboard.
    for (base, kind, _) in promql::ALLOWED_SERIES {
        let used = seen.iter().any(|s| s == base || (*kind == promql::Kind::Histogram && s.starts_with(base)));
        assert!(used, "{base} is on no dashboard");
    }

    match Command::new("promtool").arg("--version").output() {
        Ok(out) if out.status.success() => {
            let dir = tempfile::tempdir().expect("temp dir");
            let file = dir.path().join("dashboards.rules.yml");
            std::fs::write(&file, promql::rules_file(&exprs)).expect("write rules file");
            let out = Command::new("promtool").arg("check").arg("rules").arg(&file).output().expect("run promtool");
            assert!(
                out.status.success(),
                "promtool check rules failed:\n{}\n{}\n{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr),
                std::fs::read_to_string(&file).unwrap_or_default()
            );
        }
        _ => {
            assert!(
                std::env::var_os("SIGNALBUS_REQUIRE_PROMTOOL").is_none(),
                "SIGNALBUS_REQUIRE_PROMTOOL is set but promtool is not installed (Debian: apt-get install prometheus)"
            );
            eprintln!("promtool not installed: PromQL checked by the built-in minimal reader only");
        }
    }
}

fn provisioned_datasources() -> BTreeMap<String, Value> {
    let path = dashboards_dir().join("provisioning/datasources/signalbus.yaml");
    let doc = yaml::parse(&std::fs::read_to_string(&path).expect("read datasources yaml"))
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    assert_eq!(doc["apiVersion"], 1);
    doc["datasources"]
        .as_array()
        .expect("a datasources list")
        .iter()
        .map(|ds| (ds["uid"].as_str().expect("every datasource has a uid").to_string(), ds.clone()))
        .collect()
}

#[test]
fn provisioning_parses_and_names_the_datasources_the_dashboards_use() {
    let sources = provisioned_datasources();
    let pg = &sources["signalbus-pg"];
    assert_eq!(pg["type"], PG_TYPE);
    assert!(pg["jsonData"]["database"].as_str().is_some_and(|s| !s.is_empty()), "jsonData.database");
    assert!(pg["url"].as_str().is_some_and(|s| !s.is_empty()), "url");
    assert!(pg["secureJsonData"]["password"].is_string(), "the password is a secure field");
    let prom = &sources["signalbus-prom"];
    assert_eq!(prom["type"], PROM_TYPE);
    assert!(prom["url"].as_str().is_some_and(|s| !s.is_empty()), "url");

    let path = dashboards_dir().join("provisioning/dashboards/signalbus.yaml");
    let doc = yaml::parse(&std::fs::read_to_string(&path).expect("read dashboards yaml"))
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    assert_eq!(doc["apiVersion"], 1);
    let provider = &doc["providers"][0];
    assert_eq!(provider["type"], "file");
    assert!(provider["options"]["path"].as_str().is_some_and(|s| !s.is_empty()), "options.path");

    let mut used = BTreeSet::new();
    for d in dashboards::load_all(&dashboards_dir()) {
        for (ty, uid) in dashboards::datasource_refs(&d.json) {
            if uid == "-- Grafana --" {
                continue; // the built-in annotations source
            }
            let ds =
                sources.get(&uid).unwrap_or_else(|| panic!("{}: datasource uid {uid:?} is not provisioned", d.file));
            assert_eq!(ds["type"].as_str(), Some(ty.as_str()), "{}: datasource {uid} has type {ty:?}", d.file);
            used.insert(uid);
        }
    }
    assert_eq!(used, sources.keys().cloned().collect(), "every provisioned datasource is used");
}

#[test]
fn dashboards_are_well_formed() {
    let all = dashboards::load_all(&dashboards_dir());
    let names: Vec<&str> = all.iter().map(|d| d.file.as_str()).collect();
    assert_eq!(names, ["bus-health.json", "signal-pipeline.json"]);
    let mut uids = BTreeSet::new();
    for d in &all {
        let uid = d.json["uid"].as_str().expect("uid");
        assert!(uids.insert(uid.to_string()), "duplicate dashboard uid {uid}");
        assert!(d.json["title"].as_str().is_some_and(|t| !t.is_empty()));
        let mut ids = BTreeSet::new();
        for p in dashboards::panels(&d.json) {
            let title = p["title"].as_str().unwrap_or("");
            assert!(ids.insert(p["id"].as_i64().expect("panel id")), "{}: duplicate panel id in {title:?}", d.file);
            let g = &p["gridPos"];
            let (x, w) = (g["x"].as_i64().expect("x"), g["w"].as_i64().expect("w"));
            assert!(x >= 0 && w > 0 && x + w <= 24, "{}: {title:?} is outside the 24-column grid", d.file);
            if p["type"] != "row" {
                assert!(
                    p["description"].as_str().is_some_and(|s| !s.is_empty()),
                    "{}: {title:?} needs a description",
                    d.file
                );
                assert!(p["targets"].as_array().is_some_and(|t| !t.is_empty()), "{}: {title:?} has no query", d.file);
            }
        }
    }
}

#[test]
fn docs_cover_every_series_and_the_provisioning_environment() {
    let metrics = std::fs::read_to_string(repo_root().join("docs/metrics.md")).expect("docs/metrics.md");
    for (base, _, labels) in promql::ALLOWED_SERIES {
        assert!(metrics.contains(&format!("`{base}`")), "docs/metrics.md does not document {base}");
        for l in *labels {
            assert!(metrics.contains(&format!("`{l}`")), "docs/metrics.md does not document label {l} of {base}");
        }
    }
    let ops = std::fs::read_to_string(repo_root().join("docs/operations.md")).expect("docs/operations.md");
    for file in ["provisioning/datasources/signalbus.yaml", "provisioning/dashboards/signalbus.yaml"] {
        let text = std::fs::read_to_string(dashboards_dir().join(file)).expect("provisioning file");
        let config: String = text.lines().filter(|l| !l.trim_start().starts_with('#')).collect::<Vec<_>>().join("\n");
        for var in config.split("${").skip(1).filter_map(|s| s.split_once('}')).map(|(v, _)| v) {
            assert!(ops.contains(var), "docs/operations.md does not explain {var} (used in {file})");
        }
    }
    for d in dashboards::load_all(&dashboards_dir()) {
        for p in dashboards::panels(&d.json).into_iter().filter(|p| p["type"] != "row") {
            let title = p["title"].as_str().unwrap_or("");
            assert!(ops.contains(title), "docs/operations.md does not describe panel {title:?} of {}", d.file);
        }
    }
}
