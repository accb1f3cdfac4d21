//! `schedule`: scheduled delivery on time (CONTRACT §16). `--recipients` sessions are connected
//! (so `available`); `--senders` sessions send `--count` async signals (`--window` outstanding
//! each, as in `throughput`), each with a `deliver_at` (RFC 3339, milliseconds) spread
//! uniformly over one minute that starts `--lead` after the first send; its payload carries the
//! same instant in ms. Recipients record receive − `deliver_at` for every push, and ack.
//! Reported: send rate, delivered, release lateness p50/p99/p999/max, pushes before their
//! `deliver_at` (early: must be 0), duplicates (must be 0), the sweeper's own
//! `signalbus_sweeper_release_lag_seconds` (`crate::kept`, installed in this process), and from the
//! stream how many signals were released more than once (must be 0). Then, with
//! `--restart-count` > 0, the restart phase (`restart.rs`).
//!
//! Deliberately in-process only (the restart and the metrics need the bus here) and wall-clock
//! based: `deliver_at` is a wall-clock instant, and the bus and the recipients read the same
//! clock. The run waits for every accepted signal until the window's end + 60 s, no longer.

mod flow;
mod restart;

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use bus::event::EventBody;
use chrono::{SubsecRound, Utc};
use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;

use crate::args::Args;
use crate::bed::Target;
use crate::client;
use crate::kept;
use crate::report::{cpu_ticks, latency_json, per_sec, round, Outcome, TICKS_PER_S};
use crate::scenario::traffic::mode_name;
use flow::{lateness_histogram, Plan, Tally};

/// The deliver window of the first phase: one minute.
const WINDOW: Duration = Duration::from_secs(60);
/// How long after the window's end the run still waits for deliveries.
const GRACE: Duration = Duration::from_secs(60);

