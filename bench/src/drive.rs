//! The send → push → ack workload behind `throughput` and `latency`: M sender sessions send
//! async `StatusUpdate` signals round-robin to N connected (so `available`) recipient sessions,
//! each payload stamped with its send time; recipients record send→receive latency in
//! hdrhistogram and ack in batches, as a real daemon would.
//!
//! Unpaced (`rate: None`), each sender keeps `window` sends outstanding (throughput). Paced,
//! sends follow a fixed global schedule and are stamped with their *scheduled* time, so a bus
//! that falls behind shows up as latency instead of silently lowering the offered rate
//! (no coordinated omission).
//!
//! Deliberately measures only a window after a warm-up, and only signals sent inside it.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use futures::{SinkExt, StreamExt};
use hdrhistogram::Histogram;
use tokio::sync::Semaphore;
use tokio::time::Instant;
use tokio_tungstenite::tungstenite::Message;
use tokio_util::sync::CancellationToken;

use crate::bed::Target;
use crate::client::{self, Ws};
use crate::lag::{self, LagResult};
use crate::report::latency_histogram;

#[derive(Debug, Clone)]
pub struct DriveConfig {
    pub senders: usize,
    pub recipients: usize,
    /// Sends outstanding per sender session.
    pub window: usize,
    /// Total signals/s across senders; `None`: as fast as the window allows.
    pub rate: Option<f64>,
    pub warmup: Duration,
    pub duration: Duration,
    /// Encoded JSON payload size per signal.
    pub payload_bytes: usize,
}

#[derive(Debug)]
pub struct DriveResult {
    /// Signals received by recipients inside the window.
    pub delivered: u64,
    /// Send results inside the whole run: accepted, and refused (`ok: false`).
    pub accepted: u64,
    pub refused: u64,
    /// Stream events appended inside the window.
    pub events: u64,
    pub latency: Histogram<u64>,
    /// Send → the sender's `result` frame (the accept path alone, without the push).
    pub accept_latency: Histogram<u64>,
    /// Paced runs: a send's scheduled time → its frame written to the socket, i.e. how late
    /// the bench's own sender was (timer, scheduling, its window); part of both latencies.
    pub send_lateness: Histogram<u64>,
    pub window: Duration,
    /// In-process bus only: the projector's lag over the window (`lag.rs`).
    pub projector_lag: Option<LagResult>,
    /// In-process bus only: the bus's own stage histograms over the window (`kept.rs`).
    pub stages: Option<Stages>,
    /// Heap allocations of this process over the window, the in-process bus's and the client
    /// sessions' together, in a build that counts them (`allocs.rs`).
    pub allocs: Option<crate::allocs::Allocs>,
    /// In-process bus only: (events, apply µs) of each batch the projector applied in the
    /// window (`batches.rs`).
    pub batches: Option<Vec<(u64, u64)>>,
}

/// What the in-process bus itself recorded over the window, in µs: every append (sends and
/// ack batches alike), each push's time from its signal's `created_at` (taken before the
/// append) to its session's queue, and the wait of each send that met back-pressure's paced
/// or held gate before its append.
#[derive(Debug)]
pub struct Stages {
    pub append: Histogram<u64>,
    pub time_to_delivery: Histogram<u64>,
    pub paced_wait: Histogram<u64>,
    pub held_wait: Histogram<u64>,
}

/// What every task of a run counts (also the peer's, `peer/`).
#[derive(Default)]
pub(crate) struct Counters {
    pub delivered: AtomicU64,
    pub accepted: AtomicU64,
    pub refused: AtomicU64,
}

/// Timeline shared by every task: `base` is t = 0 of the payload stamps.
#[derive(Clone, Copy)]
pub(crate) struct Clock {
    pub base: Instant,
    pub start: Instant,
    pub end: Instant,
}

impl Clock {
    /// A run that starts measuring after `warmup` from now, for `duration`.
    pub fn from_now(warmup: Duration, duration: Duration) -> Clock {
        let base = Instant::now();
        let start = base + warmup;
        Clock { base, start, end: start + duration }
    }

