//! What can be checked of `deploy/` without a container engine or systemd running: the compose
//! file parses and every signalbus service's command and `SIGNALBUS_*` variable is one the
//! built binary accepts (asked through its `--help`); the Prometheus config passes `promtool
//! check config` and scrapes every role; the Containerfile builds the tested binary with the
//! locked, release build and checks `/readyz`; the systemd units pass `systemd-analyze verify`
//! (when installed) and start real subcommands.
//!
//! Deliberately does not build the image or start the compose project: tests do not rely on a
//! container engine (docs/deploy.md says how to try it by hand).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_signalbus");

fn deploy() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy")
}

/// `signalbus <sub> --help`, which lists each flag and its `[env: SIGNALBUS_…]`, with every run
/// of whitespace one space (so a wrapped line reads the same).
fn help(sub: &str) -> String {
    let out = Command::new(BIN).args([sub, "--help"]).output().unwrap();
    assert!(out.status.success(), "`signalbus {sub}` is not a subcommand");
    String::from_utf8(out.stdout).unwrap().split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Panics unless `signalbus <args[0]>` reads every `--flag` in `args` (its own `--help` lists
/// it) and accepts every variable. Variables come from one environment shared by every role, and
/// each role accepts every server variable while its help lists only those it reads, so they are
/// checked against `serve`, which reads them all.
fn accepted(args: &[String], vars: &BTreeSet<String>, what: &str) {
    let sub = args.first().unwrap_or_else(|| panic!("{what}: no subcommand"));
    assert!(["serve", "gateway", "projector", "sweeper"].contains(&sub.as_str()), "{what}: {sub} is not a role");
    let text = help(sub);
    for flag in args.iter().filter(|a| a.starts_with("--")) {
        let flag = flag.split('=').next().unwrap();
        assert!(text.contains(&format!("{flag} ")), "{what}: `signalbus {sub}` has no {flag}");
    }
    let every = help("serve");
    for var in vars.iter().filter(|v| v.starts_with("SIGNALBUS_")) {
        assert!(every.contains(&format!("[env: {var}")), "{what}: no server role reads {var}");
    }
}

#[test]
fn compose_services_run_real_subcommands_and_flags() {
    let text = std::fs::read_to_string(deploy().join("compose.yaml")).unwrap();
    let mut doc: serde_yaml_ng::Value = serde_yaml_ng::from_str(&text).expect("compose.yaml is YAML");
    doc.apply_merge().unwrap();
    let services = doc["services"].as_mapping().expect("services");
    let names: BTreeSet<&str> = services.keys().filter_map(|k| k.as_str()).collect();
    for needed in ["nats", "postgres", "gateway", "projector", "sweeper", "prometheus", "grafana"] {
        assert!(names.contains(needed), "compose.yaml has no {needed} service");
    }
    let mut roles = BTreeSet::new();
    for (name, svc) in services {
        if svc["image"].as_str() != Some("signalbus:local") {
            continue;
        }
        let name = name.as_str().unwrap();
        let command: Vec<String> =
            svc["command"].as_sequence().expect("a command list").iter().map(|a| a.as_str().unwrap().into()).collect();
        let vars: BTreeSet<String> = svc["environment"]
            .as_mapping()
            .expect("an environment map")
            .keys()
            .map(|k| k.as_str().unwrap().to_string())
            .collect();
        for needed in ["SIGNALBUS_NATS_URL", "SIGNALBUS_DATABASE_URL", "SIGNALBUS_ADMIN_TOKEN"] {
            assert!(vars.contains(needed), "{name} lacks {needed}");
        }
        accepted(&command, &vars, name);
        roles.insert(command[0].clone());
        assert_eq!(svc["build"]["dockerfile"].as_str(), Some("deploy/container/Containerfile"), "{name}");
    }
    assert_eq!(roles, BTreeSet::from(["gateway".into(), "projector".into(), "sweeper".into()]));
    assert!(services["nats"]["command"].as_sequence().unwrap().iter().any(|a| a.as_str() == Some("--jetstream")));
    assert!(services["postgres"]["image"].as_str().unwrap().ends_with("postgres:15"));
    // Grafana mounts the provisioning of dashboards/ and each dashboard file that exists.
    for volume in services["grafana"]["volumes"].as_sequence().unwrap() {
        let host = volume.as_str().unwrap().split(':').next().unwrap();
        if host.starts_with('.') {
            assert!(deploy().join(host).exists(), "grafana mounts {host}, which does not exist");
        }
    }
}

#[test]
fn prometheus_config_passes_promtool_and_scrapes_every_role() {
    let path = deploy().join("prometheus/prometheus.yml");
    let found = Command::new("promtool").arg("--version").output();
    assert!(found.is_ok_and(|o| o.status.success()), "promtool is required: apt-get install prometheus");
    let out = Command::new("promtool").args(["check", "config"]).arg(&path).output().unwrap();
    assert!(out.status.success(), "promtool check config:\n{}", String::from_utf8_lossy(&out.stderr));
    let text = std::fs::read_to_string(&path).unwrap();
    for target in ["gateway:7400", "projector:7400", "sweeper:7400"] {
        assert!(text.contains(target), "prometheus.yml does not scrape {target}");
    }
}

#[test]
fn the_containerfile_builds_the_tested_binary() {
    let text = std::fs::read_to_string(deploy().join("container/Containerfile")).unwrap();
    assert!(text.contains("cargo build --release --locked --bin signalbus"), "not the locked release build");
    assert!(text.contains("target/release/signalbus"), "the image does not take the built binary");
    assert!(text.lines().any(|l| l.starts_with("USER ") && !l.contains("root") && !l.contains(" 0")), "runs as root");
    assert!(text.contains("EXPOSE 7400 9400"));
    assert!(text.contains("/readyz") && text.contains("HEALTHCHECK"));
    // The builder's toolchain is at least the workspace's rust-version.
    let manifest = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("Cargo.toml")).unwrap();
    let needed = manifest.lines().find_map(|l| l.strip_prefix("rust-version = ")).unwrap().trim_matches('"');
    let used = text.lines().find_map(|l| l.strip_prefix("FROM docker.io/library/rust:")).expect("a rust builder");
    let version = |v: &str| -> Vec<u32> { v.split(['.', '-']).map_while(|p| p.parse().ok()).collect() };
    assert!(version(used) >= version(needed), "builder rust:{used} is older than rust-version {needed}");
    // What the image's ENTRYPOINT and CMD run is a real subcommand.
    assert!(text.contains("ENTRYPOINT [\"/usr/local/bin/signalbus\"]") && text.contains("CMD [\"serve\"]"));
    help("serve");
    let ignore = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(".dockerignore")).unwrap();
    assert!(ignore.lines().any(|l| l.trim() == "target/"), "the build context would carry target/");
}

