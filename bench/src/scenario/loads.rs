//! `loads`: what reading one signal back costs on a long stream — every recall by id, HTTP ack
//! of another session's delivery and expiry without a hint pays it (`SignalStore::load`).
//! `--count` signals (default 1,000,000) are appended as a history and, `AFTER` later (past
//! the marks' clock margin, as any signal sent minutes after the stream's start is), `LOADED`
//! more; those are then read `PASSES` rounds of the three ways in turn, one read at a time: the subject
//! walked from sequence 1 (every load before this), `SignalStore::load` on the log that sent
//! them (it knows where each subject begins: `firsts.rs`), and `load` on a log opened afterwards
//! (marks from probing the stream's history: `marks.rs`). Reported: each way's latency and the
//! nats-server's CPU per read.
//!
//! Deliberately no gateway, projector or PostgreSQL: the stream's answer is the whole cost.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use async_nats::jetstream::stream::DirectGetErrorKind;
use bus::event::Entity;
use bus::log::jetstream::{JetStreamConfig, JetStreamLog};
use bus::log::SharedLog;
use bus::store::SignalStore;
use chrono::Utc;
use futures::StreamExt;
use hdrhistogram::Histogram;
use serde_json::json;
use testkit::nats::NatsServer;
use testkit::NatsVersion;
use uuid::Uuid;

use crate::args::Args;
use crate::bed::NatsChoice;
use crate::report::{cpu_ticks, latency_histogram, latency_json, per_sec, round, Outcome, TICKS_PER_S};
use crate::scenario::sweeper::send_at;

const TENANT: &str = "default";
/// Signals appended after the history and then read back.
const LOADED: usize = 500;
/// Reads of each loaded signal per way (the server's CPU is counted in 10 ms ticks).
const PASSES: usize = 4;
/// How long after the history the loaded signals are sent: past the marks' 10 s clock margin.
const AFTER: Duration = Duration::from_secs(11);
/// A server using at most this many CPU ticks (10 ms) in a second counts as quiet.
const QUIET_TICKS: u64 = 2;
/// The longest wait for a quiet server before the reads are measured anyway.
const QUIET_WITHIN: Duration = Duration::from_secs(180);
/// How long a freshly opened log is given to probe the stream's history.
const PROBE_WAIT: Duration = Duration::from_secs(5);

pub async fn run(args: &Args) -> anyhow::Result<Outcome> {
    if args.url.is_some() || args.embedded {
        bail!("loads runs its own nats-server; --url and --embedded are not supported");
    }
    let version = match args.nats {
        NatsChoice::Debian => NatsVersion::Debian,
        NatsChoice::Current => NatsVersion::Current,
        NatsChoice::Cluster => bail!("loads runs on one server"),
    };
    let server = NatsServer::start_version(version).await;
    let config = JetStreamConfig::default();
    let config_name = config.stream.clone();
    let writer: SharedLog = Arc::new(JetStreamLog::connect(&server.url(), config.clone()).await.context("jetstream")?);
    let store = SignalStore::new(writer.clone());

    let t = Instant::now();
    append(&store, 0..args.count, args.append_concurrency).await?;
    let history = t.elapsed();
    eprintln!("bench: {} signals of history appended in {history:?}", args.count);
    tokio::time::sleep(AFTER).await;
    let loaded = append(&store, args.count..args.count + LOADED, 1).await?;
    let reader: SharedLog = Arc::new(JetStreamLog::connect(&server.url(), config).await.context("jetstream")?);
    tokio::time::sleep(PROBE_WAIT).await;
    let pid = server.pid();
    let quiet_after = wait_quiet(pid).await;
    let client = async_nats::connect(server.url()).await.context("connect")?;
    let stream = async_nats::jetstream::new(client).get_stream(&config_name).await.context("stream")?;
    let ways = [
        Way::FromStart(Box::new(stream), writer.subjects().clone()),
        Way::Load(store.clone()),
        Way::Load(SignalStore::new(reader)),
    ];
    // Rounds of the three ways in turn, so a drift of the server (a block cache filling, a
    // flush) is billed to all of them alike.
    let mut measured: Vec<(Histogram<u64>, u64, u64)> = ways.iter().map(|_| (latency_histogram(), 0, 0)).collect();
    for _ in 0..PASSES {
        for (way, (h, ticks, failed)) in ways.iter().zip(measured.iter_mut()) {
            let before = cpu_ticks(pid);
            for id in &loaded {
                let started = Instant::now();
                match way.read(*id).await {
                    Ok(found) => record(h, started, found)?,
                    // A read the server did not answer in time (a walk over cold blocks):
                    // counted, not measured, and the next read goes on.
                    Err(e) => {
                        eprintln!("bench: a read failed after {:?}: {e}", started.elapsed());
                        *failed += 1;
                    }
                }
            }
            *ticks += cpu_ticks(pid).zip(before).map_or(0, |(b, a)| b - a);
        }
    }
    let reads = (LOADED * PASSES) as f64;
    let server_ms_per_read = |ticks: u64| round(ticks as f64 / TICKS_PER_S * 1000.0 / reads, 3);
    let failed: Vec<u64> = measured.iter().map(|(_, _, f)| *f).collect();
    let [(from_start, from_start_cpu, _), (writer, writer_cpu, _), (other, other_cpu, _)] =
        <[(Histogram<u64>, u64, u64); 3]>::try_from(measured).map_err(|_| anyhow::anyhow!("three ways"))?;
    let (from_start_cpu, writer_cpu, other_cpu) =
        (server_ms_per_read(from_start_cpu), server_ms_per_read(writer_cpu), server_ms_per_read(other_cpu));

    let p50 = |h: &Histogram<u64>| h.value_at_quantile(0.5).max(1) as f64;
    let results = json!({
        "history_signals": args.count,
        "history_append_per_s": per_sec(args.count as u64, history),
        "reads_per_way": reads,
        "server_quiet_after_s": quiet_after.as_secs(),
        "from_start": latency_json(&from_start),
        "load_writer": latency_json(&writer),
        "load_other": latency_json(&other),
        "failed_reads": {"from_start": failed[0], "writer": failed[1], "other": failed[2]},
        "server_cpu_ms_per_read": {"from_start": from_start_cpu, "writer": writer_cpu, "other": other_cpu},
        "speedup_p50_writer": (p50(&from_start) / p50(&writer) * 10.0).round() / 10.0,
        "speedup_p50_other": (p50(&from_start) / p50(&other) * 10.0).round() / 10.0,
    });
    let ms = |h: &Histogram<u64>, q: f64| h.value_at_quantile(q) as f64 / 1000.0;
    let summary = vec![
        format!(
            "{LOADED} signals read back {PASSES} times each way after a history of {} signals; failed reads {failed:?}",
            args.count
        ),
        format!(
            "walked from sequence 1: p50 {:.2} / p99 {:.2} ms, server CPU {from_start_cpu} ms per read",
            ms(&from_start, 0.5),
            ms(&from_start, 0.99)
        ),
        format!(
            "load on the log that sent them: p50 {:.2} / p99 {:.2} ms, server CPU {writer_cpu} ms per read",
            ms(&writer, 0.5),
            ms(&writer, 0.99)
        ),
        format!(
            "load on a log opened afterwards: p50 {:.2} / p99 {:.2} ms, server CPU {other_cpu} ms per read",
            ms(&other, 0.5),
            ms(&other, 0.99)
        ),
    ];
    Ok(Outcome { results, summary })
}

