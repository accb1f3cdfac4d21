//! `directives`: N issuer sessions hand directives (`op: directive, action: create`) in turn to
//! one of M worker sessions (round-robin) and to a group of those M workers; a worker completes
//! each at once when its `DirectiveRequested` arrives (a group's members race for it, one wins).
//! Each issuer keeps `window` directives open and creates the next when a `DirectiveCompleted`
//! signal comes back, so what is counted is the whole round trip. Beside it, on the same bus in
//! the same run, the `throughput` workload (`drive`) with N senders and M recipients: the
//! ratios divide the directive numbers by those signal numbers.
//!
//! Deliberately never asserts a target, and keeps each session one task on a raw socket (no
//! client bookkeeping on the measured path); frames are parsed only where a field is needed.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use futures::{SinkExt, StreamExt};
use hdrhistogram::Histogram;
use serde_json::{json, Value};
use tokio::time::Instant;
use tokio_tungstenite::tungstenite::Message;
use tokio_util::sync::CancellationToken;

use crate::args::Args;
use crate::bed::Target;
use crate::client::{self, Ws};
use crate::drive::{self, flush_acks, stamp_of_ref, Clock, DriveConfig};
use crate::report::{latency_histogram, latency_json, per_sec, round, Outcome};
use crate::scenario::traffic;

/// The directive type every issuer creates.
const TYPE: &str = "bench.work";
/// Lifecycle signals that end a directive for its issuer (CONTRACT §14).
const TERMINAL: [&str; 5] =
    ["DirectiveCompleted", "DirectiveFailed", "DirectiveRejected", "DirectiveCanceled", "DirectiveExpired"];

#[derive(Default)]
struct Counters {
    /// Completed directives whose `DirectiveCompleted` reached the issuer inside the window.
    direct: AtomicU64,
    group: AtomicU64,
    /// Creates answered with an error; directives that ended otherwise than completed.
    refused: AtomicU64,
    other_end: AtomicU64,
    /// Workers' completes that won, and those that lost (a group's other members).
    completes_won: AtomicU64,
    completes_lost: AtomicU64,
}

/// What one issuer measured, in microseconds.
struct IssuerHists {
    direct: Histogram<u64>,
    group: Histogram<u64>,
    create: Histogram<u64>,
}