    pub fn us(&self, at: Instant) -> u64 {
        at.saturating_duration_since(self.base).as_micros() as u64
    }
    pub fn in_window(&self, at: Instant) -> bool {
        at >= self.start && at < self.end
    }
    /// Whether a payload stamped `stamp` was sent inside the window.
    pub fn stamp_in_window(&self, stamp: u64) -> bool {
        stamp >= self.us(self.start) && stamp < self.us(self.end)
    }

    /// Waits for the turn of send `k` of sender `idx` (of `senders`): its scheduled time when
    /// paced (`rate` signals/s over all senders), then a free slot of `window`. Returns the stamp
    /// its payload carries — the scheduled time when paced, so waiting for the window counts as
    /// latency (no coordinated omission) — or `None` once the run is over.
    pub async fn next_send(
        &self,
        rate: Option<f64>,
        senders: usize,
        idx: usize,
        k: u64,
        window: &Semaphore,
    ) -> anyhow::Result<Option<u64>> {
        let due = match rate {
            Some(r) => self.base + Duration::from_secs_f64((k * senders as u64 + idx as u64) as f64 / r),
            None => Instant::now(),
        };
        if due >= self.end {
            return Ok(None);
        }
        if rate.is_some() {
            crate::pacer::sleep_until(due).await;
        }
        tokio::select! {
            p = window.acquire() => p?.forget(),
            _ = tokio::time::sleep_until(self.end) => return Ok(None),
        }
        Ok(Some(if rate.is_some() { self.us(due) } else { self.us(Instant::now()) }))
    }
}

pub async fn run(target: &Target, cfg: &DriveConfig) -> anyhow::Result<DriveResult> {
    let http = reqwest::Client::new();
    let prefix = client::run_prefix();
    let recipients: Vec<String> = (0..cfg.recipients).map(|i| format!("{prefix}-r{i}")).collect();
    let senders: Vec<String> = (0..cfg.senders).map(|i| format!("{prefix}-s{i}")).collect();
    let r_tokens = client::register_all(&http, target, &recipients).await?;
    let s_tokens = client::register_all(&http, target, &senders).await?;
    let mut r_ws = Vec::new();
    for t in &r_tokens {
        r_ws.push(client::connect(&target.ws_url, t).await?);
    }
    let mut s_ws = Vec::new();
    for t in &s_tokens {
        s_ws.push(client::connect(&target.ws_url, t).await?);
    }
    // Let the session openings and their (empty) startup drains settle before the clock starts.
    tokio::time::sleep(Duration::from_millis(500)).await;

    let clock = Clock::from_now(cfg.warmup, cfg.duration);
    let counters = Arc::new(Counters::default());
    let stop = CancellationToken::new();
    let recipients = Arc::new(recipients);
    let pad = padding(cfg.payload_bytes);

    let receivers: Vec<_> =
        r_ws.into_iter().map(|ws| tokio::spawn(recipient(ws, clock, counters.clone(), stop.clone()))).collect();
    let senders: Vec<_> = s_ws
        .into_iter()
        .enumerate()
        .map(|(i, ws)| {
            tokio::spawn(sender(ws, i, cfg.clone(), recipients.clone(), pad.clone(), clock, counters.clone()))
        })
        .collect();

    let sampler =
        target.local.as_ref().map(|(b, _)| lag::spawn(b.log.clone(), b.models.clone(), clock.start, clock.end));

    tokio::time::sleep_until(clock.start).await;
    let kept = target.local.as_ref().and_then(|_| crate::kept::kept());
    if let Some(k) = kept {
        for series in [&k.append, &k.time_to_delivery, &k.paced_wait, &k.held_wait] {
            series.reset();
        }
    }
    crate::batches::take();
    let allocs_start = crate::allocs::Allocs::now();
    let events_start = target.events_so_far(&http).await?;
    tokio::time::sleep_until(clock.end).await;
    let allocs = crate::allocs::Allocs::now().zip(allocs_start).map(|(end, start)| end.since(start));
    let stages = kept.map(|k| Stages {
        append: k.append.snapshot(),
        time_to_delivery: k.time_to_delivery.snapshot(),
        paced_wait: k.paced_wait.snapshot(),
        held_wait: k.held_wait.snapshot(),
    });
    let batches = target.local.as_ref().map(|_| crate::batches::take());
    let events_end = target.events_so_far(&http).await?;
    let projector_lag = match sampler {
        Some(s) => Some(s.await.context("lag sampler")?),
        None => None,
    };
    let mut accept_latency = latency_histogram();
    let mut send_lateness = latency_histogram();
    for s in senders {
        let (accept, late) = s.await.context("sender task")?.context("sender")?;
        accept_latency.add(accept)?;
        send_lateness.add(late)?;
    }
    // In-flight signals still arrive and count for latency; nothing after the window counts
    // as delivered, so this grace only completes the histogram.
    tokio::time::sleep(Duration::from_secs(1)).await;
    stop.cancel();
    let mut latency = latency_histogram();
    for r in receivers {
        latency.add(r.await.context("recipient task")?.context("recipient")?)?;
    }
    Ok(DriveResult {
        delivered: counters.delivered.load(Ordering::Relaxed),
        accepted: counters.accepted.load(Ordering::Relaxed),
        refused: counters.refused.load(Ordering::Relaxed),
        events: events_end.saturating_sub(events_start),
        latency,
        accept_latency,
        send_lateness,
        window: cfg.duration,
        projector_lag,
        stages,
        allocs,
        batches,
    })
}

