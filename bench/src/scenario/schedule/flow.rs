//! The two sides of `schedule`'s traffic: sender sessions that send scheduled async signals
//! with a window of sends outstanding, each `deliver_at` given by a `Plan`, and recipient
//! sessions that record, for every push, how long after its `deliver_at` it arrived (by the
//! wall clock, which the bus's releases follow too), count the early and the repeated ones in a
//! shared `Tally`, and ack in batches as `throughput`'s recipients do.
//!
//! Deliberately no orchestration (which phase, when to stop: `mod.rs`, `restart.rs`) and no
//! judgement: early pushes and duplicates are counted, never asserted.

use std::ops::Range;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::Context;
use chrono::{DateTime, Utc};
use futures::{SinkExt, StreamExt};
use hdrhistogram::Histogram;
use serde_json::Value;
use tokio::sync::Semaphore;
use tokio_tungstenite::tungstenite::Message;
use tokio_util::sync::CancellationToken;

use crate::client::Ws;
use crate::drive::{flush_acks, padding};

/// A µs histogram up to an hour: lateness after a restart (or a bus far behind) exceeds the
/// minute `report::latency_histogram` holds, and must not be clamped to it.
pub(super) fn lateness_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 3_600_000_000, 3).expect("valid histogram bounds")
}

/// Signal `k` of `count` (numbered from `first`) is due at `start + window × (k − first) / count`.
#[derive(Debug, Clone, Copy)]
pub(super) struct Plan {
    pub first: usize,
    pub count: usize,
    pub start: DateTime<Utc>,
    pub window: Duration,
    pub payload_bytes: usize,
}

impl Plan {
    /// The `deliver_at` of signal `k`, in whole milliseconds.
    pub fn due(&self, k: usize) -> DateTime<Utc> {
        let ms = self.window.as_millis() as u64 * (k - self.first) as u64 / self.count.max(1) as u64;
        self.start + chrono::Duration::milliseconds(ms as i64)
    }

    pub fn end(&self) -> DateTime<Utc> {
        self.start + chrono::Duration::from_std(self.window).unwrap_or_default()
    }

    pub fn range(&self) -> Range<usize> {
        self.first..self.first + self.count
    }
}

/// What every recipient and sender of a run counts; one slot per signal number `k`.
pub(super) struct Tally {
    seen: Vec<AtomicBool>,
    pub accepted: AtomicU64,
    pub refused: AtomicU64,
    /// Pushed before their `deliver_at` (must stay 0).
    pub early: AtomicU64,
    /// Pushes of a `k` already received (must stay 0 while every push is acked).
    pub duplicates: AtomicU64,
    /// Pushes marked `"redelivered": true`.
    pub redelivered: AtomicU64,
    /// The first refusal's error, to say why sends were refused.
    pub first_refusal: Mutex<Option<String>>,
}

impl Tally {
    pub fn new(slots: usize) -> Tally {
        Tally {
            seen: (0..slots).map(|_| AtomicBool::new(false)).collect(),
            accepted: AtomicU64::new(0),
            refused: AtomicU64::new(0),
            early: AtomicU64::new(0),
            duplicates: AtomicU64::new(0),
            redelivered: AtomicU64::new(0),
            first_refusal: Mutex::new(None),
        }
    }

    /// Distinct signals received among `range`.
    pub fn received_in(&self, range: Range<usize>) -> u64 {
        self.seen[range].iter().filter(|s| s.load(Ordering::Relaxed)).count() as u64
    }
}

