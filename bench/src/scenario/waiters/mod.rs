//! `waiters`: what long-poll waiters cost the bus (CONTRACT §16: waiting without polling).
//! `--waiters` identities are registered (one waiter each, so "the waiters of an identity" is
//! one connection); a child process (this binary, `_wait`, `hold.rs`) holds one
//! `GET /v1/inbox?wait=60&drain=true` per identity, so the clients' memory is not billed to the
//! bus. Measured on the bus process (this one, or `--bus-pid`): RSS, threads and CPU time
//! (utime + stime) per second over `IDLE_WINDOW`, idle before the waiters and again with all of
//! them parked; then `--wakes` signals, one at a time, each to a different waiting identity:
//! the time from the send to that long-poll's answer (the child reads the payload's send stamp
//! by the shared wall clock), and whether exactly that waiter answered and no other did.
//!
//! Deliberately no sessions named by the waiters (no `X-Signalbus-Session`): with one, each
//! waiter would also heartbeat its session every heartbeat interval, which is presence, not
//! waiting. No thresholds: idle CPU "≈ 0" is read off the output.

mod hold;

pub use hold::hold;

use std::process::Stdio;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use hdrhistogram::Histogram;
use serde_json::json;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::sync::mpsc;

use crate::args::Args;
use crate::bed::Target;
use crate::client;
use crate::report::{cpu_ticks, latency_histogram, latency_json, round, rss_kib, Outcome, TICKS_PER_S};
use crate::scenario::traffic::mode_name;

/// Each CPU sample's window: idle before the waiters, and with them all parked.
const IDLE_WINDOW: Duration = Duration::from_secs(10);
/// How long a wake may take before it counts as missed.
const WAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// One answer the child saw (`hold.rs`'s `answer` line).
#[derive(Debug, Clone, Copy)]
struct Answer {
    waiter: usize,
    status: u16,
    signals: usize,
    latency_us: i64,
    held_ms: u64,
}