pub async fn run(args: &Args) -> anyhow::Result<Outcome> {
    let target = traffic::target(args, args.embedded).await?;
    let mode = traffic::mode_name(args, args.embedded);
    let http = reqwest::Client::new();

    // The signal baseline first, measured exactly as `throughput` measures it.
    let cfg = DriveConfig {
        senders: args.issuers,
        recipients: args.workers,
        window: args.window,
        rate: None,
        warmup: args.warmup,
        duration: args.duration,
        payload_bytes: args.payload_bytes,
    };
    let signals = drive::run(&target, &cfg).await?;
    settle(&target).await?;
    let signals_per_s = per_sec(signals.delivered, signals.window);

    // Then the directives, on the same bus.
    let prefix = client::run_prefix();
    let issuers: Vec<String> = (0..args.issuers).map(|i| format!("{prefix}-i{i}")).collect();
    let workers: Vec<String> = (0..args.workers).map(|i| format!("{prefix}-w{i}")).collect();
    let i_tokens = client::register_all(&http, &target, &issuers).await?;
    let w_tokens = client::register_all(&http, &target, &workers).await?;
    let group = format!("{prefix}-workers");
    client::create_group(&http, &target, &group, &workers).await?;
    let mut w_ws = Vec::new();
    for t in &w_tokens {
        w_ws.push(client::connect(&target.ws_url, t).await?);
    }
    let mut i_ws = Vec::new();
    for t in &i_tokens {
        i_ws.push(client::connect(&target.ws_url, t).await?);
    }
    tokio::time::sleep(Duration::from_millis(500)).await;

    let clock = Clock::from_now(args.warmup, args.duration);
    let counters = Arc::new(Counters::default());
    let stop = CancellationToken::new();
    let workers_tasks: Vec<_> =
        w_ws.into_iter().map(|ws| tokio::spawn(worker(ws, counters.clone(), stop.clone()))).collect();
    let to = Arc::new(Assignees { workers, group: format!("@{group}"), issuers: args.issuers });
    let issuer_tasks: Vec<_> = i_ws
        .into_iter()
        .enumerate()
        .map(|(i, ws)| tokio::spawn(issuer(ws, i, to.clone(), args.window, clock, counters.clone())))
        .collect();
    tokio::time::sleep_until(clock.start).await;
    let events_start = target.events_so_far(&http).await?;
    tokio::time::sleep_until(clock.end).await;
    let events_end = target.events_so_far(&http).await?;
    let (mut direct, mut group_h, mut create, mut all) =
        (latency_histogram(), latency_histogram(), latency_histogram(), latency_histogram());
    for t in issuer_tasks {
        let h = t.await.context("issuer task")?.context("issuer")?;
        direct.add(&h.direct)?;
        group_h.add(&h.group)?;
        create.add(&h.create)?;
    }
    all.add(&direct)?;
    all.add(&group_h)?;
    stop.cancel();
    for t in workers_tasks {
        t.await.context("worker task")?.context("worker")?;
    }
    settle(&target).await?;
    target.shutdown().await;

    let c = &counters;
    let (n_direct, n_group) = (c.direct.load(Ordering::Relaxed), c.group.load(Ordering::Relaxed));
    let completed = n_direct + n_group;
    let directives_per_s = per_sec(completed, args.duration);
    let events = events_end.saturating_sub(events_start);
    let signal_lat = latency_json(&signals.latency);
    let round_trip = latency_json(&all);
    let ratio = |a: &Value, b: &Value| match (a.as_f64(), b.as_f64()) {
        (Some(a), Some(b)) if b > 0.0 => json!(round(a / b, 3)),
        _ => Value::Null,
    };
    let round_trip_ratio = ratio(&round_trip["p50_ms"], &signal_lat["p50_ms"]);
    let throughput_ratio = ratio(&json!(directives_per_s), &json!(signals_per_s));
    let results = json!({
        "mode": mode,
        "signals": {
            "delivered": signals.delivered,
            "delivered_per_s": signals_per_s,
            "events_per_s": per_sec(signals.events, signals.window),
            "latency": signal_lat,
            "accept_latency": latency_json(&signals.accept_latency),
        },
        "directives": {
            "completed": completed,
            "completed_per_s": directives_per_s,
            "round_trip": round_trip,
            "direct": {"completed_per_s": per_sec(n_direct, args.duration), "round_trip": latency_json(&direct)},
            "group": {"completed_per_s": per_sec(n_group, args.duration), "round_trip": latency_json(&group_h)},
            "create_latency": latency_json(&create),
            // Counted over the whole run, warm-up and drain included.
            "whole_run": {
                "refused": c.refused.load(Ordering::Relaxed),
                "ended_otherwise": c.other_end.load(Ordering::Relaxed),
                "completes_won": c.completes_won.load(Ordering::Relaxed),
                "completes_lost": c.completes_lost.load(Ordering::Relaxed),
            },
            "events_per_s": per_sec(events, args.duration),
            "events_per_directive": if completed > 0 { json!(round(events as f64 / completed as f64, 2)) } else { Value::Null },
        },
        "round_trip_ratio": round_trip_ratio,
        "throughput_ratio": throughput_ratio,
    });
    let summary = vec![
        format!(
            "{mode}: {directives_per_s} directives/s completed end to end ({} direct, {} to a group of {}); create→DirectiveCompleted p50 {} ms, p99 {} ms",
            per_sec(n_direct, args.duration), per_sec(n_group, args.duration), args.workers,
            round_trip["p50_ms"], round_trip["p99_ms"]
        ),
        format!(
            "signals beside it: {signals_per_s} delivered/s, send→receive p50 {} ms, p99 {} ms",
            signal_lat["p50_ms"], signal_lat["p99_ms"]
        ),
        format!("round trip p50 ÷ signal p50: {round_trip_ratio} (target ≤ 3); directives/s ÷ signals/s: {throughput_ratio} (target ≥ 0.3)"),
    ];
    Ok(Outcome { results, summary })
}