/// One sender session: sends signals `plan.first + idx`, `+ senders`, … to `recipients`
/// round-robin, `window` outstanding, until its share of the plan is sent and answered.
pub(super) async fn sender(
    ws: Ws,
    idx: usize,
    senders: usize,
    window: usize,
    plan: Plan,
    recipients: Arc<Vec<String>>,
    tally: Arc<Tally>,
) -> anyhow::Result<()> {
    let (mut sink, mut stream) = ws.split();
    let permits = Arc::new(Semaphore::new(window));
    let reader = {
        let (permits, tally) = (permits.clone(), tally.clone());
        tokio::spawn(async move {
            while let Some(Ok(msg)) = stream.next().await {
                let Message::Text(t) = msg else { continue };
                let t = t.as_str();
                if !t.contains(r#""op":"result""#) {
                    continue;
                }
                if t.contains(r#""ok":true"#) {
                    tally.accepted.fetch_add(1, Ordering::Relaxed);
                } else {
                    tally.refused.fetch_add(1, Ordering::Relaxed);
                    tally.first_refusal.lock().expect("refusal lock").get_or_insert_with(|| t.to_string());
                }
                permits.add_permits(1);
            }
        })
    };
    let pad = padding(plan.payload_bytes);
    for k in plan.range().skip(idx).step_by(senders) {
        permits.acquire().await?.forget();
        let due = plan.due(k);
        let to = &recipients[k % recipients.len()];
        let frame = format!(
            r#"{{"op":"send","ref":"{k}","to":"{to}","type":"StatusUpdate","deliver_at":"{}","payload":{{"k":{k},"due_ms":{},"pad":"{pad}"}}}}"#,
            due.format("%Y-%m-%dT%H:%M:%S%.3fZ"),
            due.timestamp_millis()
        );
        sink.send(Message::text(frame)).await.context("send frame")?;
    }
    let all = tokio::time::timeout(Duration::from_secs(120), permits.acquire_many(window as u32)).await;
    all.context("results outstanding after 120 s")??.forget();
    let _ = sink.close().await;
    let _ = tokio::time::timeout(Duration::from_secs(5), reader).await;
    Ok(())
}

/// One recipient session until `stop` (or the bus closes it): records each push's lateness
/// (receive − `deliver_at`, µs) in its histogram and acks in batches (64 ids or 5 ms).
pub(super) async fn recipient(ws: Ws, tally: Arc<Tally>, stop: CancellationToken) -> anyhow::Result<Histogram<u64>> {
    let (mut sink, mut stream) = ws.split();
    let mut late = lateness_histogram();
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
                let now_us = Utc::now().timestamp_micros();
                let v: Value = serde_json::from_str(t.as_str()).context("signal frame")?;
                let signal = &v["signal"];
                note(&tally, signal, now_us, &mut late);
                if let Some(id) = signal["id"].as_str() {
                    acks.push(id.to_string());
                }
                if acks.len() >= 64 {
                    flush_acks(&mut sink, &mut acks).await?;
                }
            }
            _ = tick.tick(), if !acks.is_empty() => flush_acks(&mut sink, &mut acks).await?,
        }
    }
    if !acks.is_empty() {
        // The bus may have closed the session (a restart): the acks are then lost, and the
        // signals come again marked redelivered.
        let _ = flush_acks(&mut sink, &mut acks).await;
    }
    let _ = sink.close().await;
    Ok(late)
}

/// Counts one pushed signal received at `now_us` (unix µs).
fn note(tally: &Tally, signal: &Value, now_us: i64, late: &mut Histogram<u64>) {
    let payload = &signal["payload"];
    let (Some(k), Some(due_ms)) = (payload["k"].as_u64(), payload["due_ms"].as_i64()) else { return };
    let lateness = now_us - due_ms * 1000;
    if lateness < 0 {
        tally.early.fetch_add(1, Ordering::Relaxed);
    } else {
        late.saturating_record(lateness.max(1) as u64);
    }
    if signal["redelivered"].as_bool() == Some(true) {
        tally.redelivered.fetch_add(1, Ordering::Relaxed);
    }
    match tally.seen.get(k as usize) {
        Some(slot) if slot.swap(true, Ordering::Relaxed) => {
            tally.duplicates.fetch_add(1, Ordering::Relaxed);
        }
        _ => {}
    }
}
