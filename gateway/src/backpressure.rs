//! Back-pressure from the read models: sends are slowed while the projector trails the stream
//! by nearly `GatewayConfig::max_projector_lag`, so under load the bus accepts what it can also
//! project, and reads, drains and dashboards stay fresh instead of falling seconds behind.
//!
//! "Trails by nearly the bound" is read two ways (`lag::Lag`): the oldest event not yet applied
//! has waited longer than `HEADROOM` of the bound (what happened), or the events waiting would
//! take the projector longer than that to apply at the pace it has been applying (what is about
//! to happen). The second is what keeps the lag *under* the bound: a projector applies in
//! batches, and by the time the oldest event's wait crosses the bound the batch it sits in is
//! already as large as everything that arrived meanwhile — the first rule alone lets the lag
//! reach about twice the bound flat out.
//!
//! "Nearly" is not fixed (`target::Target`): while commits land after their oldest event waited
//! longer than the bound itself, the share of the bound those two readings are taken against is
//! lowered, and raised again while they land within it — the bound is kept for the lag's tail,
//! on whatever host the bus shares its cores with.
//!
//! Near the bound, sends are **paced** (`pacing`): let through one slot apart, at 9/10 of the
//! rate the projector can apply them, so what waits shrinks and no send waits long. Only past
//! the bound itself — the projector slowed suddenly, say a database checkpoint — or while the
//! rate cannot be told are they **held** until the lag clears. Holding alone (until 2026-11-29)
//! concentrated the throttling on the sends that met a hold, each waiting for the batch in
//! flight: flat out, those were the whole of the bus's p99 (docs/performance.md).
//!
//! Deliberately never refuses a send, and never waits on a projector that is not moving: a send
//! waits at most `MAX_HOLD`, and while the checkpoint has not moved for `STALLED_AFTER` (no
//! projector running, a rebuild, a dead database) nothing waits — a send needs the stream, not
//! the read models.

mod lag;
mod pacing;
mod target;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use projector::queries::Queries;
use tokio::sync::watch;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::applied::Applied;
use lag::Lag;
use pacing::{Flow, Slots};
use target::Target;

/// How often the projector's checkpoint is compared with the stream position this process sees.
const POLL: Duration = Duration::from_millis(10);

/// The longest one send waits: past it, it goes ahead whatever the lag.
const MAX_HOLD: Duration = Duration::from_secs(1);

/// How recent this process's own projector's last commit must be for a poll to take it as the
/// checkpoint instead of asking the database. While it commits (a batch every few tens of
/// milliseconds under load) it is the projector applying, and its last commit *is* the
/// checkpoint: the query (and the pool's two pings around it) would only say so again, ~100
/// times a second. Past this — it stopped, or another process's projector took the lease — the
/// database is asked again; until then a stale value can only overstate the lag (pace more),
/// never let more through.
const OWN_COMMIT_FRESH: Duration = Duration::from_millis(100);

/// What a send meets at the door.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Gate {
    Open,
    /// Near the bound: one send per `interval`.
    Paced {
        interval: Duration,
    },
    /// Past the bound, or near it at a rate not known: wait until the gate changes.
    Held,
}

/// The closed gate a send met at the door, as `signalbus_backpressure_wait_seconds` labels it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Met {
    Paced = 0,
    Held = 1,
}

impl Met {
    pub const ALL: [Met; 2] = [Met::Paced, Met::Held];

    pub fn label(self) -> &'static str {
        match self {
            Met::Paced => "paced",
            Met::Held => "held",
        }
    }
}

/// What one send waited for back-pressure: the gate it met (a paced one may turn into a hold
/// while it waits, or open), and how long it waited in all.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Waited {
    pub gate: Met,
    pub took: Duration,
}

impl Waited {
    fn met(gate: Gate) -> Option<Met> {
        match gate {
            Gate::Open => None,
            Gate::Paced { .. } => Some(Met::Paced),
            Gate::Held => Some(Met::Held),
        }
    }
}

/// Whether sends go ahead, are paced or are held now; one per gateway process.
#[derive(Debug)]
pub struct Backpressure {
    gate: watch::Sender<Gate>,
    slots: Slots,
    /// Sends let through so far: with the stream positions, how many sends an event carries.
    admitted: AtomicU64,
}

impl Default for Backpressure {
    fn default() -> Self {
        Self { gate: watch::Sender::new(Gate::Open), slots: Slots::default(), admitted: AtomicU64::new(0) }
    }
}

