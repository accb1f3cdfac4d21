//! `sweeper`: an outage backlog. `--count` signals (default 1,000,000) are appended already
//! overdue, straight through `SignalStore::record_send` as the gateway would record them, the
//! projector catches up, and only then a sweeper starts: how fast does it expire the backlog,
//! and how far behind the read models fall.
//!
//! Deliberately no gateway: sessions and HTTP add nothing to this measurement. The stream is
//! the judge of progress (its sequence counts the `signal.expired` events), the sweeper's own
//! status fact is reported beside it.

use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use bus::catalog::TypeTable;
use bus::event::{Entity, EventBody, RecipientState};
use bus::send::{decide_send, RecipientView, SendDecision, SendLimits, SendRequest};
use bus::store::SignalStore;
use chrono::{DateTime, Utc};
use futures::StreamExt;
use serde_json::{json, Value};

use crate::args::Args;
use crate::bed::Backends;
use crate::report::{per_sec, round, Outcome};

const TENANT: &str = "default";

/// How long ago the backlog's signals expired (an outage of an hour).
const OVERDUE_BY_MINUTES: i64 = 60;

pub async fn run(args: &Args) -> anyhow::Result<Outcome> {
    if args.url.is_some() {
        bail!("sweeper starts its own backends; --url is not supported");
    }
    let n = args.count;
    let b = Backends::start(args.embedded, args.nats).await?;
    b.spawn_projector();
    let store = SignalStore::new(b.log.clone());
    let at = Utc::now() - chrono::Duration::minutes(OVERDUE_BY_MINUTES + 1);

    let t = Instant::now();
    let results: Vec<anyhow::Result<()>> = futures::stream::iter(0..n)
        .map(|i| {
            let store = store.clone();
            async move { send_overdue(&store, i, at).await }
        })
        .buffer_unordered(args.append_concurrency)
        .collect()
        .await;
    results.into_iter().collect::<anyhow::Result<Vec<()>>>()?;
    let append = t.elapsed();
    b.settle(Duration::from_secs(3600)).await?;
    let projected = t.elapsed();
    eprintln!("bench: {n} overdue signals appended in {append:?}, projected after {projected:?}; starting the sweeper");

    let base_seq = b.log.last_seq().await?;
    let started = Instant::now();
    b.spawn_sweeper(sweeper::SweeperConfig {
        lease: b.sweeper_lease(),
        // One startup run only: the backlog is what is measured, not periodic scans.
        sweep_interval: Duration::from_secs(3600),
        ..Default::default()
    });
    // The stream's sequence counts the expiries as they land (nothing else appends meanwhile
    // but the sweeper's status fact at the end of its run).
    let mut half_at = None;
    let all_at = loop {
        let done = b.log.last_seq().await? - base_seq;
        if half_at.is_none() && done >= n as u64 / 2 {
            half_at = Some(started.elapsed());
        }
        if done >= n as u64 {
            break started.elapsed();
        }
        if started.elapsed() > Duration::from_secs(3600) {
            bail!("only {done} of {n} expired after an hour");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let fact = wait_status_fact(&b, Duration::from_secs(600)).await?;
    let caught_up = Instant::now();
    b.settle(Duration::from_secs(3600)).await?;
    let projector_lag = caught_up.elapsed();
    let total = started.elapsed();

    let rate = per_sec(n as u64, all_at);
    let results = json!({
        "signals": n,
        "append_per_s": per_sec(n as u64, append),
        "expiries_per_s": rate,
        "expire_all_seconds": round(all_at.as_secs_f64(), 2),
        "expire_half_seconds": half_at.map(|d| round(d.as_secs_f64(), 2)),
        "backlog_lag_max_seconds": round(all_at.as_secs_f64(), 2),
        "projector_behind_after_seconds": round(projector_lag.as_secs_f64(), 2),
        "sweeper_status": fact,
        "total_seconds": round(total.as_secs_f64(), 2),
    });
    let summary = vec![
        format!("{n} overdue signals appended at {} /s", per_sec(n as u64, append)),
        format!(
            "sweeper expired them in {:.1} s → {rate} expiries/s (target ≥ 20,000); read models caught up {:.1} s later",
            all_at.as_secs_f64(),
            projector_lag.as_secs_f64()
        ),
    ];
    Ok(Outcome { results, summary })
}

/// Records an async `StatusUpdate` to an offline recipient as if sent at `at` with a 60 s TTL.
async fn send_overdue(store: &SignalStore, i: usize, at: DateTime<Utc>) -> anyhow::Result<()> {
    send_at(store, i, at, 60).await.map(drop)
}

/// Records async `StatusUpdate` number `i` to an offline recipient as if sent at `at` with a
/// TTL of `ttl_seconds`, through `record_send` as the gateway records one; its id.
pub(crate) async fn send_at(
    store: &SignalStore,
    i: usize,
    at: DateTime<Utc>,
    ttl_seconds: u64,
) -> anyhow::Result<uuid::Uuid> {
    let req = SendRequest {
        to: format!("bench-r{}", i % 100),
        signal_type: "StatusUpdate".into(),
        payload: json!({"n": i}),
        delivery_class: None,
        ttl_seconds: Some(ttl_seconds),
        correlation_id: None,
        dedupe_key: None,
        deliver_after_seconds: None,
        deliver_at: None,
    };
    let offline = RecipientView {
        registered: true,
        state: RecipientState::NotAvailableOffline,
        has_live_ws: false,
        freshest_session: None,
    };
    let decision = decide_send(&TypeTable::default(), TENANT, "bench-sender", req, offline, at, SendLimits::default())
        .map_err(|e| anyhow::anyhow!("decide_send: {e}"))?;
    let SendDecision::Accepted(sent) = &decision else {
        bail!("an async send to an offline recipient must be queued");
    };
    let id = sent.signal_id;
    store.record_send(TENANT, "bench-sender", decision, at).await.context("record_send")?;
    Ok(id)
}

/// The sweeper's newest status fact (`signalbus/sweeper`), once its run has reported.
async fn wait_status_fact(b: &Backends, timeout: Duration) -> anyhow::Result<Value> {
    let subject = b.log.subjects().of(TENANT, Entity::Plugin(sweeper::status::PLUGIN));
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(s) = b.log.last_on_subject(&subject).await? {
            if let EventBody::PluginFactRecorded(f) = s.event.body {
                return Ok(serde_json::from_str(&f.state)?);
            }
        }
        if Instant::now() > deadline {
            bail!("no sweeper status fact within {timeout:?}");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
