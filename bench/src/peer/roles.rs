//! The two loops of the RabbitMQ peer, one per connection: a sender publishing persistent,
//! TTL'd messages with `window` confirms outstanding (paced or not, like `drive`'s senders), and
//! a recipient consuming its queue, recording publish → receive latency and acking in batches.
//!
//! Deliberately mirrors `drive.rs` line for line where it can (schedule, stamps, ack batching),
//! so a difference in the numbers is the broker's, not the harness's.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use futures::stream::FuturesUnordered;
use futures::StreamExt;
use hdrhistogram::Histogram;
use lapin::options::{BasicAckOptions, BasicPublishOptions};
use lapin::{BasicProperties, Channel, Consumer, PublisherConfirm};
use serde_json::Value;
use tokio::sync::{mpsc, Semaphore};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::drive::DriveConfig;
use crate::drive::{Clock, Counters};
use crate::report::latency_histogram;

/// The TTL signalbus's catalog gives `StatusUpdate` (24 h), as RabbitMQ's per-message
/// `expiration` (milliseconds, as a string).
pub const TTL_MS: &str = "86400000";

/// Ack a recipient's deliveries at this many, or every `ACK_EVERY` (as `drive`'s recipients).
const ACK_BATCH: usize = 64;
const ACK_EVERY: Duration = Duration::from_millis(5);

/// One sender's share of the workload.
pub struct Sender {
    pub idx: usize,
    pub cfg: DriveConfig,
    pub queues: Arc<Vec<String>>,
    pub pad: Arc<str>,
}

/// Publishes until the window closes; returns the publish → confirm histogram.
pub async fn sender(ch: Channel, s: Sender, clock: Clock, counters: Arc<Counters>) -> anyhow::Result<Histogram<u64>> {
    let cfg = &s.cfg;
    let window = Arc::new(Semaphore::new(cfg.window));
    // Confirms are awaited apart from publishing (as `drive` reads result frames apart from
    // sending), in whatever order the broker gives them.
    let (tx, rx) = mpsc::unbounded_channel::<(u64, PublisherConfirm)>();
    let confirmer = tokio::spawn(confirms(rx, window.clone(), clock, counters));
    // Persistent (delivery mode 2), with the signal's TTL: what signalbus stores for a signal.
    let props = BasicProperties::default()
        .with_delivery_mode(2)
        .with_expiration(TTL_MS.into())
        .with_content_type("application/json".into());
    let m = cfg.senders as u64;
    let mut k: u64 = 0;
    while let Some(stamp) = clock.next_send(cfg.rate, cfg.senders, s.idx, k, &window).await? {
        let queue = &s.queues[((k * m + s.idx as u64) % s.queues.len() as u64) as usize];
        let body = format!(r#"{{"t":{stamp},"pad":"{}"}}"#, s.pad);
        let confirm = ch
            .basic_publish(
                "".into(),
                queue.as_str().into(),
                BasicPublishOptions::default(),
                body.as_bytes(),
                props.clone(),
            )
            .await
            .context("basic publish")?;
        if tx.send((stamp, confirm)).is_err() {
            anyhow::bail!("confirm task ended early");
        }
        k += 1;
    }
    // Wait for the outstanding confirms, so the broker is not mid-publish when the next phase
    // starts.
    let _ = tokio::time::timeout(Duration::from_secs(10), window.acquire_many(cfg.window as u32)).await;
    drop(tx);
    let accept = tokio::time::timeout(Duration::from_secs(5), confirmer).await;
    Ok(accept.ok().and_then(Result::ok).unwrap_or_else(latency_histogram))
}

/// Awaits each publish's confirm: counts it (ack accepted, nack refused), frees its window slot
/// and records publish → confirm for stamps inside the window.
async fn confirms(
    mut rx: mpsc::UnboundedReceiver<(u64, PublisherConfirm)>,
    window: Arc<Semaphore>,
    clock: Clock,
    counters: Arc<Counters>,
) -> Histogram<u64> {
    let mut accept = latency_histogram();
    let mut pending = FuturesUnordered::new();
    let mut open = true;
    loop {
        tokio::select! {
            m = rx.recv(), if open => match m {
                Some((stamp, c)) => pending.push(async move { (stamp, c.await) }),
                None => open = false,
            },
            Some((stamp, confirmed)) = pending.next(), if !pending.is_empty() => {
                let ok = matches!(&confirmed, Ok(c) if c.is_ack());
                if !ok {
                    tracing::debug!(?confirmed, "publish not confirmed");
                }
                let c = if ok { &counters.accepted } else { &counters.refused };
                c.fetch_add(1, Ordering::Relaxed);
                window.add_permits(1);
                if clock.stamp_in_window(stamp) {
                    let _ = accept.record(clock.us(Instant::now()).saturating_sub(stamp).max(1));
                }
            }
            else => break,
        }
    }
    accept
}

/// Consumes one queue until `stop`; returns the publish → receive histogram.
pub async fn recipient(
    ch: Channel,
    mut consumer: Consumer,
    clock: Clock,
    counters: Arc<Counters>,
    stop: CancellationToken,
) -> anyhow::Result<Histogram<u64>> {
    let mut hist = latency_histogram();
    let mut last_tag: Option<u64> = None;
    let mut unacked = 0usize;
    let mut tick = tokio::time::interval(ACK_EVERY);
    loop {
        tokio::select! {
            _ = stop.cancelled() => break,
            d = consumer.next() => {
                let Some(Ok(d)) = d else { break };
                let now = Instant::now();
                // Decoded whole, as `drive`'s recipients decode each signal frame.
                let v: Value = serde_json::from_slice(&d.data).context("message body")?;
                if let Some(sent_us) = v["t"].as_u64() {
                    if clock.stamp_in_window(sent_us) {
                        hist.record(clock.us(now).saturating_sub(sent_us).max(1))?;
                    }
                }
                if clock.in_window(now) {
                    counters.delivered.fetch_add(1, Ordering::Relaxed);
                }
                last_tag = Some(d.delivery_tag);
                unacked += 1;
                if unacked >= ACK_BATCH {
                    ack_up_to(&ch, &mut last_tag, &mut unacked).await?;
                }
            }
            _ = tick.tick(), if unacked > 0 => ack_up_to(&ch, &mut last_tag, &mut unacked).await?,
        }
    }
    if unacked > 0 {
        ack_up_to(&ch, &mut last_tag, &mut unacked).await?;
    }
    Ok(hist)
}

/// One `basic.ack` with `multiple`: everything delivered on this channel up to the last tag.
async fn ack_up_to(ch: &Channel, last_tag: &mut Option<u64>, unacked: &mut usize) -> anyhow::Result<()> {
    if let Some(tag) = last_tag.take() {
        ch.basic_ack(tag, BasicAckOptions { multiple: true }).await.context("basic ack")?;
    }
    *unacked = 0;
    Ok(())
}