/// Waits for the projector (in-process only), so one phase's backlog does not slow the next.
async fn settle(target: &Target) -> anyhow::Result<()> {
    if let Some((b, _)) = &target.local {
        b.settle(Duration::from_secs(120)).await?;
    }
    Ok(())
}

/// Who issuer `idx` hands its `k`-th directive to: a worker (round-robin over all issuers' sends)
/// for even `k`, the group for odd `k`.
struct Assignees {
    workers: Vec<String>,
    group: String,
    issuers: usize,
}

impl Assignees {
    fn for_send(&self, idx: usize, k: u64) -> (&str, bool) {
        if k % 2 == 1 {
            return (&self.group, true);
        }
        let n = (k / 2) * self.issuers as u64 + idx as u64;
        (&self.workers[(n % self.workers.len() as u64) as usize], false)
    }
}

async fn issuer(
    ws: Ws,
    idx: usize,
    to: Arc<Assignees>,
    window: usize,
    clock: Clock,
    counters: Arc<Counters>,
) -> anyhow::Result<IssuerHists> {
    let (mut sink, mut stream) = ws.split();
    let mut h = IssuerHists { direct: latency_histogram(), group: latency_histogram(), create: latency_histogram() };
    let mut acks: Vec<String> = Vec::with_capacity(64);
    let mut tick = tokio::time::interval(Duration::from_millis(5));
    let (mut k, mut open) = (0u64, 0usize);
    // After the window, the directives still open may finish for up to 10 s.
    let drain_until = clock.end + Duration::from_secs(10);
    loop {
        let sending = Instant::now() < clock.end;
        if !sending && (open == 0 || Instant::now() >= drain_until) {
            break;
        }
        tokio::select! {
            _ = std::future::ready(()), if sending && open < window => {
                let (assignee, group) = to.for_send(idx, k);
                let stamp = clock.us(Instant::now());
                let frame = json!({"op": "directive", "action": "create", "ref": format!("{k}:{stamp}"),
                    "to": assignee, "type": TYPE, "params": {"t": stamp, "g": group},
                    "idempotency_key": format!("{idx}-{k}")});
                sink.send(Message::text(frame.to_string())).await.context("create frame")?;
                k += 1;
                open += 1;
            }
            msg = stream.next() => {
                let Some(Ok(msg)) = msg else { break };
                let Message::Text(t) = msg else { continue };
                let t = t.as_str();
                if t.starts_with(r#"{"op":"signal""#) {
                    let now = Instant::now();
                    let v: Value = serde_json::from_str(t).context("signal frame")?;
                    let s = &v["signal"];
                    if let Some(id) = s["id"].as_str() {
                        acks.push(id.to_string());
                    }
                    let ty = s["type"].as_str().unwrap_or_default();
                    if !TERMINAL.contains(&ty) {
                        continue;
                    }
                    open = open.saturating_sub(1);
                    if ty != "DirectiveCompleted" {
                        counters.other_end.fetch_add(1, Ordering::Relaxed);
                        continue;
                    }
                    let params = &s["payload"]["params"];
                    let group = params["g"].as_bool().unwrap_or(false);
                    if clock.in_window(now) {
                        let c = if group { &counters.group } else { &counters.direct };
                        c.fetch_add(1, Ordering::Relaxed);
                    }
                    if let Some(stamp) = params["t"].as_u64().filter(|s| clock.stamp_in_window(*s)) {
                        let hist = if group { &mut h.group } else { &mut h.direct };
                        hist.record(clock.us(now).saturating_sub(stamp).max(1))?;
                    }
                    if acks.len() >= 64 {
                        flush_acks(&mut sink, &mut acks).await?;
                    }
                } else if t.contains(r#""op":"result""#) {
                    // An answer's directive object never holds `"ok":false`; an error's top does.
                    if t.contains(r#""ok":false"#) {
                        counters.refused.fetch_add(1, Ordering::Relaxed);
                        open = open.saturating_sub(1);
                    } else if let Some(stamp) = stamp_of_ref(t).filter(|s| clock.stamp_in_window(*s)) {
                        h.create.record(clock.us(Instant::now()).saturating_sub(stamp).max(1))?;
                    }
                }
            }
            _ = tick.tick(), if !acks.is_empty() => flush_acks(&mut sink, &mut acks).await?,
            _ = tokio::time::sleep_until(clock.end), if sending => {}
            _ = tokio::time::sleep_until(drain_until), if !sending => {}
        }
    }
    if !acks.is_empty() {
        flush_acks(&mut sink, &mut acks).await?;
    }
    let _ = sink.close().await;
    Ok(h)
}

