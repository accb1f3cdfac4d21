//! How far the read models trail the stream, as one gateway process sees it: when each stream
//! position was first seen, the projector's checkpoint, and its pace while it has work — from
//! which the back-pressure watch decides whether sends go ahead, are paced or are held.
//!
//! Deliberately pure: it is fed readings and instants, reads nothing and waits on nothing.

use std::collections::VecDeque;
use std::time::Duration;

use tokio::time::Instant;

/// The share of the bound from which sends are paced (3/5): room for a batch slower than the
/// pace. Paced sends wait a fraction of a millisecond, so the room costs little: from 4/5 the
/// lag's p99 flat out was 97–127 ms, from 3/5 85–102 ms at the same rate (docs/performance.md).
const HEADROOM: (u32, u32) = (3, 5);

/// A checkpoint that has not moved for this long while events wait is a stalled projector.
pub(super) const STALLED_AFTER: Duration = Duration::from_secs(1);

/// Most stream positions remembered with the instant this process first saw them.
const MAX_SIGHTINGS: usize = 4096;

/// How far back the projector's pace is measured: several of its batches, few enough seconds
/// that a change of load shows within one.
const PACE_WINDOW: Duration = Duration::from_secs(1);

/// How long the oldest event the projector has not applied has been on the stream, as seen by
/// this process: each new stream position is remembered with the instant it was first seen.
#[derive(Debug)]
pub(super) struct Lag {
    sightings: VecDeque<(u64, Instant)>,
    pub(super) checkpoint: Option<u64>,
    moved_at: Instant,
    pace: Pace,
}

impl Lag {
    pub(super) fn new(now: Instant) -> Self {
        // A checkpoint never seen to move counts as stalled: no projector, nothing to wait for.
        Self { sightings: VecDeque::new(), checkpoint: None, moved_at: now - STALLED_AFTER, pace: Pace::default() }
    }

    pub(super) fn saw(&mut self, position: u64, now: Instant) {
        let newest = self.sightings.back().map_or(self.checkpoint.unwrap_or(0), |(seq, _)| *seq);
        if position > newest {
            if self.sightings.len() == MAX_SIGHTINGS {
                self.sightings.pop_front();
            }
            self.sightings.push_back((position, now));
        }
    }

    /// How long the oldest event not applied at the last reading has been seen (zero if none).
    pub(super) fn oldest_wait(&self, now: Instant) -> Duration {
        self.sightings.front().map_or(Duration::ZERO, |(_, seen)| now.saturating_duration_since(*seen))
    }

    /// The projector's busy time per event applied, over the last `PACE_WINDOW`.
    pub(super) fn per_event(&self) -> Option<Duration> {
        self.pace.per_event()
    }

    /// Whether the read models had applied everything seen so far when last asked.
    pub(super) fn caught_up(&self) -> bool {
        self.checkpoint.is_some() && self.sightings.is_empty()
    }

    /// How long the oldest event a newly read `checkpoint` applies had waited by `now`: the peak
    /// of the lag's sawtooth, which the commit ends. `None` when it applies nothing seen waiting
    /// (read before `over` takes the reading in).
    pub(super) fn peak_applied(&self, checkpoint: u64, now: Instant) -> Option<Duration> {
        let moved = self.checkpoint.is_some_and(|c| checkpoint > c);
        let (_, first_seen) = self.sightings.front().filter(|_| moved)?;
        Some(now.saturating_duration_since(*first_seen))
    }

    /// Whether the projector, at `checkpoint`, trails by more than `HEADROOM` of `max` and is
    /// still moving.
    pub(super) fn over(&mut self, checkpoint: u64, now: Instant, max: Duration) -> bool {
        let max = max * HEADROOM.0 / HEADROOM.1;
        if self.checkpoint.is_some_and(|c| c != checkpoint) {
            self.moved_at = now;
        }
        self.checkpoint = Some(checkpoint);
        while self.sightings.front().is_some_and(|(seq, _)| *seq <= checkpoint) {
            self.sightings.pop_front();
        }
        let waiting = self.sightings.back().map_or(0, |(seq, _)| seq.saturating_sub(checkpoint));
        self.pace.record(now, checkpoint, waiting > 0);
        let Some((_, first_seen)) = self.sightings.front() else { return false };
        let stalled = now - self.moved_at >= STALLED_AFTER;
        let waited_too_long = now - *first_seen > max;
        let would_wait_too_long = self.pace.per_event().is_some_and(|per| {
            u32::try_from(waiting).ok().and_then(|n| per.checked_mul(n)).is_none_or(|time| time > max)
        });
        (waited_too_long || would_wait_too_long) && !stalled
    }
}

/// The projector's pace while it has work: events applied per unit of time during which events
/// were waiting for it, over the last `PACE_WINDOW`. Time with nothing waiting is left out, so
/// a projector that is idle between events is not taken for a slow one (one event applied in a
/// 20 ms batch is 20 ms per event, however long the quiet before it). The watch stops reading
/// the checkpoint only once nothing waits, so the last reading's flag covers the gap.
#[derive(Debug, Default)]
struct Pace {
    /// (when, checkpoint, busy time so far) at each reading of the checkpoint.
    samples: VecDeque<(Instant, u64, Duration)>,
    busy: Duration,
    /// The last reading, and whether events were waiting then.
    last: Option<(Instant, bool)>,
}

