//! `throughput` and `latency`: the send → push → ack workload (`drive`) against one bus, with
//! the raw JetStream baseline for `throughput` and the embedded-vs-distributed comparison.
//!
//! Deliberately just orchestration and arithmetic: the workload lives in `drive.rs`, the
//! baseline in `raw.rs`, the bus in `bed.rs`.

use std::time::Duration;

use serde_json::{json, Value};

use crate::args::Args;
use crate::batches::BatchStats;
use crate::bed::Target;
use crate::drive::{self, DriveConfig};
use crate::raw;
use crate::report::{latency_json, per_sec, round, Outcome};

/// The stream the bus writes (bus's `JetStreamConfig::default`).
const BUS_STREAM: &str = "SIGNALBUS";

pub(crate) struct ModeRun {
    pub json: Value,
    delivered_per_s: f64,
    pub summary: String,
}

pub(crate) async fn target(args: &Args, embedded: bool) -> anyhow::Result<Target> {
    Ok(match &args.url {
        Some(url) => Target::external(url, args.admin_token.as_deref().unwrap_or_default(), args.nats_url.clone()),
        None => Target::start(embedded, args.nats).await?,
    })
}

/// `external` (with `--url`), `embedded` or `distributed`.
pub(crate) fn mode_name(args: &Args, embedded: bool) -> &'static str {
    if args.url.is_some() {
        "external"
    } else if embedded {
        "embedded"
    } else {
        "distributed"
    }
}