impl Backpressure {
    /// Waits for this send's turn: at once when open, at its slot when paced, until the gate
    /// opens or paces when held — never longer than `MAX_HOLD`. A send that met a closed gate
    /// is recorded in `signalbus_backpressure_wait_seconds` by the gate it met, and said here.
    pub async fn admit(&self) -> Option<Waited> {
        let met = *self.gate.borrow();
        let waited = match Waited::met(met) {
            None => None,
            Some(gate) => {
                let start = Instant::now();
                self.wait().await;
                let waited = Waited { gate, took: start.elapsed() };
                crate::metrics::backpressure_wait(gate, waited.took.as_secs_f64());
                Some(waited)
            }
        };
        self.admitted.fetch_add(1, Ordering::Relaxed);
        waited
    }

    async fn wait(&self) {
        let deadline = Instant::now() + MAX_HOLD;
        let mut rx = self.gate.subscribe();
        let mut slot = None;
        loop {
            let gate = *rx.borrow_and_update();
            let until = match gate {
                Gate::Open => return,
                Gate::Paced { interval } => {
                    let at = *slot.get_or_insert_with(|| self.slots.take(interval, Instant::now()));
                    if at <= Instant::now() {
                        return;
                    }
                    at.min(deadline)
                }
                Gate::Held => deadline,
            };
            tokio::select! {
                _ = tokio::time::sleep_until(until) => return,
                changed = rx.changed() => if changed.is_err() { return },
            }
        }
    }

    fn set(&self, gate: Gate) {
        if gate == Gate::Open && *self.gate.borrow() != Gate::Open {
            self.slots.reset(Instant::now());
        }
        self.gate.send_if_modified(|g| std::mem::replace(g, gate) != gate);
    }

    fn admitted(&self) -> u64 {
        self.admitted.load(Ordering::Relaxed)
    }
}

/// What the watch task reads: the read models' checkpoint and this process's stream position.
pub struct Watch {
    pub backpressure: Arc<Backpressure>,
    pub queries: Arc<dyn Queries>,
    pub applied: Applied,
    pub max_lag: Duration,
    pub shutdown: CancellationToken,
}

/// Starts the task that decides, every `POLL` and at each batch this process's own projector
/// commits, whether sends go ahead, are paced or are held.
///
/// Commits are read as they happen so that a hold ends the moment the batch that clears the
/// lag is in, not at the next poll. A projector in another process is polled.
pub fn spawn(w: Watch, tasks: &TaskTracker) {
    tasks.spawn(async move {
        let mut lag = Lag::new(Instant::now());
        let mut flow = Flow::default();
        let mut target = Target::default();
        crate::metrics::pacing_share(target.share());
        let mut tick = tokio::time::interval(POLL);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut commits = w.queries.applied_changes();
        let mut woken_by_commits = true;
        let mut own_commit: Option<(u64, Instant)> = None;
        loop {
            let committed = tokio::select! {
                _ = w.shutdown.cancelled() => return,
                _ = tick.tick() => None,
                changed = commits.changed(), if woken_by_commits => match changed {
                    Ok(()) => {
                        let c = *commits.borrow_and_update();
                        own_commit = Some((c, Instant::now()));
                        Some(c)
                    }
                    // No projector handle left in this process: polls only.
                    Err(_) => {
                        woken_by_commits = false;
                        continue;
                    }
                },
            };
            // Nothing newer than the last reading: nothing to decide again.
            if committed.is_some_and(|c| lag.checkpoint.is_some_and(|known| c <= known)) {
                continue;
            }
            let now = Instant::now();
            let position = w.applied.get();
            lag.saw(position, now);
            // Nothing seen since the read models last caught up: no query needed.
            if lag.caught_up() {
                w.backpressure.set(Gate::Open);
                continue;
            }
            let checkpoint = match committed.or_else(|| fresh_own_commit(own_commit, now)) {
                Some(c) => Ok(c),
                None => w.queries.applied_seq().await,
            };
            let gate = match checkpoint {
                Ok(checkpoint) => {
                    flow.record(now, position, w.backpressure.admitted());
                    if let Some(peak) = lag.peak_applied(checkpoint, now) {
                        target.committed(peak, w.max_lag);
                        crate::metrics::pacing_share(target.share());
                    }
                    let near = lag.over(checkpoint, now, target.bound(w.max_lag));
                    decide(near, lag.oldest_wait(now) > w.max_lag, flow.rate(lag.per_event()))
                }
                // The read models cannot be asked: nothing to wait for.
                Err(_) => Gate::Open,
            };
            w.backpressure.set(gate);
        }
    });
}

