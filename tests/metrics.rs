//! `/metrics` as Prometheus scrapes it from the real binary: before any traffic every series
//! whose labels are known up front is there at 0, every family has `# HELP`, the document passes
//! `promtool check metrics`, `signalbus_build_info` names the version and the `process_*`
//! series are there; a standby sweeper (one of two sweeper processes sharing the lease) serves
//! its series too.
//!
//! Deliberately black-box: the binary, its flags and HTTP. promtool is required, not optional
//! (`apt-get install prometheus`; scripts/test installs it).

use std::collections::BTreeSet;
use std::io::Write;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

mod roles;

use roles::{spawn, Proc};

/// The first scrape that answers (the process serves `/metrics` as soon as it listens).
async fn scrape(p: &mut Proc) -> String {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Ok(Some(status)) = p.child.try_wait() {
            panic!("{} exited early: {status}", p.base);
        }
        if let Ok(r) = reqwest::get(format!("{}/metrics", p.base)).await {
            if r.status().is_success() {
                return r.text().await.unwrap();
            }
        }
        assert!(Instant::now() < deadline, "{} never served /metrics", p.base);
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// `promtool check metrics` on a scrape: no complaint at all.
fn promtool_clean(scrape: &str) {
    let found = Command::new("promtool").arg("--version").output();
    assert!(found.is_ok_and(|o| o.status.success()), "promtool is required: apt-get install prometheus");
    let mut child = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(scrape.as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    let said = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success() && said.trim().is_empty(), "promtool check metrics:\n{said}");
}

/// Every family with a `# TYPE` has a `# HELP`.
fn every_family_has_help(scrape: &str) {
    let names = |prefix: &str| -> BTreeSet<String> {
        scrape
            .lines()
            .filter_map(|l| l.strip_prefix(prefix))
            .filter_map(|l| l.split_whitespace().next())
            .map(String::from)
            .collect()
    };
    let typed = names("# TYPE ");
    assert!(!typed.is_empty(), "{scrape}");
    let helped = names("# HELP ");
    let missing: Vec<_> = typed.difference(&helped).collect();
    assert!(missing.is_empty(), "families without # HELP: {missing:?}");
}

/// The value of the sample line that is exactly `series` (name and labels as rendered).
fn value(scrape: &str, series: &str) -> Option<f64> {
    scrape.lines().find_map(|l| l.strip_prefix(series).and_then(|rest| rest.trim().parse().ok()))
}

/// Whether a sample of `name` carries every `label="value"` in `labels`, with value 0.
fn zero_with(scrape: &str, name: &str, labels: &[&str]) -> bool {
    scrape
        .lines()
        .any(|l| l.starts_with(&format!("{name}{{")) && labels.iter().all(|kv| l.contains(kv)) && l.ends_with(" 0"))
}

#[tokio::test]
async fn a_fresh_bus_serves_every_known_series_at_zero_with_help() {
    let dir = tempfile::tempdir().unwrap();
    let mut p = spawn("serve", &[], dir.path());
    let text = scrape(&mut p).await;
    promtool_clean(&text);
    every_family_has_help(&text);
    let version = format!("signalbus_build_info{{version=\"{}\"}}", env!("CARGO_PKG_VERSION"));
    assert_eq!(value(&text, &version), Some(1.0), "{text}");
    // The rare events dashboards take a rate of are there before they ever happen.
    let expected: &[(&str, &[&str])] = &[
        ("signalbus_signal_recalls_total", &[r#"outcome="already_delivered""#]),
        ("signalbus_signal_recalls_total", &[r#"outcome="not_found""#]),
        ("signalbus_signals_delivered_total", &[r#"signal_type="Blocker""#, r#"via="piggyback""#]),
        ("signalbus_signals_delivered_total", &[r#"signal_type="other""#, r#"via="inbox""#]),
        ("signalbus_time_to_delivery_seconds_count", &[r#"signal_type="Question""#, r#"via="ws_push""#]),
        ("signalbus_disconnects_total", &[r#"reason="slow_consumer""#]),
        ("signalbus_disconnects_total", &[r#"reason="agent_removed""#]),
        ("signalbus_signals_bounced_total", &[r#"signal_type="Question""#, r#"recipient_state="not_available_stale""#]),
        (
            "signalbus_signals_sent_total",
            &[
                r#"signal_type="TaskAssigned""#,
                r#"delivery_class="async""#,
                r#"recipient_state="not_available_offline""#,
                r#"publish_path="queued_offline""#,
            ],
        ),
        (
            "signalbus_signals_sent_total",
            &[r#"delivery_class="sync""#, r#"recipient_state="available""#, r#"publish_path="buffered_for_piggyback""#],
        ),
        ("signalbus_signals_expired_total", &[r#"signal_type="PeerLeft""#, r#"reason="ttl""#]),
        ("signalbus_signals_expired_total", &[r#"signal_type="Question""#, r#"reason="forced""#]),
        ("signalbus_signals_expired_total", &[r#"signal_type="other""#, r#"reason="removed""#]),
        (
            "signalbus_signals_sent_total",
            &[r#"delivery_class="async""#, r#"recipient_state="available""#, r#"publish_path="scheduled""#],
        ),
        ("signalbus_signals_scheduled_total", &[r#"signal_type="ReviewRequested""#]),
        ("signalbus_sessions", &[r#"kind="daemon""#, r#"surface="piggyback""#]),
        ("signalbus_projector_dead_letters_total", &[r#"projection="read_models""#]),
        ("signalbus_connection_timeouts_total", &[r#"kind="idle""#]),
        ("signalbus_backpressure_wait_seconds_count", &[r#"gate="paced""#]),
        ("signalbus_backpressure_wait_seconds_count", &[r#"gate="held""#]),
    ];
    for (name, labels) in expected {
        assert!(zero_with(&text, name, labels), "no {name} {labels:?} at 0:\n{text}");
    }
    assert_eq!(value(&text, "signalbus_backpressure_pacing_share"), Some(1.0), "at rest: the whole bound\n{text}");
    assert!(value(&text, "signalbus_sweeper_runs_total").is_some(), "{text}");
    assert_eq!(value(&text, "signalbus_sweeper_release_lag_seconds_count"), Some(0.0), "{text}");
    assert!(text.contains("signalbus_event_append_seconds_bucket"), "{text}");
    process_series(&text);
}

/// The standard process series, with values a live process has.
fn process_series(scrape: &str) {
    for name in ["process_cpu_seconds_total", "process_resident_memory_bytes", "process_open_fds"] {
        assert!(value(scrape, name).is_some(), "no {name}:\n{scrape}");
    }
    assert!(value(scrape, "process_resident_memory_bytes").unwrap() > 0.0, "{scrape}");
    assert!(value(scrape, "process_open_fds").unwrap() >= 3.0, "{scrape}");
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs_f64();
    let started = value(scrape, "process_start_time_seconds").expect("process_start_time_seconds");
    assert!(started > now - 3600.0 && started <= now + 1.0, "start time {started}, now {now}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_standby_sweeper_serves_its_metrics() {
    let nats = testkit::NatsServer::start().await;
    let db = testkit::TestDb::create().await;
    let dir = tempfile::tempdir().unwrap();
    let services = ["--nats-url", &nats.url(), "--database-url", db.url()];
    let mut a = spawn("sweeper", &services, dir.path());
    let mut b = spawn("sweeper", &services, dir.path());
    // Both serve at once; which one leads is the lease's choice, so wait until one does.
    let deadline = Instant::now() + Duration::from_secs(30);
    let (one, two) = loop {
        let (one, two) = (scrape(&mut a).await, scrape(&mut b).await);
        let leaders = [&one, &two].iter().filter(|t| value(t, "signalbus_sweeper_leader") == Some(1.0)).count();
        if leaders == 1 {
            break (one, two);
        }
        assert!(Instant::now() < deadline, "no single leader:\n{one}\n{two}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let standby = if value(&one, "signalbus_sweeper_leader") == Some(0.0) { one } else { two };
    promtool_clean(&standby);
    every_family_has_help(&standby);
    assert_eq!(value(&standby, "signalbus_sweeper_leader"), Some(0.0), "{standby}");
    assert_eq!(value(&standby, "signalbus_sweeper_runs_total"), Some(0.0), "{standby}");
    assert!(zero_with(&standby, "signalbus_signals_expired_total", &[r#"signal_type="Blocker""#]), "{standby}");
    assert!(!standby.contains("signalbus_signals_sent_total"), "a sweeper records no gateway series:\n{standby}");
    process_series(&standby);
}