impl Pace {
    fn record(&mut self, now: Instant, checkpoint: u64, waiting: bool) {
        if let Some((at, true)) = self.last {
            self.busy += now.saturating_duration_since(at);
        }
        self.last = Some((now, waiting));
        if self.samples.back().is_some_and(|(_, seq, _)| checkpoint < *seq) {
            // The checkpoint went back (a rebuild swapped the read models in): start over.
            self.samples.clear();
        }
        self.samples.push_back((now, checkpoint, self.busy));
        while self.samples.len() > 2 && self.samples.front().is_some_and(|(at, _, _)| now - *at > PACE_WINDOW) {
            self.samples.pop_front();
        }
    }

    /// Busy time per applied event over the window; `None` before anything was applied in it.
    fn per_event(&self) -> Option<Duration> {
        let (&(_, first_seq, first_busy), &(_, last_seq, last_busy)) = (self.samples.front()?, self.samples.back()?);
        let applied = u32::try_from(last_seq - first_seq).ok().filter(|n| *n > 0)?;
        Some((last_busy - first_busy) / applied)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MAX: Duration = Duration::from_millis(100);

    fn ms(t0: Instant, n: u64) -> Instant {
        t0 + Duration::from_millis(n)
    }

    #[test]
    fn a_moving_projector_past_the_bound_holds_sends_until_it_catches_up() {
        let t0 = Instant::now();
        let mut lag = Lag::new(t0);
        lag.saw(1000, t0);
        assert!(!lag.over(990, ms(t0, 10), MAX), "a checkpoint never seen moving is not waited for");
        lag.saw(1011, ms(t0, 50));
        assert!(!lag.over(1000, ms(t0, 60), MAX), "moving at 5 ms an event, 11 waiting: under 3/5 of the bound");
        assert!(lag.over(1010, ms(t0, 160), MAX), "events seen at 50 ms still wait: 110 ms behind");
        assert!(!lag.over(1011, ms(t0, 170), MAX), "caught up");
        lag.saw(1011, ms(t0, 180));
        assert!(lag.caught_up(), "nothing new seen: no need to ask");
        lag.saw(1012, ms(t0, 190));
        assert!(!lag.caught_up());
    }

    /// Flat out: each 50 ms batch applies 1,000 events while as many arrive, so the oldest
    /// event waiting has waited 50 ms at every reading; what decides is how much waits.
    fn flat_out(waiting: u64) -> bool {
        let t0 = Instant::now();
        let mut lag = Lag::new(t0);
        let mut over = false;
        for i in 0..10 {
            let checkpoint = 1000 * i;
            lag.saw(checkpoint + waiting, ms(t0, 50 * i));
            over = lag.over(checkpoint, ms(t0, 50 * i), MAX);
        }
        over
    }

    #[test]
    fn sends_are_held_before_any_event_waited_the_bound_when_what_waits_would_take_longer() {
        assert!(flat_out(2500), "2,500 waiting at 50 µs an event: 125 ms to apply");
        assert!(!flat_out(1100), "1,100 waiting at 50 µs an event: 55 ms to apply");
        assert!(flat_out(1300), "1,300 waiting: 65 ms, under the bound but within its last two fifths");
    }

    #[test]
    fn quiet_between_events_is_not_taken_for_a_slow_projector() {
        let t0 = Instant::now();
        let mut lag = Lag::new(t0);
        lag.saw(1, t0);
        assert!(!lag.over(0, ms(t0, 1), MAX));
        assert!(!lag.over(1, ms(t0, 21), MAX), "one event applied in 20 ms, then caught up");
        lag.saw(2, ms(t0, 900));
        assert!(!lag.over(1, ms(t0, 901), MAX), "the quiet 880 ms were not busy: 20 ms an event");
        assert_eq!(lag.pace.per_event(), Some(Duration::from_millis(20)));
    }

    #[test]
    fn a_stalled_projector_is_never_waited_for() {
        let t0 = Instant::now();
        let mut lag = Lag::new(t0);
        lag.saw(10, t0);
        assert!(!lag.over(1, ms(t0, 10), MAX));
        assert!(lag.over(2, ms(t0, 500), MAX), "it moved: held");
        assert!(lag.over(2, ms(t0, 1400), MAX), "not moved for 0.9 s: still held");
        assert!(!lag.over(2, ms(t0, 1600), MAX), "not moved for 1.1 s: stalled, let through");
        assert!(lag.over(3, ms(t0, 1700), MAX), "moving again: held again");
    }

    #[test]
    fn a_commit_ends_the_wait_of_the_oldest_event_it_applies() {
        let t0 = Instant::now();
        let mut lag = Lag::new(t0);
        lag.saw(10, t0);
        assert_eq!(lag.peak_applied(5, ms(t0, 5)), None, "no checkpoint read before: nothing known to move");
        lag.over(0, ms(t0, 5), MAX);
        lag.saw(20, ms(t0, 30));
        assert_eq!(lag.peak_applied(0, ms(t0, 40)), None, "not moved");
        assert_eq!(lag.peak_applied(15, ms(t0, 70)), Some(Duration::from_millis(70)), "from what was seen at 0");
        lag.over(15, ms(t0, 70), MAX);
        assert_eq!(lag.peak_applied(20, ms(t0, 90)), Some(Duration::from_millis(60)), "the rest, seen at 30");
        lag.over(20, ms(t0, 90), MAX);
        assert_eq!(lag.peak_applied(25, ms(t0, 95)), None, "nothing seen waiting");
    }

    #[test]
    fn sightings_stay_bounded() {
        let t0 = Instant::now();
        let mut lag = Lag::new(t0);
        for seq in 1..=(MAX_SIGHTINGS as u64 * 2) {
            lag.saw(seq, ms(t0, seq));
        }
        assert_eq!(lag.sightings.len(), MAX_SIGHTINGS);
    }
}
