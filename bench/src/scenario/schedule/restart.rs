//! The restart phase of `schedule`: `--restart-count` signals scheduled over a short window
//! (`WINDOW`), every role of the bus stopped (gateway, projector, sweeper: `Target::stop_roles`)
//! before the first is due, started again on the same stream and database (`Target::resume`)
//! once the last is `OVERDUE` past due, and the recipients reconnected. Reported: how long the
//! roles took to come up, and the time from the restart to every signal released (the
//! sweeper's release count, `recorder.rs`) and to every one received; duplicates and early pushes are in the
//! shared `Tally`, and `mod.rs` reads the stream for signals released twice.
//!
//! Deliberately the same bed, stream and database, with new connections and a new gateway port:
//! what an operator's restart of every process looks like to its clients.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use chrono::{SubsecRound, Utc};
use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;

use super::flow::{Plan, Tally};
use super::{connect_recipients, send_all};
use crate::args::Args;
use crate::bed::Target;
use crate::kept::Series as ReleaseLag;
use crate::report::round;

/// The restart phase's deliver window.
const WINDOW: Duration = Duration::from_secs(10);
/// How long past the last `deliver_at` the bus stays down.
const OVERDUE: Duration = Duration::from_secs(5);
/// How long after the restart the phase waits for every signal.
const TIMEOUT: Duration = Duration::from_secs(180);

pub(super) struct Phase<'a> {
    pub args: &'a Args,
    pub s_tokens: &'a [String],
    pub r_tokens: &'a [String],
    pub recipients: &'a Arc<Vec<String>>,
}

impl Phase<'_> {
    /// Runs the phase with signals numbered from `first`; `rate` (sends/s of the first phase)
    /// sizes the lead: three times the expected send time, plus 10 s.
    pub async fn run(
        &self,
        target: &mut Target,
        tally: &Arc<Tally>,
        first: usize,
        rate: f64,
        metrics: Option<&ReleaseLag>,
    ) -> anyhow::Result<(Value, String)> {
        let n = self.args.restart_count;
        let lead = Duration::from_secs_f64(n as f64 / rate.max(1.0) * 3.0) + Duration::from_secs(10);
        let plan = Plan {
            first,
            count: n,
            start: (Utc::now() + chrono::Duration::from_std(lead)?).trunc_subsecs(3),
            window: WINDOW,
            payload_bytes: self.args.payload_bytes,
        };
        let accepted_before = tally.accepted.load(Ordering::Relaxed);
        let refused_before = tally.refused.load(Ordering::Relaxed);
        let released_at_send = released(metrics);
        let sent = send_all(target, self.s_tokens, self.args, plan, self.recipients, tally).await?;
        let accepted = tally.accepted.load(Ordering::Relaxed) - accepted_before;
        let refused = tally.refused.load(Ordering::Relaxed) - refused_before;
        let stopping = Instant::now();
        let stopped_before_due = Utc::now() < plan.start;
        let backends = target.stop_roles().await?;
        let stop_took = stopping.elapsed();
        eprintln!(
            "bench: restart phase: {accepted} signals sent in {:.1} s, every role stopped{} (in {:.1} s); restarting once all are {} s overdue",
            sent.as_secs_f64(),
            if stopped_before_due { " before the first was due" } else { " — AFTER the first was due" },
            stop_took.as_secs_f64(),
            OVERDUE.as_secs()
        );
        let until = plan.end() + chrono::Duration::from_std(OVERDUE)?;
        tokio::time::sleep((until - Utc::now()).to_std().unwrap_or_default()).await;

        // Releases appended by the old roles before they stopped (0 when stopped before due).
        let released_before = released(metrics);
        let want = accepted.saturating_sub(released_before.saturating_sub(released_at_send));
        let restarted = Instant::now();
        // Watched from the restart on: the sweeper starts before the gateway has caught up.
        let watch = metrics.cloned().map(|m| {
            tokio::spawn(async move {
                while restarted.elapsed() < TIMEOUT {
                    if m.count().saturating_sub(released_before) >= want {
                        return Some(restarted.elapsed());
                    }
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
                None
            })
        });
        target.resume(backends).await?;
        let roles_up = restarted.elapsed();
        let stop = CancellationToken::new();
        let receivers = connect_recipients(target, self.r_tokens, tally, &stop, TIMEOUT).await?;
        let reconnected = restarted.elapsed();
        let mut all_received = None;
        while restarted.elapsed() < TIMEOUT {
            if tally.received_in(plan.range()) >= accepted {
                all_received = Some(restarted.elapsed());
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let all_released = match watch {
            Some(w) => w.await.ok().flatten(),
            None => None,
        };
        tokio::time::sleep(Duration::from_secs(1)).await;
        stop.cancel();
        for r in receivers {
            let _ = r.await;
        }
        let received = tally.received_in(plan.range());
        let released_now = released(metrics).saturating_sub(released_before);
        let secs = |d: Option<Duration>| d.map(|d| round(d.as_secs_f64(), 2));
        let json = json!({
            "count": n,
            "accepted": accepted,
            "refused": refused,
            "lead_s": round(lead.as_secs_f64(), 1),
            "send_seconds": round(sent.as_secs_f64(), 2),
            "window_s": WINDOW.as_secs(),
            "stopped_before_due": stopped_before_due,
            "stop_seconds": round(stop_took.as_secs_f64(), 2),
            "released_before_restart": metrics.map(|_| released_before.saturating_sub(released_at_send)),
            "down_until_overdue_s": OVERDUE.as_secs(),
            "roles_up_seconds": round(roles_up.as_secs_f64(), 2),
            "recipients_reconnected_seconds": round(reconnected.as_secs_f64(), 2),
            "released": metrics.map(|_| released_now),
            "all_released_seconds": secs(all_released),
            "received": received,
            "all_received_seconds": secs(all_received),
            "duplicates_so_far": tally.duplicates.load(Ordering::Relaxed),
            "early_so_far": tally.early.load(Ordering::Relaxed),
        });
        let line = format!(
            "restart: {accepted} signals due while every role was down ({} s overdue at the restart); roles up in {:.2} s; all released after {} s, all {received} received after {} s (from the restart); duplicates {}, early {}",
            OVERDUE.as_secs(),
            roles_up.as_secs_f64(),
            json["all_released_seconds"],
            json["all_received_seconds"],
            json["duplicates_so_far"],
            json["early_so_far"]
        );
        Ok((json, line))
    }
}

/// Releases the sweepers of this process have appended so far (0 without a recorder).
fn released(metrics: Option<&ReleaseLag>) -> u64 {
    metrics.map_or(0, ReleaseLag::count)
}