/// Completes every directive it is handed as soon as its `DirectiveRequested` arrives, and acks.
async fn worker(ws: Ws, counters: Arc<Counters>, stop: CancellationToken) -> anyhow::Result<()> {
    let (mut sink, mut stream) = ws.split();
    let mut acks: Vec<String> = Vec::with_capacity(64);
    let mut tick = tokio::time::interval(Duration::from_millis(5));
    loop {
        tokio::select! {
            _ = stop.cancelled() => break,
            msg = stream.next() => {
                let Some(Ok(msg)) = msg else { break };
                let Message::Text(t) = msg else { continue };
                let t = t.as_str();
                if t.starts_with(r#"{"op":"signal""#) {
                    let v: Value = serde_json::from_str(t).context("signal frame")?;
                    let s = &v["signal"];
                    if s["type"] == "DirectiveRequested" {
                        let id = s["payload"]["directive_id"].as_str().unwrap_or_default();
                        let frame = format!(
                            r#"{{"op":"directive","action":"complete","ref":"c","directive_id":"{id}","result":{{"ok":true}}}}"#
                        );
                        sink.send(Message::text(frame)).await.context("complete frame")?;
                    }
                    if let Some(id) = s["id"].as_str() {
                        acks.push(id.to_string());
                    }
                    if acks.len() >= 64 {
                        flush_acks(&mut sink, &mut acks).await?;
                    }
                } else if t.contains(r#""op":"result""#) && t.contains(r#""ref":"c""#) {
                    // A lost race's error carries the directive, whose result says `"ok":true`.
                    let lost = t.contains(r#""ok":false"#);
                    let won = if lost { &counters.completes_lost } else { &counters.completes_won };
                    won.fetch_add(1, Ordering::Relaxed);
                }
            }
            _ = tick.tick(), if !acks.is_empty() => flush_acks(&mut sink, &mut acks).await?,
        }
    }
    if !acks.is_empty() {
        flush_acks(&mut sink, &mut acks).await?;
    }
    let _ = sink.close().await;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::Assignees;

    #[test]
    fn every_other_directive_goes_to_the_group_and_the_rest_round_robin_over_workers() {
        let to = Assignees { workers: vec!["w0".into(), "w1".into(), "w2".into()], group: "@g".into(), issuers: 2 };
        let sends: Vec<(&str, bool)> = (0..6).map(|k| to.for_send(1, k)).collect();
        assert_eq!(sends, [("w1", false), ("@g", true), ("w0", false), ("@g", true), ("w2", false), ("@g", true)]);
        assert_eq!(to.for_send(0, 0), ("w0", false));
    }
}
