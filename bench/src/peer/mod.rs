//! The RabbitMQ peer of `drive`: the same send → receive → ack workload, on RabbitMQ through
//! `lapin`, with the guarantees signalbus gives a signal — one durable queue per recipient,
//! persistent messages with a per-message TTL, publisher confirms (a send counts once the broker
//! confirmed it) and manual acks (batched like `drive`'s recipients: 64 or every 5 ms).
//!
//! Same shape as `drive`: M senders and N recipients, one connection each (as each signalbus
//! session is one WebSocket), round-robin addressing, the same JSON payload size stamped with
//! its send time (or its *scheduled* time when paced, so no coordinated omission), the same
//! warm-up and window.
//!
//! Deliberately no broker administration beyond declaring and deleting this run's queues: the
//! broker runs as installed (a tuned broker would measure something users do not run), and
//! `roles.rs` holds the per-connection loops.

mod roles;

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context};
use hdrhistogram::Histogram;
use lapin::options::{
    BasicConsumeOptions, BasicQosOptions, ConfirmSelectOptions, QueueDeclareOptions, QueueDeleteOptions,
};
use lapin::types::FieldTable;
use lapin::{Connection, ConnectionProperties};
use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;

use crate::drive::{padding, Clock, Counters, DriveConfig};
use crate::report::{latency_histogram, latency_json, per_sec};

/// What the peer measured, shaped like `drive::DriveResult`.
#[derive(Debug)]
pub struct PeerResult {
    /// Messages received by recipients inside the window.
    pub delivered: u64,
    /// Publishes confirmed (ack) and refused (nack) over the whole run.
    pub accepted: u64,
    pub refused: u64,
    /// Publish → receive.
    pub latency: Histogram<u64>,
    /// Publish → the broker's confirm (the accept path alone).
    pub accept_latency: Histogram<u64>,
    pub window: Duration,
}

impl PeerResult {
    pub fn delivered_per_s(&self) -> f64 {
        per_sec(self.delivered, self.window)
    }

    /// The same keys as a signalbus mode's JSON, so the two read side by side.
    pub fn json(&self) -> Value {
        json!({
            "mode": "rabbitmq",
            "delivered": self.delivered,
            "delivered_per_s": self.delivered_per_s(),
            "sends_accepted": self.accepted,
            "sends_refused": self.refused,
            "latency": latency_json(&self.latency),
            "accept_latency": latency_json(&self.accept_latency),
        })
    }
}

async fn connect(url: &str) -> lapin::Result<Connection> {
    Connection::connect(url, ConnectionProperties::default()).await
}

/// `url` without its password, for messages.
fn redact(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(s), Some(at)) if at > s => {
            let user = url[s + 3..at].split(':').next().unwrap_or_default();
            format!("{}{user}:***{}", &url[..s + 3], &url[at..])
        }
        _ => url.to_string(),
    }
}

/// Fails with how to start RabbitMQ when it does not answer at `url`.
pub async fn check_available(url: &str) -> anyhow::Result<()> {
    let why = match tokio::time::timeout(Duration::from_secs(5), connect(url)).await {
        Ok(Ok(conn)) => {
            let _ = conn.close(200, "bench: availability check".into()).await;
            return Ok(());
        }
        Ok(Err(e)) => e.to_string(),
        Err(_) => "no answer within 5 s".to_string(),
    };
    bail!(
        "RabbitMQ is not reachable at {} ({why}). `bench peer` needs it: start it with \
         `rabbitmq-server -detached && rabbitmqctl await_startup` (Debian package \
         `rabbitmq-server`; or `service rabbitmq-server start`), or point --amqp-url at one",
        redact(url)
    )
}

/// Runs the workload of `cfg` on the broker at `url`, `prefetch` unacked messages per recipient.
pub async fn run(url: &str, cfg: &DriveConfig, prefetch: u16) -> anyhow::Result<PeerResult> {
    let prefix = crate::client::run_prefix();
    let queues: Vec<String> = (0..cfg.recipients).map(|i| format!("{prefix}-r{i}")).collect();
    let admin = connect(url).await.context("amqp connect")?;
    let admin_ch = admin.create_channel().await?;
    for q in &queues {
        let durable = QueueDeclareOptions { durable: true, ..Default::default() };
        admin_ch.queue_declare(q.as_str().into(), durable, FieldTable::default()).await.context("queue declare")?;
    }

    let mut r_sides = Vec::new();
    for q in &queues {
        let conn = connect(url).await.context("amqp connect (recipient)")?;
        let ch = conn.create_channel().await?;
        ch.basic_qos(prefetch, BasicQosOptions::default()).await?;
        let consumer = ch
            .basic_consume(q.as_str().into(), "bench".into(), BasicConsumeOptions::default(), FieldTable::default())
            .await
            .context("basic consume")?;
        r_sides.push((conn, ch, consumer));
    }
    let mut s_sides = Vec::new();
    for _ in 0..cfg.senders {
        let conn = connect(url).await.context("amqp connect (sender)")?;
        let ch = conn.create_channel().await?;
        ch.confirm_select(ConfirmSelectOptions::default()).await?;
        s_sides.push((conn, ch));
    }
    // As `drive`: let the openings settle before the clock starts.
    tokio::time::sleep(Duration::from_millis(500)).await;

    let clock = Clock::from_now(cfg.warmup, cfg.duration);
    let counters = Arc::new(Counters::default());
    let stop = CancellationToken::new();
    let queues = Arc::new(queues);
    let pad = padding(cfg.payload_bytes);

    let mut conns = Vec::new();
    let mut receivers = Vec::new();
    for (conn, ch, consumer) in r_sides {
        receivers.push(tokio::spawn(roles::recipient(ch, consumer, clock, counters.clone(), stop.clone())));
        conns.push(conn);
    }
    let mut senders = Vec::new();
    for (i, (conn, ch)) in s_sides.into_iter().enumerate() {
        let s = roles::Sender { idx: i, cfg: cfg.clone(), queues: queues.clone(), pad: pad.clone() };
        senders.push(tokio::spawn(roles::sender(ch, s, clock, counters.clone())));
        conns.push(conn);
    }

    let mut accept_latency = latency_histogram();
    for s in senders {
        accept_latency.add(s.await.context("sender task")?.context("sender")?)?;
    }
    // As `drive`: in-flight messages still complete the latency histogram, not the count.
    tokio::time::sleep(Duration::from_secs(1)).await;
    stop.cancel();
    let mut latency = latency_histogram();
    for r in receivers {
        latency.add(r.await.context("recipient task")?.context("recipient")?)?;
    }
    for q in queues.iter() {
        if let Err(e) = admin_ch.queue_delete(q.as_str().into(), QueueDeleteOptions::default()).await {
            tracing::warn!(queue = %q, error = %e, "could not delete the run's queue");
        }
    }
    for c in conns.iter().chain(std::iter::once(&admin)) {
        let _ = c.close(200, "bench done".into()).await;
    }
    Ok(PeerResult {
        delivered: counters.delivered.load(Ordering::Relaxed),
        accepted: counters.accepted.load(Ordering::Relaxed),
        refused: counters.refused.load(Ordering::Relaxed),
        latency,
        accept_latency,
        window: cfg.duration,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redact_hides_the_password_only() {
        assert_eq!(redact("amqp://guest:guest@127.0.0.1:5672/%2f"), "amqp://guest:***@127.0.0.1:5672/%2f");
        assert_eq!(redact("amqp://127.0.0.1:5672"), "amqp://127.0.0.1:5672");
    }
}