pub(crate) async fn one_mode(
    args: &Args,
    cfg: &DriveConfig,
    embedded: bool,
    with_raw: bool,
) -> anyhow::Result<ModeRun> {
    let mode = mode_name(args, embedded);
    let target = target(args, embedded).await?;
    let before = match (&target.nats_url, embedded) {
        (Some(url), false) => Some(raw::stream_totals(url, BUS_STREAM).await?),
        _ => None,
    };
    let r = drive::run(&target, cfg).await?;
    let delivered_per_s = per_sec(r.delivered, r.window);
    let events_per_s = per_sec(r.events, r.window);
    let mut json = json!({
        "mode": mode,
        "delivered": r.delivered,
        "delivered_per_s": delivered_per_s,
        "events": r.events,
        "events_per_s": events_per_s,
        "sends_accepted": r.accepted,
        "sends_refused": r.refused,
        "latency": latency_json(&r.latency),
        "accept_latency": latency_json(&r.accept_latency),
    });
    if let Some(lag) = &r.projector_lag {
        json["projector_lag"] = lag.json();
    }
    let (lat, acc) = (&json["latency"], &json["accept_latency"]);
    let mut summary = format!(
        "{mode}: {delivered_per_s} signals/s delivered, {events_per_s} events/s; send→receive p50 {} ms, p99 {} ms, p999 {} ms (send→result p50 {} ms, p99 {} ms)",
        lat["p50_ms"], lat["p99_ms"], lat["p999_ms"], acc["p50_ms"], acc["p99_ms"]
    );
    if cfg.rate.is_some() {
        json["send_lateness"] = latency_json(&r.send_lateness);
        let late = &json["send_lateness"];
        summary += &format!(
            "\n  the bench's own senders: scheduled → frame written p50 {} / p99 {} / p999 {} ms",
            late["p50_ms"], late["p99_ms"], late["p999_ms"]
        );
    }
    if let Some(st) = &r.stages {
        json["stages"] = json!({
            "append": latency_json(&st.append),
            "time_to_delivery": latency_json(&st.time_to_delivery),
        });
        let (ap, td) = (&json["stages"]["append"], &json["stages"]["time_to_delivery"]);
        summary += &format!(
            "\n  stages: append p50 {} / p99 {} / p999 {} ms; created→push queued p50 {} / p99 {} / p999 {} ms",
            ap["p50_ms"], ap["p99_ms"], ap["p999_ms"], td["p50_ms"], td["p99_ms"], td["p999_ms"]
        );
        // Each gate's waits, and the share of the window's sends that met it.
        let sends = r.latency.len().max(1) as f64;
        let mut gates = Vec::new();
        for (gate, h) in [("paced", &st.paced_wait), ("held", &st.held_wait)] {
            let share = round(h.len() as f64 / sends * 100.0, 2);
            json["stages"]["backpressure"][gate] = latency_json(h);
            json["stages"]["backpressure"][gate]["share_pct"] = json!(share);
            let w = &json["stages"]["backpressure"][gate];
            gates.push(format!(
                "{gate} {share} % of sends, wait p50 {} / p99 {} / max {} ms",
                w["p50_ms"], w["p99_ms"], w["max_ms"]
            ));
        }
        summary += &format!("\n  back-pressure: {}", gates.join("; "));
    }
    if let Some(a) = r.allocs.filter(|_| r.delivered > 0) {
        let (calls, bytes) = (a.calls as f64 / r.delivered as f64, a.bytes as f64 / r.delivered as f64);
        json["allocs_per_signal"] = json!({"calls": round(calls, 1), "bytes": round(bytes, 0)});
        summary += &format!(
            "\n  heap allocations per delivered signal (this process: bus and client sessions): {calls:.1} ({bytes:.0} B)"
        );
    }
    if let Some(samples) = r.batches.as_deref().filter(|s| !s.is_empty()) {
        let b = BatchStats::of(samples);
        json["projector_batches"] = json!({
            "count": b.count, "events_mean": round(b.mean_events, 1),
            "apply_ms": {"p50": b.p50_ms, "p99": b.p99_ms, "max": b.max_ms},
        });
        summary += &format!(
            "\n  projector batches: {} of {:.0} events on average, apply p50 {} / p99 {} / max {} ms",
            b.count, b.mean_events, b.p50_ms, b.p99_ms, b.max_ms
        );
    }
    if let Some((b, _)) = &target.local {
        // The projector must not compete with the baseline for the CPU.
        b.settle(Duration::from_secs(120)).await?;
    }
    // At a fixed rate: what the stream alone gives to appends shaped like a send's, at the rate
    // the bus appended, on the same server with the bus idle.
    if let (Some(_), Some(url), Some(before)) = (cfg.rate, &target.nats_url, before) {
        let size = mean_event_bytes(url, before).await?;
        let raw_for = cfg.duration.min(Duration::from_secs(10));
        for (key, tail, what) in [("raw_append", false, "alone"), ("raw_append_tailed", true, "with one tail")] {
            let h = raw::paced_latency(url, size, events_per_s, raw_for, target.replicas, tail).await?;
            json[key] = latency_json(&h);
            json[key]["rate"] = json!(events_per_s);
            let ra = &json[key];
            summary += &format!(
                "\n  raw JetStream appends {what} at {events_per_s}/s: p50 {} / p99 {} / p999 {} ms",
                ra["p50_ms"], ra["p99_ms"], ra["p999_ms"]
            );
        }
    }
    if let (true, Some(url), Some(before)) = (with_raw, &target.nats_url, before) {
        // Messages the size of one send's: the bus gathers several sends into one message, and
        // the baseline is what the broker does with a message per signal.
        let size = mean_event_bytes(url, before).await?.min(send_bytes(cfg.payload_bytes));
        let raw_for = cfg.duration.min(Duration::from_secs(10));
        let base = raw::publish_rate(url, size, raw_for, args.raw_window, target.replicas).await?;
        let raw_per_s = round(base.per_sec(), 1);
        // Signals, not events: how many events a signal costs is the bus's own business.
        let ratio = round(delivered_per_s / raw_per_s, 3);
        json["raw"] = json!({
            "events_per_s": raw_per_s,
            "message_bytes": size,
            "window": args.raw_window,
            "seconds": round(base.elapsed.as_secs_f64(), 2),
        });
        json["ratio"] = json!(ratio);
        json["events_ratio"] = json!(round(events_per_s / raw_per_s, 3));
        summary += &format!(
            "\n  raw JetStream: {raw_per_s} msg/s of {size} B → delivered signals ÷ raw msg {ratio} (target ≥ 0.30)"
        );
    }
    if let Some(lag) = json.get("projector_lag") {
        summary += &format!(
            "\n  projector lag p50 {} ms, p99 {} ms, max {} ms (target < 100 ms)",
            lag["p50_ms"], lag["p99_ms"], lag["max_ms"]
        );
    }
    target.shutdown().await;
    Ok(ModeRun { json, delivered_per_s, summary })
}

