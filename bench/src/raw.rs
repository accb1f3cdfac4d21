//! The raw JetStream baseline: how fast one client can append to a file-backed stream on the
//! same nats-server with pipelined async publishes (a window of acks outstanding), no bus in
//! between. `throughput` divides the bus's events/s by this.
//!
//! Deliberately the plainest fast client: no `Nats-Msg-Id`, no expected-sequence headers, no
//! decoding — the upper bound any bus on this server could reach, not a like-for-like bus.
//!
//! `paced_latency` is the other baseline, for `latency`: appends shaped like a send's
//! (`Nats-Msg-Id`, a compare-and-set on a fresh subject, into a stream with the bus's
//! per-subject limit) at a fixed rate, each timed from its
//! scheduled instant to its ack — what the stream alone gives at the rate the bus appended.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use std::sync::{Arc, Mutex};

use anyhow::Context;
use async_nats::jetstream::context::Publish;
use async_nats::jetstream::{self, stream};
use hdrhistogram::Histogram;

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

/// A fresh file stream `BENCHRAW…` on the server (`replicas` of it), and its subject prefix.
/// `shaped_like_the_bus`: with the bus's stream's per-subject limit (one nothing reaches, for the
/// 4 MB message blocks it brings; `bus::log::jetstream`'s `PER_SUBJECT_LIMIT`).
async fn raw_stream(
    js: &jetstream::Context,
    replicas: usize,
    shaped_like_the_bus: bool,
) -> anyhow::Result<(String, String)> {
    let name = format!("BENCHRAW{}", &uuid::Uuid::new_v4().simple().to_string()[..8]);
    let prefix = name.to_lowercase();
    js.get_or_create_stream(stream::Config {
        name: name.clone(),
        subjects: vec![format!("{prefix}.>")],
        storage: stream::StorageType::File,
        num_replicas: replicas.max(1),
        duplicate_window: Duration::from_secs(120),
        max_messages_per_subject: if shaped_like_the_bus { i64::MAX } else { 0 },
        ..Default::default()
    })
    .await
    .context("create raw stream")?;
    Ok((name, prefix))
}

/// Appends `rate` messages/s for `duration`, each with its own `Nats-Msg-Id` and the condition
/// that its (fresh) subject is empty, as a send's `signal.sent` is; returns each append's time
/// from its scheduled instant to its ack, in µs. With `tail`, a pull consumer on a connection
/// of its own reads every message back meanwhile, as the bus's shared tail does.
pub async fn paced_latency(
    nats_url: &str,
    payload_bytes: usize,
    rate: f64,
    duration: Duration,
    replicas: usize,
    tail: bool,
) -> anyhow::Result<Histogram<u64>> {
    let client = async_nats::connect(nats_url).await.context("connect to nats")?;
    let js = jetstream::new(client);
    let (name, prefix) = raw_stream(&js, replicas, true).await?;
    let reader = match tail {
        true => Some(tokio::spawn(read_all(nats_url.to_string(), name.clone()))),
        false => None,
    };
    let payload = bytes::Bytes::from(vec![b'x'; payload_bytes.max(1)]);
    let hist = Arc::new(Mutex::new(crate::report::latency_histogram()));
    let mut acks = tokio::task::JoinSet::new();
    let start = tokio::time::Instant::now();
    for k in 0u64.. {
        let due = start + Duration::from_secs_f64(k as f64 / rate.max(1.0));
        if due >= start + duration {
            break;
        }
        crate::pacer::sleep_until(due).await;
        let id = uuid::Uuid::new_v4();
        let publish =
            Publish::build().payload(payload.clone()).message_id(id.to_string()).expected_last_subject_sequence(0);
        let ack = js.send_publish(format!("{prefix}.default.signal.{id}"), publish).await.context("raw publish")?;
        let hist = hist.clone();
        acks.spawn(async move {
            ack.await.context("raw publish ack")?;
            let us = due.elapsed().as_micros() as u64;
            hist.lock().expect("raw latency lock").saturating_record(us.max(1));
            anyhow::Ok(())
        });
        while let Some(done) = acks.try_join_next() {
            done??;
        }
    }
    while let Some(done) = acks.join_next().await {
        done??;
    }
    if let Some(reader) = reader {
        reader.abort();
    }
    let _ = js.delete_stream(&name).await;
    let h = hist.lock().expect("raw latency lock").clone();
    Ok(h)
}

/// Reads `stream` from its next message on, forever, the way the bus's tail does (an ephemeral
/// pull consumer, no acks, pulls of up to 4,096 messages).
async fn read_all(nats_url: String, stream: String) -> anyhow::Result<()> {
    use async_nats::jetstream::consumer::{pull, AckPolicy, DeliverPolicy};
    use futures::StreamExt;
    let js = jetstream::new(async_nats::connect(&nats_url).await.context("connect to nats")?);
    let config = pull::Config {
        deliver_policy: DeliverPolicy::New,
        ack_policy: AckPolicy::None,
        memory_storage: true,
        ..Default::default()
    };
    let consumer = js.create_consumer_on_stream(config, stream.as_str()).await.context("raw tail consumer")?;
    let mut messages = consumer
        .stream()
        .max_messages_per_batch(4096)
        .expires(Duration::from_secs(2))
        .messages()
        .await
        .context("raw tail")?;
    while let Some(msg) = messages.next().await {
        drop(msg.context("raw tail message")?);
    }
    Ok(())
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
    let (name, prefix) = raw_stream(&js, replicas, false).await?;
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
