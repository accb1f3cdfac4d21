//! `bench`: reproducible signalbus benchmarks. `cargo run --release -p bench -- <scenario>`
//! starts its own bus in this process (private nats-server + fresh PostgreSQL database, or
//! embedded with `--embedded`) or targets `--url`, drives one workload and prints one JSON line
//! of results followed by a short human summary. Scenarios: throughput, latency, connections,
//! memory, sweeper, rebuild, peer (see `docs/performance.md`).
//!
//! Deliberately no pass/fail thresholds: targets are ratios and budgets read off the output,
//! never asserted, because a shared machine makes timed assertions flaky.

// The in-process bus gets the allocator the `signalbus` binary ships with, so the numbers are
// the shipped binary's; see docs/performance.md, "Allocator".
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

mod bed;
mod client;
mod drive;
mod lag;
mod peer;
mod raw;
mod report;
mod scenario;

use std::time::Duration;

use anyhow::bail;
use clap::Parser;
use serde_json::json;

#[derive(Debug, Clone, Parser)]
#[command(name = "bench", about = "signalbus benchmarks")]
pub struct Args {
    /// throughput | latency | connections | memory | sweeper | rebuild | peer
    pub scenario: String,
    /// Measurement window.
    #[arg(long, default_value = "30s", value_parser = humantime::parse_duration)]
    pub duration: Duration,
    /// Traffic before the window that is not measured.
    #[arg(long, default_value = "3s", value_parser = humantime::parse_duration)]
    pub warmup: Duration,
    /// Target an external bus instead of starting one (throughput, latency, connections).
    #[arg(long)]
    pub url: Option<String>,
    #[arg(long, env = "SIGNALBUS_ADMIN_TOKEN")]
    pub admin_token: Option<String>,
    /// With `--url`: the bus's NATS, for the raw baseline of `throughput`.
    #[arg(long)]
    pub nats_url: Option<String>,
    /// With `--url`: the bus process, for the RSS of `connections`.
    #[arg(long)]
    pub bus_pid: Option<u32>,
    /// Run the bus embedded (SQLite) instead of on NATS + PostgreSQL.
    #[arg(long)]
    pub embedded: bool,
    /// The in-process bus's NATS: Debian's 2.9.10, the current release, or a 3-node cluster of
    /// the current release with the stream at 3 replicas.
    #[arg(long, value_enum, default_value = "debian")]
    pub nats: bed::NatsChoice,
    /// `throughput`: run distributed, then embedded, and report embedded ÷ distributed.
    #[arg(long)]
    pub compare_embedded: bool,
    /// Sender sessions.
    #[arg(long, default_value_t = 16)]
    pub senders: usize,
    /// Recipient sessions.
    #[arg(long, default_value_t = 16)]
    pub recipients: usize,
    /// Sends outstanding per sender session (throughput).
    #[arg(long, default_value_t = 8)]
    pub window: usize,
    /// Offered signals/s (latency).
    #[arg(long, default_value_t = 5000.0)]
    pub rate: f64,
    /// Encoded JSON payload bytes per signal.
    #[arg(long, default_value_t = 256)]
    pub payload_bytes: usize,
    /// Publish acks outstanding in the raw JetStream baseline.
    #[arg(long, default_value_t = 256)]
    pub raw_window: usize,
    /// Idle sessions (connections).
    #[arg(long, default_value_t = 10_000)]
    pub sessions: usize,
    /// Signals (sweeper) or events (rebuild).
    #[arg(long, default_value_t = 1_000_000)]
    pub count: usize,
    /// Concurrent appends while preparing sweeper and rebuild data.
    #[arg(long, default_value_t = 256)]
    pub append_concurrency: usize,
    /// Ack frames of 1,000 random ids one session sends (memory).
    #[arg(long, default_value_t = 200)]
    pub ack_frames: usize,
    /// Plugin facts of ~1 MB read back (memory).
    #[arg(long, default_value_t = 64)]
    pub facts: usize,
    /// Concurrent readers paging through them with `limit=1000` (memory).
    #[arg(long, default_value_t = 4)]
    pub readers: usize,
    /// Sessions that never read, pushed to until closed with 1013 (memory).
    #[arg(long, default_value_t = 8)]
    pub slow_sessions: usize,
    /// Sessions that each announce a frame of 1 MiB − 1 and send one byte of it (memory).
    #[arg(long, default_value_t = 1000)]
    pub announce_sessions: usize,
    /// Run only this phase of `memory` (ack_flood, fact_reads, slow_consumers,
    /// announced_frames) in this process.
    #[arg(long)]
    pub memory_phase: Option<String>,
    /// `peer`: the RabbitMQ to compare with.
    #[arg(long, default_value = "amqp://guest:guest@127.0.0.1:5672/%2f")]
    pub amqp_url: String,
    /// `peer`: both systems at this fixed offered rate (signals/s) instead of flat out.
    #[arg(long)]
    pub latency_rate: Option<f64>,
    /// `peer`: rounds of RabbitMQ then signalbus, interleaved so the machine's noise hits both.
    #[arg(long, default_value_t = 1)]
    pub rounds: usize,
    /// `peer`: unacked messages RabbitMQ pushes to a recipient before its acks.
    #[arg(long, default_value_t = 256)]
    pub prefetch: u16,
    /// Internal: the child process of `connections` that holds the sessions.
    #[arg(long, hide = true)]
    pub tokens_file: Option<std::path::PathBuf>,
    #[arg(long, hide = true)]
    pub ws_url: Option<String>,
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("error")),
        )
        .with_writer(std::io::stderr)
        .init();
    // 10,000 sessions need 10,000 descriptors on each side; the hard limit is the ceiling.
    if let Err(e) = rlimit::increase_nofile_limit(u64::MAX) {
        eprintln!("bench: cannot raise the open-files limit: {e}");
    }
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    rt.block_on(run(args))
}

async fn run(args: Args) -> anyhow::Result<()> {
    if args.scenario == "_hold" {
        return scenario::connections::hold(&args).await;
    }
    let load_before = report::loadavg();
    let outcome = match args.scenario.as_str() {
        "throughput" => scenario::traffic::throughput(&args).await?,
        "latency" => scenario::traffic::latency(&args).await?,
        "connections" => scenario::connections::run(&args).await?,
        "memory" => scenario::memory::run(&args).await?,
        "sweeper" => scenario::sweeper::run(&args).await?,
        "rebuild" => scenario::rebuild::run(&args).await?,
        "peer" => scenario::peer::run(&args).await?,
        other => {
            bail!("unknown scenario {other:?}: throughput, latency, connections, memory, sweeper, rebuild or peer")
        }
    };
    let params = json!({
        "duration_s": args.duration.as_secs_f64(),
        "warmup_s": args.warmup.as_secs_f64(),
        "senders": args.senders,
        "recipients": args.recipients,
        "window": args.window,
        "rate": args.rate,
        "payload_bytes": args.payload_bytes,
        "sessions": args.sessions,
        "count": args.count,
        "ack_frames": args.ack_frames,
        "facts": args.facts,
        "readers": args.readers,
        "slow_sessions": args.slow_sessions,
        "announce_sessions": args.announce_sessions,
        "embedded": args.embedded,
        "nats": format!("{:?}", args.nats).to_lowercase(),
        "compare_embedded": args.compare_embedded,
        "url": args.url,
        "latency_rate": args.latency_rate,
        "rounds": args.rounds,
        "prefetch": args.prefetch,
    });
    report::print(&args.scenario, params, report::machine(load_before), &outcome);
    Ok(())
}
