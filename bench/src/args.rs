//! `Args`: the benchmark's command line — which scenario, its window and warm-up, and each
//! scenario's knobs.
//!
//! Deliberately only the options: `main.rs` parses them and picks the scenario, and each
//! scenario reads the fields it needs.

use std::time::Duration;

use clap::Parser;

use crate::bed;

/// `--count` of `schedule` when it is not given (the other scenarios' default is 1,000,000).
pub const DEFAULT_SCHEDULE_COUNT: usize = 100_000;

/// The measurement window of each phase of `directives` and `fanout` when `--duration` is not
/// given: they run two and three phases, and should take about a minute in all.
pub const DEFAULT_PHASE: Duration = Duration::from_secs(10);

/// Events `projector` appends when `--count` is not given: the live projector folds them
/// at a few ten thousand events/s, so the run takes well under a minute.
pub const PROJECTOR_COUNT: usize = 200_000;

#[derive(Debug, Clone, Parser)]
#[command(name = "bench", about = "signalbus benchmarks")]
pub struct Args {
    /// throughput | latency | connections | memory | sweeper | rebuild | projector | peer | directives | fanout |
    /// failover | schedule | waiters | loads
    pub scenario: String,
    /// Measurement window (of each phase, for `directives` and `fanout`, whose default is
    /// shorter: `DEFAULT_PHASE`).
    #[arg(long, default_value = "30s", value_parser = humantime::parse_duration)]
    pub duration: Duration,
    /// Traffic before the window that is not measured (`failover`: steady load before each kill).
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
    /// Signals (sweeper, loads, schedule; 100,000 for schedule when not given) or events (rebuild; projector,
    /// whose default is `PROJECTOR_COUNT`).
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
    /// `directives`: issuer sessions (and, beside them, the signal baseline's senders).
    #[arg(long, default_value_t = 4)]
    pub issuers: usize,
    /// `directives`: worker sessions, also the members of the group directives go to (and the
    /// signal baseline's recipients).
    #[arg(long, default_value_t = 4)]
    pub workers: usize,
    /// `fanout`: sender sessions.
    #[arg(long, default_value_t = 4)]
    pub fanout_senders: usize,
    /// `fanout`: the group sizes, one phase each (every member a connected session).
    #[arg(long, value_delimiter = ',', default_value = "10,100")]
    pub group_sizes: Vec<usize>,
    /// `failover`: how many times the node leading the stream is killed.
    #[arg(long, default_value_t = 6)]
    pub kills: usize,
    /// `schedule`: the deliver window (one minute) starts this long after the first send;
    /// default 15 s plus 1 ms per signal (sending at 1,000/s or faster ends before it).
    #[arg(long, value_parser = humantime::parse_duration)]
    pub lead: Option<Duration>,
    /// `schedule`: signals of the restart phase (0: skip it).
    #[arg(long, default_value_t = 10_000)]
    pub restart_count: usize,
    /// `waiters`: concurrent `GET /v1/inbox?wait=60` long-polls, one identity each.
    #[arg(long, default_value_t = 10_000)]
    pub waiters: usize,
    /// `waiters`: signals sent one at a time to different waiting identities, for the wake latency.
    #[arg(long, default_value_t = 100)]
    pub wakes: usize,
    /// Internal: the child process of `connections` that holds the sessions.
    /// `projector` and `rebuild`: the events appended first — `throughput` (the throughput
    /// scenario's sends, pushes and batched acks; `projector`'s default) or `mixed` (every kind
    /// of event, with session and agent churn; `rebuild`'s default).
    #[arg(long, value_enum)]
    pub mix: Option<Mix>,
    /// `projector`: the live projector's `max_batch` (its default when not given).
    #[arg(long)]
    pub max_batch: Option<usize>,
    #[arg(long, hide = true)]
    pub tokens_file: Option<std::path::PathBuf>,
    #[arg(long, hide = true)]
    pub ws_url: Option<String>,
}

/// Which events `projector` and `rebuild` append before they measure.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Mix {
    Throughput,
    Mixed,
}
