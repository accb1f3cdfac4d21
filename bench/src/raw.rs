//! The raw JetStream baseline: how fast one client can append to a file-backed stream on the
//! same nats-server with pipelined async publishes (a window of acks outstanding), no bus in
//! between. `throughput` divides the bus's events/s by this.
//!
//! Deliberately the plainest fast client: no `Nats-Msg-Id`, no expected-sequence headers, no
//! decoding — the upper bound any bus on this server could reach, not a like-for-like bus.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use anyhow::Context;
use async_nats::jetstream::{self, stream};

/// Messages and bytes stored in `stream` (to size the baseline's payload like the bus's events).
pub async fn stream_totals(nats_url: &str, stream: &str) -> anyhow::Result<(u64, u64)> {
    let client = async_nats::connect(nats_url).await.context("connect to nats")?;
    let js = jetstream::new(client);
    let mut s = js.get_stream(stream).await.context("get stream")?;
    let info = s.info().await.context("stream info")?;
    Ok((info.state.messages, info.state.bytes))
}

#[derive(Debug)]
pub struct RawResult {
    pub published: u64,
    pub elapsed: Duration,
}

impl RawResult {
    pub fn per_sec(&self) -> f64 {
        self.published as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }
}

/// Publishes `payload_bytes`-sized messages for `duration`, `window` acks outstanding, into a
/// fresh file stream `BENCHRAW`. Subjects change every 3 messages, as a signal's subject does
/// for its sent, delivered and acked events.
pub async fn publish_rate(
    nats_url: &str,
    payload_bytes: usize,
    duration: Duration,
    window: usize,
    replicas: usize,
) -> anyhow::Result<RawResult> {
    let client = async_nats::connect(nats_url).await.context("connect to nats")?;
    let js = jetstream::new(client);
    let name = format!("BENCHRAW{}", &uuid::Uuid::new_v4().simple().to_string()[..8]);
    let prefix = name.to_lowercase();
    js.get_or_create_stream(stream::Config {
        name: name.clone(),
        subjects: vec![format!("{prefix}.>")],
        storage: stream::StorageType::File,
        num_replicas: replicas.max(1),
        ..Default::default()
    })
    .await
    .context("create raw stream")?;
    let payload = bytes::Bytes::from(vec![b'x'; payload_bytes.max(1)]);
    let mut outstanding = VecDeque::with_capacity(window);
    let mut published = 0u64;
    let started = Instant::now();
    while started.elapsed() < duration {
        if outstanding.len() >= window {
            let ack: jetstream::context::PublishAckFuture = outstanding.pop_front().expect("non-empty");
            ack.await.context("raw publish ack")?;
            published += 1;
        }
        let subject = format!("{prefix}.default.sig.{}", (published + outstanding.len() as u64) / 3);
        outstanding.push_back(js.publish(subject, payload.clone()).await.context("raw publish")?);
    }
    while let Some(ack) = outstanding.pop_front() {
        ack.await.context("raw publish ack")?;
        published += 1;
    }
    let elapsed = started.elapsed();
    let _ = js.delete_stream(&name).await;
    Ok(RawResult { published, elapsed })
}