/// The `pad` that makes a `{"t":…,"pad":"…"}` payload `payload_bytes` long.
pub(crate) fn padding(payload_bytes: usize) -> Arc<str> {
    Arc::from("x".repeat(payload_bytes.saturating_sub(r#"{"t":1234567890,"pad":""}"#.len())))
}

async fn sender(
    ws: Ws,
    idx: usize,
    cfg: DriveConfig,
    recipients: Arc<Vec<String>>,
    pad: Arc<str>,
    clock: Clock,
    counters: Arc<Counters>,
) -> anyhow::Result<(Histogram<u64>, Histogram<u64>)> {
    let (mut sink, mut stream) = ws.split();
    let mut lateness = latency_histogram();
    let window = Arc::new(Semaphore::new(cfg.window));
    let reader = {
        let window = window.clone();
        let counters = counters.clone();
        tokio::spawn(async move {
            let mut accept = latency_histogram();
            while let Some(Ok(msg)) = stream.next().await {
                if let Message::Text(t) = msg {
                    let t = t.as_str();
                    if t.contains(r#""op":"result""#) {
                        let c = if t.contains(r#""ok":true"#) { &counters.accepted } else { &counters.refused };
                        c.fetch_add(1, Ordering::Relaxed);
                        window.add_permits(1);
                        if let Some(stamp) = stamp_of_ref(t) {
                            if clock.stamp_in_window(stamp) {
                                let _ = accept.record(clock.us(Instant::now()).saturating_sub(stamp).max(1));
                            }
                        }
                    }
                }
            }
            accept
        })
    };
    let m = cfg.senders as u64;
    let mut k: u64 = 0;
    while let Some(stamp) = clock.next_send(cfg.rate, cfg.senders, idx, k, &window).await? {
        let to = &recipients[((k * m + idx as u64) % recipients.len() as u64) as usize];
        let frame = format!(
            r#"{{"op":"send","ref":"{k}:{stamp}","to":"{to}","type":"StatusUpdate","payload":{{"t":{stamp},"pad":"{pad}"}}}}"#
        );
        // Flat out, sends the window allows at once go out in one write (as a pipelining
        // client's would, and as lapin's do on the peer's side); a paced send goes at once.
        sink.feed(Message::text(frame)).await.context("send frame")?;
        let paced = cfg.rate.is_some();
        if paced || window.available_permits() == 0 {
            sink.flush().await.context("send frame")?;
        }
        if paced && clock.stamp_in_window(stamp) {
            let _ = lateness.record(clock.us(Instant::now()).saturating_sub(stamp).max(1));
        }
        k += 1;
    }
    sink.flush().await.context("send frame")?;
    // Wait for the outstanding results, so the bus is not mid-send when the next phase starts.
    let _ = tokio::time::timeout(Duration::from_secs(10), window.acquire_many(cfg.window as u32)).await;
    let _ = sink.close().await;
    // The bus closes the socket in answer to ours, which ends the reader.
    let accept = tokio::time::timeout(Duration::from_secs(5), reader).await.ok().and_then(Result::ok);
    Ok((accept.unwrap_or_else(latency_histogram), lateness))
}

/// The send stamp carried in a result frame's `"ref":"<k>:<stamp>"`.
pub(crate) fn stamp_of_ref(frame: &str) -> Option<u64> {
    let rest = &frame[frame.find(r#""ref":""#)? + 7..];
    let r = &rest[..rest.find('"')?];
    r.split_once(':')?.1.parse().ok()
}

async fn recipient(
    ws: Ws,
    clock: Clock,
    counters: Arc<Counters>,
    stop: CancellationToken,
) -> anyhow::Result<Histogram<u64>> {
    let (mut sink, mut stream) = ws.split();
    let mut hist = latency_histogram();
    let mut acks: Vec<String> = Vec::with_capacity(64);
    let mut tick = tokio::time::interval(Duration::from_millis(5));
    loop {
        tokio::select! {
            _ = stop.cancelled() => break,
            msg = stream.next() => {
                let Some(Ok(Message::Text(t))) = msg else {
                    if matches!(msg, None | Some(Err(_)) | Some(Ok(Message::Close(_)))) { break } else { continue }
                };
                if !t.as_str().starts_with(r#"{"op":"signal""#) {
                    continue;
                }
                let now = Instant::now();
                let frame: PushFrame = serde_json::from_str(t.as_str()).context("signal frame")?;
                let signal = frame.signal;
                if let Some(sent_us) = signal.payload.t {
                    if sent_us >= clock.us(clock.start) && sent_us < clock.us(clock.end) {
                        hist.record(clock.us(now).saturating_sub(sent_us).max(1))?;
                    }
                }
                if clock.in_window(now) {
                    counters.delivered.fetch_add(1, Ordering::Relaxed);
                }
                acks.push(signal.id.into_owned());
                if acks.len() >= 64 {
                    flush_acks(&mut sink, &mut acks).await?;
                }
            }
            _ = tick.tick(), if !acks.is_empty() => flush_acks(&mut sink, &mut acks).await?,
        }
    }
    if !acks.is_empty() {
        flush_acks(&mut sink, &mut acks).await?;
    }
    let _ = sink.close().await;
    Ok(hist)
}

/// The fields of a push frame the recipient reads (the rest is skipped, not built).
#[derive(serde::Deserialize)]
struct PushFrame<'a> {
    #[serde(borrow)]
    signal: PushedSignal<'a>,
}

#[derive(serde::Deserialize)]
struct PushedSignal<'a> {
    #[serde(borrow)]
    id: std::borrow::Cow<'a, str>,
    #[serde(default)]
    payload: StampedPayload,
}

#[derive(serde::Deserialize, Default)]
struct StampedPayload {
    t: Option<u64>,
}

pub(crate) async fn flush_acks(
    sink: &mut futures::stream::SplitSink<Ws, Message>,
    acks: &mut Vec<String>,
) -> anyhow::Result<()> {
    let frame = serde_json::json!({"op": "ack", "signal_ids": std::mem::take(acks)}).to_string();
    sink.send(Message::text(frame)).await.context("ack frame")
}
