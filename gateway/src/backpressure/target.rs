//! What the pacing aims at: a share of `GatewayConfig::max_projector_lag`, lowered when the lag's
//! peaks pass the bound and raised again, slowly, while they stay under it — so the bound holds
//! for the lag's tail on the host the bus runs on, not only for its typical batch.
//!
//! Why it adapts: flat out, the lag peaks just before each commit at the batch in flight plus
//! its own (~2 × 30 ms), and how far the slowest batches overshoot depends on the host — on a
//! quiet one the peaks of a fixed pacing threshold stayed under 100 ms (lag p99 81–90 ms), on a
//! busier moment of the same host 10 % of the batches ran twice as long for want of a core and
//! the p99 was 123–144 ms. A fixed threshold low enough for the second costs the first ~15 % of
//! its rate for nothing; this one pays only while the peaks are over (docs/performance.md).
//!
//! The rule is additive increase, multiplicative decrease on the share: each commit whose peak
//! passed the bound multiplies it by `DECREASE`, each other commit adds `INCREASE`, within
//! `MIN_SHARE..=1`. They balance when ~0.7 % of the batches peak over the bound; a peak is the top
//! of a sawtooth, and the few that pass the bound pass it for a batch or two (~25 ms each), so
//! that keeps the time over it under 1 %. Back to the whole bound takes ~500 quiet commits
//! (~17 s flat out) from the floor.
//!
//! Deliberately pure (fed peaks, reads nothing; the watch reports the share as
//! `signalbus_backpressure_pacing_share`) and one per gateway process; it only moves where
//! pacing starts — holds still start at the bound itself (`backpressure::decide`).

use std::time::Duration;

/// The lowest share of the bound pacing may aim at: below it the rate given up (~15 % at half
/// the bound, measured) buys little more of the tail, which is then the database's own stalls.
const MIN_SHARE: f64 = 0.5;

/// What a commit whose oldest event waited longer than the bound does to the share.
const DECREASE: f64 = 0.8;

/// What a commit within the bound adds to it.
const INCREASE: f64 = 0.001;

/// How early a peak counts as over the bound. A stream position is first seen at the watch's
/// reading after its append (`POLL`, 10 ms, or a commit), so a peak reads up to one poll short:
/// half of one on average is taken off the bound.
const SIGHTING_SLACK: Duration = Duration::from_millis(5);

/// The share of the bound sends are paced against.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct Target {
    share: f64,
}

impl Default for Target {
    fn default() -> Self {
        Self { share: 1.0 }
    }
}

impl Target {
    /// A batch committed; the oldest event it applied had been waiting `peak`.
    pub(super) fn committed(&mut self, peak: Duration, bound: Duration) {
        self.share = if peak > bound.saturating_sub(SIGHTING_SLACK) {
            (self.share * DECREASE).max(MIN_SHARE)
        } else {
            (self.share + INCREASE).min(1.0)
        };
    }

    /// The share itself, for `signalbus_backpressure_pacing_share`.
    pub(super) fn share(&self) -> f64 {
        self.share
    }

    /// The bound pacing is decided against now: `bound` times the share.
    pub(super) fn bound(&self, bound: Duration) -> Duration {
        bound.mul_f64(self.share)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BOUND: Duration = Duration::from_millis(100);

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn peaks_under_the_bound_leave_the_whole_bound() {
        let mut t = Target::default();
        for _ in 0..1000 {
            t.committed(ms(80), BOUND);
        }
        assert_eq!(t.bound(BOUND), BOUND);
    }

    #[test]
    fn a_peak_over_the_bound_lowers_where_pacing_starts_and_quiet_commits_raise_it_again() {
        let mut t = Target::default();
        t.committed(ms(120), BOUND);
        assert_eq!(t.bound(BOUND), ms(80));
        t.committed(ms(97), BOUND);
        assert_eq!(t.bound(BOUND), ms(64), "within the sighting slack counts as over");
        for _ in 0..200 {
            t.committed(ms(60), BOUND);
        }
        let raised = t.bound(BOUND);
        assert!(raised > ms(83) && raised < ms(85), "200 quiet commits add 20 % of the bound: {raised:?}");
        for _ in 0..200 {
            t.committed(ms(60), BOUND);
        }
        assert_eq!(t.bound(BOUND), BOUND, "never above the bound itself");
    }

    #[test]
    fn a_projector_that_stays_over_lowers_it_to_the_floor_and_no_further() {
        let mut t = Target::default();
        for _ in 0..50 {
            t.committed(ms(400), BOUND);
        }
        assert_eq!(t.bound(BOUND), ms(50));
    }

    #[test]
    fn the_balance_is_a_small_share_of_commits_over_the_bound() {
        // One commit in 40 over: the share settles at its floor; one in 400: near the bound.
        let settle = |every: usize| {
            let mut t = Target::default();
            for i in 0..20_000 {
                t.committed(if i % every == 0 { ms(150) } else { ms(60) }, BOUND);
            }
            t.bound(BOUND)
        };
        assert!(settle(40) < ms(60), "2.5 % over: {:?}", settle(40));
        assert!(settle(400) > ms(85), "0.25 % over: {:?}", settle(400));
    }
}
