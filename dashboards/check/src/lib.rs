//! Reads the Grafana dashboards and provisioning files in `dashboards/` and turns them into
//! things a test can check: every query with its panel, SQL with Grafana's macros expanded,
//! PromQL checked against the metric contract and against a real `/metrics` scrape, and each
//! dashboard's datasource inputs (`${DS_…}`) resolved to the uids provisioning gives. The
//! provisioning YAML is read with `serde_yaml_ng` (the tests do).
//!
//! Deliberately does not talk to PostgreSQL, Prometheus, Grafana or a bus itself: the tests in
//! `tests/` do (they start a real bus), so this library stays pure and fast to unit-test.

pub mod dashboards;
pub mod exposition;
pub mod promql;
pub mod scraped;
pub mod sql_macros;

use std::path::PathBuf;

/// The repository's `dashboards/` directory (this crate lives in `dashboards/check`).
pub fn dashboards_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).parent().expect("dashboards/check has a parent").to_path_buf()
}

/// The repository root.
pub fn repo_root() -> PathBuf {
    dashboards_dir().parent().expect("dashboards/ has a parent").to_path_buf()
}
