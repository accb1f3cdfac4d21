//! `bench`: reproducible signalbus benchmarks. `cargo run --release -p bench -- <scenario>`
//! starts its own bus in this process (private nats-server + fresh PostgreSQL database, or
//! embedded with `--embedded`) or targets `--url`, drives one workload and prints one JSON line
//! of results followed by a short human summary. Scenarios: throughput, latency, connections,
//! memory, sweeper, rebuild, projector, peer, directives, fanout, failover, schedule, waiters, loads (see
//! `docs/performance.md`).
//!
//! Deliberately no pass/fail thresholds: targets are ratios and budgets read off the output,
//! never asserted, because a shared machine makes timed assertions flaky.

// The in-process bus gets the allocator the `signalbus` binary ships with, so the numbers are
// the shipped binary's (see docs/performance.md, "Allocator"); counted in a build with
// `--features count-allocs` (`allocs.rs`).
#[global_allocator]
static GLOBAL: allocs::Global = allocs::global();

mod allocs;
mod args;
mod batches;
mod bed;
mod client;
mod drive;
mod kept;
mod lag;
mod pacer;
mod peer;
mod raw;
mod report;
mod scenario;

use anyhow::bail;
use clap::parser::ValueSource;
use clap::{CommandFactory, FromArgMatches};
use serde_json::json;
use tracing_subscriber::prelude::*;

use crate::args::Args;

fn main() -> anyhow::Result<()> {
    let matches = Args::command().get_matches();
    let mut args = Args::from_arg_matches(&matches)?;
    if matches!(args.scenario.as_str(), "directives" | "fanout")
        && matches.value_source("duration") == Some(ValueSource::DefaultValue)
    {
        args.duration = args::DEFAULT_PHASE;
    }
    // `failover` always runs on the 3-node cluster: say so in its parameters.
    if args.scenario == "failover" {
        args.nats = bed::NatsChoice::Cluster;
    }
    if args.scenario == "projector" && matches.value_source("count") == Some(ValueSource::DefaultValue) {
        args.count = args::PROJECTOR_COUNT;
    }
    if args.scenario == "schedule" && matches.value_source("count") == Some(ValueSource::DefaultValue) {
        args.count = args::DEFAULT_SCHEDULE_COUNT;
    }
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("error"));
    tracing_subscriber::registry()
        .with(tracing_subscriber::fmt::layer().with_writer(std::io::stderr).with_filter(filter))
        .with(batches::layer())
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
    if args.scenario == "_wait" {
        return scenario::waiters::hold(&args).await;
    }
    let load_before = report::loadavg();
    let outcome = match args.scenario.as_str() {
        "throughput" => scenario::traffic::throughput(&args).await?,
        "latency" => scenario::traffic::latency(&args).await?,
        "connections" => scenario::connections::run(&args).await?,
        "memory" => scenario::memory::run(&args).await?,
        "sweeper" => scenario::sweeper::run(&args).await?,
        "rebuild" => scenario::rebuild::run(&args).await?,
        "projector" => scenario::projector::run(&args).await?,
        "peer" => scenario::peer::run(&args).await?,
        "directives" => scenario::directives::run(&args).await?,
        "fanout" => scenario::fanout::run(&args).await?,
        "failover" => scenario::failover::run(&args).await?,
        "schedule" => scenario::schedule::run(&args).await?,
        "waiters" => scenario::waiters::run(&args).await?,
        "loads" => scenario::loads::run(&args).await?,
        other => {
            bail!(
                "unknown scenario {other:?}: throughput, latency, connections, memory, sweeper, rebuild, projector, \
                 peer, directives, fanout, failover, schedule or waiters"
            )
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
        "issuers": args.issuers,
        "workers": args.workers,
        "fanout_senders": args.fanout_senders,
        "group_sizes": args.group_sizes,
        "kills": args.kills,
        "lead_s": args.lead.map(|d| d.as_secs_f64()),
        "restart_count": args.restart_count,
        "waiters": args.waiters,
        "wakes": args.wakes,
    });
    report::print(&args.scenario, params, report::machine(load_before), &outcome);
    Ok(())
}