pub async fn run(args: &Args) -> anyhow::Result<Outcome> {
    if args.url.is_some() {
        bail!("schedule starts its own bus (it restarts it and reads its metrics); --url is not supported");
    }
    let metrics = kept::kept().map(|k| k.release_lag.clone());
    let mut target = Target::start(args.embedded, args.nats).await?;
    let http = reqwest::Client::new();
    let prefix = client::run_prefix();
    let recipients: Vec<String> = (0..args.recipients).map(|i| format!("{prefix}-r{i}")).collect();
    let senders: Vec<String> = (0..args.senders).map(|i| format!("{prefix}-s{i}")).collect();
    let r_tokens = client::register_all(&http, &target, &recipients).await?;
    let s_tokens = client::register_all(&http, &target, &senders).await?;
    let recipients = Arc::new(recipients);
    let n = args.count.max(1);
    let tally = Arc::new(Tally::new(n + args.restart_count));

    let stop = CancellationToken::new();
    let receivers = connect_recipients(&target, &r_tokens, &tally, &stop, Duration::ZERO).await?;
    tokio::time::sleep(Duration::from_millis(500)).await;

    let lead = args.lead.unwrap_or(Duration::from_secs(15) + Duration::from_millis(n as u64));
    let plan = Plan {
        first: 0,
        count: n,
        start: (Utc::now() + chrono::Duration::from_std(lead)?).trunc_subsecs(3),
        window: WINDOW,
        payload_bytes: args.payload_bytes,
    };
    eprintln!("bench: sending {n} signals due over the minute from {}", plan.start.format("%H:%M:%S%.3f"));
    let sent = send_all(&target, &s_tokens, args, plan, &recipients, &tally).await?;
    let overran = Utc::now() > plan.start;
    let accepted = tally.accepted.load(Ordering::Relaxed);
    eprintln!("bench: {accepted} accepted in {:.1} s; waiting for the window and its deliveries", sent.as_secs_f64());

    // The bus's CPU from the window's start to the last delivery (or the deadline).
    tokio::time::sleep((plan.start - Utc::now()).to_std().unwrap_or_default()).await;
    let (cpu_from, cpu_at) = (cpu_ticks(None), Instant::now());
    let deadline = plan.end() + chrono::Duration::from_std(GRACE)?;
    while tally.received_in(plan.range()) < accepted && Utc::now() < deadline {
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let all_in_after_end = round((Utc::now() - plan.end()).num_milliseconds() as f64 / 1000.0, 2);
    let delivered = tally.received_in(plan.range());
    let cores = cpu_from
        .zip(cpu_ticks(None))
        .map(|(a, b)| round((b - a) as f64 / TICKS_PER_S / cpu_at.elapsed().as_secs_f64().max(1e-3), 2));
    // Every signal released (to within a 200 ms look), for the lag and so that the next phase
    // starts without them; those released after the deadline still reach the recipients and
    // count in the lateness, not in `delivered`.
    let mut all_released_after_end = None;
    if let Some(m) = &metrics {
        let until = Instant::now() + Duration::from_secs(600);
        while m.count() < accepted && Instant::now() < until {
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        if m.count() >= accepted {
            all_released_after_end = Some(round((Utc::now() - plan.end()).num_milliseconds() as f64 / 1000.0, 2));
        }
    }
    // The last acks go out within 5 ms; give them time to be recorded before the sessions close.
    tokio::time::sleep(Duration::from_secs(1)).await;
    stop.cancel();
    let mut late = lateness_histogram();
    for r in receivers {
        late.add(r.await.context("recipient task")?.context("recipient")?)?;
    }
    let lag = metrics.as_ref().map(|m| latency_json(&m.snapshot()));
    // The next phase starts on a quiet bus: read models caught up.
    let t = Instant::now();
    if let Some((b, _)) = &target.local {
        b.settle(Duration::from_secs(600)).await?;
    }
    let settled = t.elapsed();

    let mut results = json!({
        "mode": mode_name(args, args.embedded),
        "count": n,
        "accepted": accepted,
        "refused": tally.refused.load(Ordering::Relaxed),
        "send_seconds": round(sent.as_secs_f64(), 2),
        "sends_per_s": per_sec(accepted, sent),
        "lead_s": round(lead.as_secs_f64(), 1),
        "window_s": WINDOW.as_secs(),
        "send_overran_lead": overran,
        "delivered": delivered,
        "missing": accepted.saturating_sub(delivered),
        "received_in_the_end": tally.received_in(plan.range()),
        "early": tally.early.load(Ordering::Relaxed),
        "duplicates": tally.duplicates.load(Ordering::Relaxed),
        "redelivered": tally.redelivered.load(Ordering::Relaxed),
        "lateness": latency_json(&late),
        "all_delivered_after_window_end_s": all_in_after_end,
        "all_released_after_window_end_s": all_released_after_end,
        "bus_cpu_cores_in_window": cores,
        "projector_settled_seconds": round(settled.as_secs_f64(), 2),
        "release_lag": lag.clone().unwrap_or(Value::Null),
    });
    if let Some(r) = tally.first_refusal.lock().expect("refusal lock").as_ref() {
        results["first_refusal"] = json!(r);
    }
    let l = &results["lateness"];
    let mut summary = vec![
        format!(
            "{accepted} of {n} scheduled signals accepted in {:.1} s ({} sends/s over {} sessions); due over the minute from {:.0} s after the first send{}",
            sent.as_secs_f64(),
            results["sends_per_s"],
            args.senders,
            lead.as_secs_f64(),
            if overran { " — SENDING OVERRAN IT" } else { "" }
        ),
        format!(
            "delivered {delivered} by the window's end + {} s ({} received in the end): lateness p50 {} ms, p99 {} ms, p999 {} ms, max {} ms (target p99 ≤ 1000 ms); early {} (must be 0), duplicates {} (must be 0)",
            GRACE.as_secs(), results["received_in_the_end"],
            l["p50_ms"], l["p99_ms"], l["p999_ms"], l["max_ms"], results["early"], results["duplicates"]
        ),
    ];
    if let Some(lag) = &lag {
        summary.push(format!(
            "sweeper release lag (deliver_at → signal.released appended): {} releases, p50 {} ms, p99 {} ms, max {} ms",
            lag["count"], lag["p50_ms"], lag["p99_ms"], lag["max_ms"]
        ));
    }

    summary.push(format!(
        "the bus used {} cores from the window's start to the last delivery (or the deadline); every signal released by {} s after the window's end",
        results["bus_cpu_cores_in_window"], results["all_released_after_window_end_s"]
    ));

    if args.restart_count > 0 {
        let rate = accepted as f64 / sent.as_secs_f64().max(1e-3);
        let phase = restart::Phase { args, s_tokens: &s_tokens, r_tokens: &r_tokens, recipients: &recipients };
        // A failed restart is a result too: the first phase's numbers are still reported.
        match phase.run(&mut target, &tally, n, rate, metrics.as_ref()).await {
            Ok((json, line)) => {
                results["restart"] = json;
                summary.push(line);
            }
            Err(e) => {
                results["restart"] = json!({"error": format!("{e:#}")});
                summary.push(format!("restart phase FAILED: {e:#}"));
            }
        }
    }
    if target.local.is_some() {
        let (releases, twice) = stream_releases(&target).await?;
        results["stream"] = json!({"releases": releases, "released_more_than_once": twice});
        summary.push(format!(
            "stream: {releases} signal.released events, {twice} signals released more than once (must be 0)"
        ));
    }
    target.shutdown().await;
    Ok(Outcome { results, summary })
}

/// Opens a session per token and starts its recipient task; a failed opening is tried again
/// until `patience` has passed since the first (a restarted bus may be slow to welcome).
async fn connect_recipients(
    target: &Target,
    tokens: &[String],
    tally: &Arc<Tally>,
    stop: &CancellationToken,
    patience: Duration,
) -> anyhow::Result<Vec<tokio::task::JoinHandle<anyhow::Result<hdrhistogram::Histogram<u64>>>>> {
    let started = Instant::now();
    let mut tasks = Vec::with_capacity(tokens.len());
    for t in tokens {
        let ws = loop {
            match client::connect(&target.ws_url, t).await {
                Ok(ws) => break ws,
                Err(e) if started.elapsed() < patience => {
                    tracing::debug!(error = %e, "recipient session not open yet; retrying");
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
                Err(e) => return Err(e),
            }
        };
        tasks.push(tokio::spawn(flow::recipient(ws, tally.clone(), stop.clone())));
    }
    Ok(tasks)
}

/// Sends `plan` from one session per sender token; returns the time from the first send to the
/// last result.
async fn send_all(
    target: &Target,
    tokens: &[String],
    args: &Args,
    plan: Plan,
    recipients: &Arc<Vec<String>>,
    tally: &Arc<Tally>,
) -> anyhow::Result<Duration> {
    let mut sessions = Vec::with_capacity(tokens.len());
    for t in tokens {
        sessions.push(client::connect(&target.ws_url, t).await?);
    }
    let started = Instant::now();
    let m = sessions.len();
    let tasks: Vec<_> = sessions
        .into_iter()
        .enumerate()
        .map(|(i, ws)| tokio::spawn(flow::sender(ws, i, m, args.window, plan, recipients.clone(), tally.clone())))
        .collect();
    for t in tasks {
        t.await.context("sender task")?.context("sender")?;
    }
    Ok(started.elapsed())
}

/// Reads the whole stream: `signal.released` events, and how many signals have more than one.
async fn stream_releases(target: &Target) -> anyhow::Result<(u64, u64)> {
    let log = target.log().context("in-process bus")?;
    let mut per_signal: HashMap<uuid::Uuid, u32> = HashMap::new();
    let mut from = 1;
    loop {
        let page = log.read(from, 5_000).await?;
        let Some(last) = page.last() else { break };
        from = last.seq + 1;
        for s in &page {
            if let EventBody::SignalReleased(r) = &s.event.body {
                *per_signal.entry(r.signal_id).or_default() += 1;
            }
        }
    }
    let total = per_signal.values().map(|&c| c as u64).sum();
    Ok((total, per_signal.values().filter(|&&c| c > 1).count() as u64))
}