/// This process's projector's last commit, if it is recent enough to stand for the checkpoint
/// (`OWN_COMMIT_FRESH`).
fn fresh_own_commit(own: Option<(u64, Instant)>, now: Instant) -> Option<u64> {
    own.filter(|(_, at)| now.saturating_duration_since(*at) < OWN_COMMIT_FRESH).map(|(c, _)| c)
}

/// The gate for a projector `near` the bound or `past` it, able to apply `rate` sends a second.
fn decide(near: bool, past: bool, rate: Option<f64>) -> Gate {
    match (near, rate) {
        (false, _) => Gate::Open,
        (true, Some(rate)) if !past && rate > 0.0 => {
            // A rate too small to space sends by is as good as a hold of `MAX_HOLD`.
            let interval = Duration::try_from_secs_f64(1.0 / rate).map_or(MAX_HOLD, |d| d.min(MAX_HOLD));
            Gate::Paced { interval }
        }
        (true, _) => Gate::Held,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn near_the_bound_paces_past_it_holds() {
        assert_eq!(decide(false, false, Some(1000.0)), Gate::Open);
        assert_eq!(decide(true, false, Some(1000.0)), Gate::Paced { interval: Duration::from_millis(1) });
        assert_eq!(decide(true, true, Some(1000.0)), Gate::Held, "past the bound itself");
        assert_eq!(decide(true, false, None), Gate::Held, "no rate to pace at");
        assert_eq!(decide(false, true, None), Gate::Open, "a stalled projector is not waited for");
    }

    #[test]
    fn a_recent_own_commit_stands_for_the_checkpoint_and_an_old_one_does_not() {
        let now = Instant::now();
        assert_eq!(fresh_own_commit(None, now), None, "no projector here: ask the database");
        assert_eq!(fresh_own_commit(Some((42, now)), now + Duration::from_millis(99)), Some(42));
        assert_eq!(fresh_own_commit(Some((42, now)), now + OWN_COMMIT_FRESH), None, "stopped, or not the leader");
    }

    #[tokio::test(start_paused = true)]
    async fn paced_sends_go_one_interval_apart_and_all_at_once_when_the_gate_opens() {
        let bp = Arc::new(Backpressure::default());
        bp.set(Gate::Paced { interval: Duration::from_millis(10) });
        let start = Instant::now();
        let waits: Vec<_> = (0..3)
            .map(|_| {
                let bp = bp.clone();
                tokio::spawn(async move {
                    let waited = bp.admit().await.expect("met the paced gate");
                    assert_eq!(waited.gate, Met::Paced);
                    assert_eq!(waited.took, start.elapsed(), "said as waited");
                    start.elapsed()
                })
            })
            .collect();
        let mut took = Vec::new();
        for w in waits {
            took.push(w.await.unwrap());
        }
        took.sort();
        assert_eq!(took, [0, 10, 20].map(Duration::from_millis));
        assert_eq!(bp.admitted(), 3);

        let late = (0..5)
            .map(|_| {
                let bp = bp.clone();
                tokio::spawn(async move { bp.admit().await })
            })
            .collect::<Vec<_>>();
        tokio::time::sleep(Duration::from_millis(1)).await;
        bp.set(Gate::Open);
        let opened = Instant::now();
        for w in late {
            w.await.unwrap();
        }
        assert_eq!(opened.elapsed(), Duration::ZERO, "opening lets every paced send through");
    }

    #[tokio::test(start_paused = true)]
    async fn a_held_send_goes_ahead_when_the_lag_clears_or_after_the_longest_hold() {
        let bp = Arc::new(Backpressure::default());
        let start = Instant::now();
        assert_eq!(bp.admit().await, None, "an open gate: nothing waited, nothing recorded");
        assert_eq!(start.elapsed(), Duration::ZERO, "not over: not held");

        bp.set(Gate::Held);
        let clearing = bp.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(300)).await;
            clearing.set(Gate::Open);
        });
        let start = Instant::now();
        let waited = bp.admit().await;
        assert_eq!(start.elapsed(), Duration::from_millis(300), "held until the lag cleared");
        assert_eq!(waited, Some(Waited { gate: Met::Held, took: Duration::from_millis(300) }));

        bp.set(Gate::Held);
        let start = Instant::now();
        let waited = bp.admit().await;
        assert_eq!(start.elapsed(), MAX_HOLD, "never held longer than MAX_HOLD");
        assert_eq!(waited, Some(Waited { gate: Met::Held, took: MAX_HOLD }));
    }
}