/// The mean stored size of the events the bus appended since `before` (messages, bytes), so a
/// raw baseline publishes messages of the bus's size.
async fn mean_event_bytes(url: &str, before: (u64, u64)) -> anyhow::Result<usize> {
    let (msgs, bytes) = raw::stream_totals(url, BUS_STREAM).await?;
    Ok(((bytes - before.1) / (msgs - before.0).max(1)) as usize)
}

/// What one send's `signal.sent` takes on the stream with `payload_bytes` of payload (the
/// bench's names, a session id, the envelope): the size of the raw baseline's messages.
fn send_bytes(payload_bytes: usize) -> usize {
    use bus::catalog::{Category, DeliveryClass};
    use bus::event::{Event, EventBody, PublishPath, RecipientState, SignalSent};
    let now = chrono::Utc::now();
    let sent = SignalSent {
        signal_id: uuid::Uuid::now_v7(),
        from: "sender-00".into(),
        to: "recipient-00".into(),
        signal_type: "StatusUpdate".into(),
        category: Category::Info,
        priority: 1,
        payload: format!(r#"{{"t":1234567890,"pad":"{}"}}"#, drive::padding(payload_bytes)),
        delivery_class: DeliveryClass::Async,
        created_at: now,
        expires_at: now,
        recipient_state: RecipientState::Available,
        publish_path: PublishPath::PushedToWs,
        correlation_id: None,
        dedupe_key: None,
        redacted: vec![],
        resolved_to_session: Some(uuid::Uuid::now_v7()),
        pushed_to: Some(uuid::Uuid::now_v7()),
        fanout_id: None,
        deliver_at: None,
    };
    let event = Event::new("default", None, now, EventBody::SignalSent(Box::new(sent)));
    bus::codec::encode(&event).map_or(payload_bytes + 512, |b| b.len())
}

pub(crate) fn drive_config(args: &Args, rate: Option<f64>) -> DriveConfig {
    DriveConfig {
        senders: args.senders,
        recipients: args.recipients,
        window: if rate.is_some() { 1024 } else { args.window },
        rate,
        warmup: args.warmup,
        duration: args.duration,
        payload_bytes: args.payload_bytes,
    }
}

pub async fn throughput(args: &Args) -> anyhow::Result<Outcome> {
    let cfg = drive_config(args, None);
    let mut results = json!({});
    let mut summary = Vec::new();
    let run_distributed = !args.embedded || args.compare_embedded;
    let run_embedded = args.embedded || args.compare_embedded;
    let mut dist_rate = None;
    if run_distributed {
        let d = one_mode(args, &cfg, false, true).await?;
        results["ratio"] = d.json["ratio"].clone();
        results["distributed"] = d.json;
        dist_rate = Some(d.delivered_per_s);
        summary.push(d.summary);
    }
    if run_embedded {
        let e = one_mode(args, &cfg, true, false).await?;
        results["embedded"] = e.json;
        summary.push(e.summary);
        // Delivered signals, not stream records: each mode packs sends into records its own
        // way (several sends ride in one JetStream message), so records/s compare the packing.
        if let Some(d) = dist_rate {
            let r = round(e.delivered_per_s / d, 3);
            results["embedded_ratio"] = json!(r);
            summary.push(format!("embedded ÷ distributed delivered signals/s: {r} (target ≥ 0.8)"));
        }
    }
    Ok(Outcome { results, summary })
}

pub async fn latency(args: &Args) -> anyhow::Result<Outcome> {
    let cfg = drive_config(args, Some(args.rate));
    let run = one_mode(args, &cfg, args.embedded, false).await?;
    let mut results = run.json;
    results["offered_per_s"] = json!(args.rate);
    let (first, rest) = run.summary.split_at(run.summary.find('\n').unwrap_or(run.summary.len()));
    let summary = vec![format!("offered {} signals/s; {first} (target p99 ≤ 5 ms, p999 ≤ 10 ms){rest}", args.rate)];
    Ok(Outcome { results, summary })
}