#[test]
fn systemd_units_verify_and_start_real_subcommands() {
    let dir = tempfile::tempdir().unwrap();
    let env = std::fs::read_to_string(deploy().join("systemd/signalbus.env")).unwrap();
    let vars: BTreeSet<String> = env
        .lines()
        .map(|l| l.trim_start_matches('#'))
        .filter_map(|l| l.split_once('=').map(|(k, _)| k.trim().to_string()))
        .filter(|k| k.starts_with("SIGNALBUS_"))
        .collect();
    assert!(vars.len() > 5, "{vars:?}");
    let mut units = Vec::new();
    for role in ["gateway", "projector", "sweeper"] {
        let name = format!("signalbus-{role}.service");
        let text = std::fs::read_to_string(deploy().join("systemd").join(&name)).unwrap();
        let exec = text.lines().find_map(|l| l.strip_prefix("ExecStart=")).expect("ExecStart");
        let args: Vec<String> = exec.split_whitespace().skip(1).map(String::from).collect();
        assert_eq!(args[0], role, "{name}");
        accepted(&args, &vars, &name);
        // systemd-analyze checks that ExecStart is executable: point it at the tested binary.
        let unit = dir.path().join(&name);
        std::fs::write(&unit, text.replace("/usr/local/bin/signalbus", BIN)).unwrap();
        units.push(unit);
    }
    match Command::new("systemd-analyze").arg("--version").output() {
        Ok(o) if o.status.success() => {
            let out = Command::new("systemd-analyze").args(["verify", "--man=no"]).args(&units).output().unwrap();
            let said = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
            assert!(out.status.success() && said.trim().is_empty(), "systemd-analyze verify:\n{said}");
        }
        _ => eprintln!("systemd-analyze is not installed: the units' syntax was not verified"),
    }
}
