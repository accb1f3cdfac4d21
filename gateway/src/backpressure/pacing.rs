//! Pacing while the read models come near their bound: sends are let through one slot apart, at
//! the rate the projector is applying them, instead of all being held until a batch commits.
//!
//! Held, every send that met the hold waited for the batch in flight (~30 ms flat out), and
//! those sends were the whole of the bus's p99; paced, the same throttling is spread over every
//! send as a fraction of a millisecond each. `Flow` turns the projector's pace into sends a
//! second; `Slots` hands out the instants.
//!
//! Deliberately knows nothing of where the numbers come from (the watch feeds them) and never
//! decides whether to pace (`Lag` does).

use std::collections::VecDeque;
use std::sync::Mutex;
use std::time::Duration;

use tokio::time::Instant;

/// How far back the rate is measured: several of the projector's batches (~30 ms each flat out).
const FLOW_WINDOW: Duration = Duration::from_millis(300);

/// The shortest span a rate is taken over: shorter, one batch's commit is the whole picture.
const MIN_SPAN: Duration = Duration::from_millis(50);

/// The share of the projector's rate sends are paced at while near the bound, so what waits
/// shrinks rather than holds steady.
const SHRINK: f64 = 0.9;

/// Readings of the stream position this process has seen and of the sends admitted so far, over
/// the last `FLOW_WINDOW`: how many sends an event carries (~35 flat out, gathered; one alone).
#[derive(Debug, Default)]
pub(super) struct Flow {
    samples: VecDeque<(Instant, u64, u64)>,
}

impl Flow {
    pub(super) fn record(&mut self, now: Instant, position: u64, admitted: u64) {
        self.samples.push_back((now, position, admitted));
        while self.samples.len() > 2 && self.samples.front().is_some_and(|(at, ..)| now - *at > FLOW_WINDOW) {
            self.samples.pop_front();
        }
    }

    /// Sends per second that let what waits shrink: what the projector can apply a second at
    /// `per_event` (its busy time per event), times the sends admitted per event appended,
    /// times `SHRINK`. Not what it applied: while sends are paced that is the pace itself, and a
    /// rate taken from it would only ever fall. `None` while the window holds too little to tell
    /// (then sends are held instead).
    pub(super) fn rate(&self, per_event: Option<Duration>) -> Option<f64> {
        let (&(t0, p0, a0), &(t1, p1, a1)) = (self.samples.front()?, self.samples.back()?);
        let per_event = per_event.filter(|d| !d.is_zero())?;
        let (appended, admitted) = (p1.saturating_sub(p0), a1.saturating_sub(a0));
        if t1.saturating_duration_since(t0) < MIN_SPAN || appended == 0 || admitted == 0 {
            return None;
        }
        let sends_per_event = admitted as f64 / appended as f64;
        Some(sends_per_event / per_event.as_secs_f64() * SHRINK)
    }
}

/// The next free admission instant: each paced send takes the one after the last taken.
#[derive(Debug)]
pub(super) struct Slots {
    next: Mutex<Instant>,
}

impl Default for Slots {
    fn default() -> Self {
        Self { next: Mutex::new(Instant::now()) }
    }
}

impl Slots {
    /// The instant a send asking at `now` goes ahead, `interval` after the one before it.
    pub(super) fn take(&self, interval: Duration, now: Instant) -> Instant {
        let mut next = self.next.lock().unwrap_or_else(|p| p.into_inner());
        let at = (*next).max(now);
        *next = at + interval;
        at
    }

    /// Forgets slots handed out ahead of `now` (pacing ended; the next pacing starts afresh).
    pub(super) fn reset(&self, now: Instant) {
        *self.next.lock().unwrap_or_else(|p| p.into_inner()) = now;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(t0: Instant, n: u64) -> Instant {
        t0 + Duration::from_millis(n)
    }

    #[test]
    fn the_rate_is_what_the_projector_can_apply_in_sends_less_a_margin() {
        let t0 = Instant::now();
        let mut flow = Flow::default();
        let per_event = Some(Duration::from_micros(500));
        flow.record(t0, 1_000, 10_000);
        assert_eq!(flow.rate(per_event), None, "one reading tells nothing");
        // 100 ms: 100 events appended for 2,000 sends (20 a message); 2,000 events/s applied.
        flow.record(ms(t0, 100), 1_100, 12_000);
        let rate = flow.rate(per_event).unwrap();
        assert!((rate - 20.0 * 2_000.0 * SHRINK).abs() < 1e-6, "{rate}");
    }

    #[test]
    fn no_rate_without_a_pace_or_over_too_short_a_window() {
        let t0 = Instant::now();
        let per_event = Some(Duration::from_micros(500));
        let mut flow = Flow::default();
        flow.record(t0, 1_000, 10_000);
        flow.record(ms(t0, 20), 1_010, 10_200);
        assert_eq!(flow.rate(per_event), None, "20 ms is one commit, not a rate");
        flow.record(ms(t0, 200), 1_100, 12_000);
        assert!(flow.rate(per_event).is_some());
        assert_eq!(flow.rate(None), None, "no pace measured yet");
        let mut idle = Flow::default();
        idle.record(t0, 1_000, 10_000);
        idle.record(ms(t0, 200), 1_000, 10_000);
        assert_eq!(idle.rate(per_event), None, "nothing sent: nothing to pace");
    }

    #[test]
    fn old_readings_leave_the_window() {
        let t0 = Instant::now();
        let mut flow = Flow::default();
        for i in 0..100 {
            flow.record(ms(t0, 10 * i), 1_000 + i, 10_000 + 20 * i);
        }
        assert!(flow.samples.len() <= 32, "{}", flow.samples.len());
    }

    #[test]
    fn slots_are_an_interval_apart_and_never_in_the_past() {
        let t0 = Instant::now();
        let slots = Slots::default();
        slots.reset(t0);
        let step = Duration::from_millis(2);
        assert_eq!(slots.take(step, t0), t0);
        assert_eq!(slots.take(step, t0), ms(t0, 2));
        assert_eq!(slots.take(step, ms(t0, 1)), ms(t0, 4));
        assert_eq!(slots.take(step, ms(t0, 50)), ms(t0, 50), "a quiet spell is not saved up");
        slots.reset(ms(t0, 51));
        assert_eq!(slots.take(step, ms(t0, 51)), ms(t0, 51));
    }
}
