//! The checks that need no database and no bus: every SQL panel has its expected columns
//! listed, every PromQL expression uses only contract series and labels (the allow-list of
//! `promql`) and parses under `promtool check rules` (promtool is required), the provisioning
//! YAML names the datasources the dashboards use, each through a `${DS_…}` input that resolves
//! to the provisioned uid, the dashboards are well-formed, and the docs cover the
//! metrics, the provisioning environment and every panel.
//!
//! Deliberately static: `live_bus` checks the same PromQL against a real `/metrics` scrape.

use std::collections::{BTreeMap, BTreeSet};
use std::process::Command;

use dashboards_check::dashboards::{self, Language, PG_TYPE, PROM_TYPE};
use dashboards_check::{dashboards_dir, promql, repo_root};
use serde_json::Value;

use crate::panels::{all_queries, expected_columns, EXPECTED_COLUMNS};

/// Every PromQL expression of every dashboard, Grafana variables substituted, with where it is.
pub fn promql_expressions() -> Vec<(String, String)> {
    let mut out = Vec::new();
    for d in &dashboards::load_all(&dashboards_dir()) {
        let vars = dashboards::variable_names(d);
        for q in dashboards::queries(d).into_iter().filter(|q| q.language == Language::PromQl) {
            let what = format!("{} / {:?} / {}", q.file, q.panel, q.ref_id);
            let expr = promql::substitute_grafana(&q.text, &vars).unwrap_or_else(|e| panic!("{what}: {e}"));
            out.push((what, expr));
        }
    }
    assert!(out.len() >= 30, "found only {} PromQL expressions", out.len());
    out
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
    let mut exprs = Vec::new();
    let mut seen = BTreeSet::new();
    for (what, expr) in promql_expressions() {
        let refs = promql::check(&expr).unwrap_or_else(|e| panic!("{what}: {e}\n{expr}"));
        seen.extend(refs.selectors.into_iter().map(|(name, _)| name));
        exprs.push(expr);
    }
    // Every contract series appears on some dashboard.
    for (base, kind, _) in promql::ALLOWED_SERIES {
        let used = seen.iter().any(|s| s == base || (*kind == promql::Kind::Histogram && s.starts_with(base)));
        assert!(used, "{base} is on no dashboard");
    }

    // promtool is required, never skipped: scripts/test installs it (Debian package prometheus).
    let found = Command::new("promtool").arg("--version").output();
    assert!(
        found.is_ok_and(|o| o.status.success()),
        "promtool is not installed: apt-get install prometheus (scripts/test does)"
    );
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

/// A provisioning file as JSON values, read by a YAML parser.
fn yaml(file: &str) -> Value {
    let path = dashboards_dir().join(file);
    serde_yaml_ng::from_str(&std::fs::read_to_string(&path).expect("read provisioning yaml"))
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn provisioned_datasources() -> BTreeMap<String, Value> {
    let doc = yaml("provisioning/datasources/signalbus.yaml");
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

    let doc = yaml("provisioning/dashboards/signalbus.yaml");
    assert_eq!(doc["apiVersion"], 1);
    let provider = &doc["providers"][0];
    assert_eq!(provider["type"], "file");
    assert!(provider["options"]["path"].as_str().is_some_and(|s| !s.is_empty()), "options.path");

    let mut used = BTreeSet::new();
    for d in dashboards::load_all(&dashboards_dir()) {
        let inputs = dashboards::datasource_inputs(&d).unwrap_or_else(|e| panic!("{e}"));
        assert!(!inputs.is_empty(), "{}: no datasource inputs (`__inputs`): UI import would not ask", d.file);
        for (ty, uid) in dashboards::datasource_refs(&d.json) {
            if uid == "-- Grafana --" {
                continue; // the built-in annotations source
            }
            // Every reference goes through an input, so importing through the UI can remap it.
            assert!(uid.starts_with("${DS_"), "{}: datasource uid {uid:?} is not a ${{DS_…}} input", d.file);
            let uid = dashboards::resolve_uid(&inputs, &ty, &uid).unwrap_or_else(|e| panic!("{}: {e}", d.file));
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
