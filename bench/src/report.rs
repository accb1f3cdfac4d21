//! What every scenario prints: one JSON line (starting with `{`) carrying the results and the
//! machine they ran on, then a few human-readable lines. Also the small measurement helpers the
//! scenarios share (latency summaries from hdrhistogram, RSS, CPU time and load average from
//! `/proc`).
//!
//! Deliberately no pass/fail judgement: targets are compared in `docs/performance.md` and by
//! whoever reads the numbers, because a shared 2-core machine makes any threshold flaky.

use std::time::Duration;

use hdrhistogram::Histogram;
use serde_json::{json, Value};

/// A microsecond histogram from 1 µs to 60 s, 3 significant digits.
pub fn latency_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 60_000_000, 3).expect("valid histogram bounds")
}

/// p50/p99/p999/max in milliseconds, with the sample count.
pub fn latency_json(h: &Histogram<u64>) -> Value {
    let ms = |us: u64| (us as f64 / 1000.0 * 1000.0).round() / 1000.0;
    json!({
        "count": h.len(),
        "p50_ms": ms(h.value_at_quantile(0.50)),
        "p99_ms": ms(h.value_at_quantile(0.99)),
        "p999_ms": ms(h.value_at_quantile(0.999)),
        "max_ms": ms(h.max()),
        "mean_ms": (h.mean() / 1000.0 * 1000.0).round() / 1000.0,
    })
}

/// `VmRSS` of a process in KiB (`None` if `/proc` does not say).
pub fn rss_kib(pid: Option<u32>) -> Option<u64> {
    let path = match pid {
        Some(p) => format!("/proc/{p}/status"),
        None => "/proc/self/status".to_string(),
    };
    let status = std::fs::read_to_string(path).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// Kernel clock ticks per second of `/proc/<pid>/stat`'s utime and stime (USER_HZ, 100 on Linux).
pub const TICKS_PER_S: f64 = 100.0;

/// CPU time a process has used so far (utime + stime), in clock ticks (`TICKS_PER_S`).
pub fn cpu_ticks(pid: Option<u32>) -> Option<u64> {
    let path = pid.map_or_else(|| "/proc/self/stat".to_string(), |p| format!("/proc/{p}/stat"));
    let stat = std::fs::read_to_string(path).ok()?;
    // Fields after the command's closing parenthesis start at field 3; utime is 14, stime 15.
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    Some(fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?)
}

/// The 1-minute load average: other builds share this machine, so every result records it.
pub fn loadavg() -> f64 {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|s| s.split_whitespace().next().and_then(|v| v.parse().ok()))
        .unwrap_or(f64::NAN)
}

fn cpu_model() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| s.lines().find(|l| l.starts_with("model name")).map(|l| l.to_string()))
        .and_then(|l| l.split_once(':').map(|(_, v)| v.trim().to_string()))
        .unwrap_or_else(|| "unknown".into())
}

/// The machine a result was measured on.
pub fn machine(load_before: f64) -> Value {
    json!({
        "nproc": std::thread::available_parallelism().map(|n| n.get()).unwrap_or(0),
        "cpu": cpu_model(),
        "loadavg_1m_before": load_before,
        "loadavg_1m_after": loadavg(),
        "profile": if cfg!(debug_assertions) { "debug" } else { "release" },
    })
}

/// Rounds for display in JSON (keeps the line short and readable).
pub fn round(v: f64, digits: i32) -> f64 {
    let f = 10f64.powi(digits);
    (v * f).round() / f
}

pub fn per_sec(n: u64, d: Duration) -> f64 {
    round(n as f64 / d.as_secs_f64().max(1e-9), 1)
}

/// A scenario's outcome: the JSON results plus the human summary lines.
#[derive(Debug, Default)]
pub struct Outcome {
    pub results: Value,
    pub summary: Vec<String>,
}

/// Prints the JSON line and the summary.
pub fn print(scenario: &str, params: Value, machine: Value, outcome: &Outcome) {
    let line = json!({ "scenario": scenario, "params": params, "results": outcome.results, "machine": machine });
    println!("{line}");
    for l in &outcome.summary {
        println!("  {l}");
    }
}