pub async fn run(args: &Args) -> anyhow::Result<Outcome> {
    let target = match &args.url {
        Some(url) => {
            if args.bus_pid.is_none() {
                bail!("with --url, waiters needs --bus-pid to read the bus's RSS and CPU");
            }
            Target::external(url, args.admin_token.as_deref().unwrap_or_default(), None)
        }
        None => Target::start(args.embedded, args.nats).await?,
    };
    let pid = args.bus_pid;
    let n = args.waiters.max(1);
    let http = reqwest::Client::new();
    let prefix = client::run_prefix();
    let names: Vec<String> = (0..n).map(|i| format!("{prefix}-w{i}")).collect();
    let t = Instant::now();
    let tokens = client::register_all(&http, &target, &names).await?;
    let registered = t.elapsed();
    let sender = client::register_all(&http, &target, &[format!("{prefix}-sender")]).await?.remove(0);
    eprintln!("bench: {n} identities registered in {:.1} s", registered.as_secs_f64());
    // One wait answered by a send, here, so the paths' one-time allocations are not billed.
    let warm = http.get(format!("{}/v1/inbox?wait=10&drain=true", target.base)).bearer_auth(&tokens[0]).send();
    let warm = tokio::spawn(warm);
    tokio::time::sleep(Duration::from_millis(300)).await;
    send(&http, &target, &sender, &names[0], 0).await?;
    warm.await?.context("warm-up wait")?.error_for_status()?;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let idle = sample_window(pid).await?;

    let tokens_file = tempfile::NamedTempFile::new()?;
    std::fs::write(tokens_file.path(), tokens.join("\n"))?;
    let mut child = tokio::process::Command::new(std::env::current_exe()?)
        .args(["_wait", "--url", &target.base, "--tokens-file"])
        .arg(tokens_file.path())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .context("spawn the waiter holder")?;
    let mut lines = BufReader::new(child.stdout.take().context("child stdout")?).lines();
    let ready = tokio::time::timeout(Duration::from_secs(600), lines.next_line())
        .await
        .context("waiters not open within 10 minutes")??
        .context("the waiter holder exited")?;
    let open_secs: f64 = ready.split_whitespace().nth(2).and_then(|s| s.parse().ok()).unwrap_or(f64::NAN);
    let (tx, mut answers) = mpsc::unbounded_channel::<Answer>();
    let errors = tokio::spawn(async move {
        let mut errors = Vec::new();
        while let Ok(Some(line)) = lines.next_line().await {
            match parse_answer(&line) {
                Some(a) => {
                    let _ = tx.send(a);
                }
                None => errors.push(line),
            }
        }
        errors
    });
    // Every request is written; the bus parks each after one look. Wait until it is quiet.
    let settled_after = quiet(pid).await?;
    let parked = sample_window(pid).await?;

    let mut wake = latency_histogram();
    let (mut missed, mut others) = (0u64, Vec::new());
    let targets: Vec<usize> = (0..args.wakes).map(|w| 1 + w * (n - 1) / args.wakes.max(1)).filter(|&j| j < n).collect();
    for (w, &j) in targets.iter().enumerate() {
        send(&http, &target, &sender, &names[j], w + 1).await?;
        let deadline = tokio::time::Instant::now() + WAKE_TIMEOUT;
        loop {
            match tokio::time::timeout_at(deadline, answers.recv()).await {
                Ok(Some(a)) if a.waiter == j && a.signals > 0 => {
                    wake.saturating_record(a.latency_us.max(1) as u64);
                    break;
                }
                Ok(Some(a)) => others.push(a),
                Ok(None) | Err(_) => {
                    missed += 1;
                    break;
                }
            }
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    // Anything else that answers soon after is counted too.
    tokio::time::sleep(Duration::from_secs(1)).await;
    while let Ok(a) = answers.try_recv() {
        others.push(a);
    }
    drop(child.stdin.take());
    let _ = tokio::time::timeout(Duration::from_secs(30), child.wait()).await;
    let errors = errors.await.unwrap_or_default();
    // What the bus keeps once every waiter is gone: the allocator's retained pages, not waiters.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let after = sample(pid)?;
    target.shutdown().await;

    Ok(outcome(
        args,
        n,
        registered,
        open_secs,
        settled_after,
        &idle,
        &parked,
        after,
        &targets,
        &wake,
        missed,
        &others,
        &errors,
    ))
}

#[allow(clippy::too_many_arguments)]
fn outcome(
    args: &Args,
    n: usize,
    registered: Duration,
    open_secs: f64,
    settled_after: Duration,
    idle: &Window,
    parked: &Window,
    after: Sample,
    targets: &[usize],
    wake: &Histogram<u64>,
    missed: u64,
    others: &[Answer],
    errors: &[String],
) -> Outcome {
    // An empty answer after (almost) the whole wait is the contract's; one before it is not.
    let full_wait_ms = (hold::WAIT_SECONDS * 1000).saturating_sub(1000);
    let wrong = others.iter().filter(|a| a.signals > 0).count();
    let expired = others.iter().filter(|a| a.signals == 0 && a.held_ms >= full_wait_ms && a.status == 200).count();
    let premature = others.len() - wrong - expired;
    let per_waiter = round((parked.start.rss_kib as f64 - idle.start.rss_kib as f64) / n as f64, 2);
    let results = json!({
        "mode": mode_name(args, args.embedded),
        "waiters": n,
        "identities": n,
        "registered_seconds": round(registered.as_secs_f64(), 2),
        "open_seconds": round(open_secs, 2),
        "settled_after_seconds": round(settled_after.as_secs_f64(), 2),
        "idle": idle.json(),
        "parked": parked.json(),
        "rss_per_waiter_kib": per_waiter,
        "rss_after_hangup_kib": after.rss_kib,
        "wakes": targets.len(),
        "wake_latency": latency_json(wake),
        "wakes_missed": missed,
        "other_waiters_answered_with_signals": wrong,
        "premature_empty_answers": premature,
        "full_wait_empty_answers": expired,
        "child_errors": errors.len(),
        "first_child_error": errors.first(),
    });
    let w = &results["wake_latency"];
    let summary = vec![
        format!(
            "{n} waiters (one per identity) opened in {open_secs:.1} s; bus quiet {:.1} s after",
            settled_after.as_secs_f64()
        ),
        format!(
            "bus RSS {} → {} KiB = {per_waiter} KiB per parked waiter ({} KiB once they hung up); threads {} → {}; CPU {} → {} ms/s over {} s (idle → {n} parked; target ≈ 0)",
            idle.start.rss_kib,
            parked.start.rss_kib,
            after.rss_kib,
            idle.start.threads,
            parked.start.threads,
            results["idle"]["cpu_ms_per_s"],
            results["parked"]["cpu_ms_per_s"],
            IDLE_WINDOW.as_secs()
        ),
        format!(
            "{} wakes, one identity each: send → its long-poll's answer p50 {} ms, p99 {} ms, max {} ms; missed {missed}; other waiters answered with a signal {wrong} (must be 0), empty before the wait was over {premature} (must be 0); child errors {}",
            targets.len(),
            w["p50_ms"],
            w["p99_ms"],
            w["max_ms"],
            errors.len()
        ),
    ];
    Outcome { results, summary }
}

/// Sends one async signal to `to` whose payload carries the send time (unix µs) as `t`.
async fn send(http: &reqwest::Client, target: &Target, token: &str, to: &str, w: usize) -> anyhow::Result<()> {
    let t = chrono::Utc::now().timestamp_micros();
    let body = json!({"to": to, "type": "StatusUpdate", "payload": {"t": t, "wake": w}});
    let resp = http.post(format!("{}/v1/signals", target.base)).bearer_auth(token).json(&body).send().await?;
    if !resp.status().is_success() {
        bail!("send: {} {}", resp.status(), resp.text().await.unwrap_or_default());
    }
    Ok(())
}

fn parse_answer(line: &str) -> Option<Answer> {
    let mut f = line.strip_prefix("answer ")?.split_whitespace();
    Some(Answer {
        waiter: f.next()?.parse().ok()?,
        status: f.next()?.parse().ok()?,
        signals: f.next()?.parse().ok()?,
        latency_us: f.next()?.parse().ok()?,
        held_ms: f.next()?.parse().ok()?,
    })
}

/// The bus process now: RSS, threads, CPU ticks (utime + stime).
#[derive(Debug, Clone, Copy)]
struct Sample {
    at: Instant,
    rss_kib: u64,
    threads: u64,
    cpu_ticks: u64,
}

fn sample(pid: Option<u32>) -> anyhow::Result<Sample> {
    let dir = pid.map_or_else(|| "/proc/self".to_string(), |p| format!("/proc/{p}"));
    let status = std::fs::read_to_string(format!("{dir}/status"))?;
    let threads = status
        .lines()
        .find_map(|l| l.strip_prefix("Threads:"))
        .and_then(|v| v.trim().parse().ok())
        .context("Threads in /proc status")?;
    Ok(Sample {
        at: Instant::now(),
        rss_kib: rss_kib(pid).context("VmRSS")?,
        threads,
        cpu_ticks: cpu_ticks(pid).context("utime/stime in /proc stat")?,
    })
}

/// Two samples `IDLE_WINDOW` apart.
struct Window {
    start: Sample,
    end: Sample,
}

impl Window {
    fn cpu_ms_per_s(&self) -> f64 {
        let ms = (self.end.cpu_ticks - self.start.cpu_ticks) as f64 * 1000.0 / TICKS_PER_S;
        round(ms / (self.end.at - self.start.at).as_secs_f64(), 2)
    }

    fn json(&self) -> serde_json::Value {
        json!({"rss_kib": self.start.rss_kib, "threads": self.start.threads, "cpu_ms_per_s": self.cpu_ms_per_s(),
               "cpu_ticks": self.end.cpu_ticks - self.start.cpu_ticks, "window_s": IDLE_WINDOW.as_secs()})
    }
}

async fn sample_window(pid: Option<u32>) -> anyhow::Result<Window> {
    let start = sample(pid)?;
    tokio::time::sleep(IDLE_WINDOW).await;
    Ok(Window { start, end: sample(pid)? })
}

/// Waits until the bus spends under 50 ms of CPU in a second (at most 60 s), then 2 s more.
async fn quiet(pid: Option<u32>) -> anyhow::Result<Duration> {
    let started = Instant::now();
    let mut last = sample(pid)?;
    while started.elapsed() < Duration::from_secs(60) {
        tokio::time::sleep(Duration::from_secs(1)).await;
        let now = sample(pid)?;
        let busy = now.cpu_ticks - last.cpu_ticks;
        last = now;
        if busy * 1000 / (TICKS_PER_S as u64) < 50 {
            break;
        }
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    Ok(started.elapsed())
}