/// Sends signal `i` of `range` each, `concurrency` at a time; their ids in order.
async fn append(store: &SignalStore, range: std::ops::Range<usize>, concurrency: usize) -> anyhow::Result<Vec<Uuid>> {
    let now = Utc::now();
    let sent: Vec<anyhow::Result<Uuid>> = futures::stream::iter(range)
        .map(|i| {
            let store = store.clone();
            async move { send_at(&store, i, now, 24 * 3600).await }
        })
        .buffered(concurrency.max(1))
        .collect()
        .await;
    sent.into_iter().collect()
}

/// Waits until the server uses at most `QUIET_TICKS` of CPU in a second (after millions of
/// appends it flushes and indexes for a while, which would be billed to the reads), at most
/// `QUIET_WITHIN`; how long that took.
async fn wait_quiet(pid: Option<u32>) -> Duration {
    let started = Instant::now();
    while started.elapsed() < QUIET_WITHIN {
        let before = cpu_ticks(pid);
        tokio::time::sleep(Duration::from_secs(1)).await;
        if cpu_ticks(pid).zip(before).is_none_or(|(b, a)| b - a <= QUIET_TICKS) {
            break;
        }
    }
    started.elapsed()
}

/// One way of reading a signal back.
enum Way {
    /// Its subject walked from sequence 1 with direct gets, as every load read it before.
    FromStart(Box<async_nats::jetstream::stream::Stream>, bus::event::Subjects),
    /// `SignalStore::load`: from where the subject begins if the log knows, else from a mark.
    Load(SignalStore),
}

impl Way {
    /// How many events of the signal's were found (a load: 1 if its send was).
    async fn read(&self, id: Uuid) -> anyhow::Result<usize> {
        Ok(match self {
            Way::FromStart(stream, subjects) => {
                let subject = subjects.of(TENANT, Entity::Signal(id));
                let (mut from, mut found) = (1, 0);
                loop {
                    match stream.direct_get_next_for_subject(&subject, Some(from)).await {
                        Ok(msg) => {
                            let msg = async_nats::jetstream::message::StreamMessage::try_from(msg.message)
                                .map_err(|e| anyhow::anyhow!("a direct get's headers: {e}"))?;
                            from = msg.sequence + 1;
                            found += 1;
                        }
                        Err(e) if e.kind() == DirectGetErrorKind::NotFound => break found,
                        Err(e) => bail!("direct get: {e}"),
                    }
                }
            }
            Way::Load(store) => usize::from(store.load(TENANT, id).await?.0.sent.is_some()),
        })
    }
}

fn record(h: &mut Histogram<u64>, started: Instant, found: usize) -> anyhow::Result<()> {
    if found == 0 {
        bail!("a signal sent was not found");
    }
    h.record((started.elapsed().as_micros() as u64).max(1))?;
    Ok(())
}
