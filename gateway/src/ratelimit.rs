//! Per-identity rate limits on what an agent appends: sends, and plugin facts (weighted by
//! their size). A keyed token bucket (governor) per `(tenant, identity)`, so one runaway agent
//! cannot starve the stream for everyone else. Over the limit the call answers `rate_limited`
//! (429, CONTRACT §8) and nothing is appended; `ApiError::RateLimited` adds the wait — on HTTP a
//! `Retry-After` header in whole seconds, and on every surface the error object's exact
//! `retry_after_ms` (`error.rs`).
//!
//! Deliberately per process: each gateway enforces the quota on the sends it accepts, so N
//! gateways behind a load balancer admit up to N × the quota for an identity spread across
//! them. A global limit would need a round trip per send; the stream is the only shared state.

use std::num::NonZeroU32;
use std::time::Duration;

use governor::clock::{Clock, DefaultClock};
use governor::state::keyed::DefaultKeyedStateStore;
use governor::{Quota, RateLimiter};

/// Sustained sends per second per identity, and how many may come at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SendRate {
    pub per_second: u32,
    pub burst: u32,
}

impl Default for SendRate {
    /// Far above what an agent sends by hand, low enough that one loop gone wrong cannot take
    /// the whole bus's append capacity (several thousand signals/s on a small machine).
    fn default() -> Self {
        SendRate { per_second: 1000, burst: 2000 }
    }
}

/// Plugin fact appends per second per identity, in units: a fact costs one unit per started
/// `FACT_UNIT_BYTES` of encoded state, so the quota bounds bytes as well as calls.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FactRate {
    pub per_second: u32,
    pub burst: u32,
}

/// The state size one fact unit covers.
pub const FACT_UNIT_BYTES: usize = 64 * 1024;

impl Default for FactRate {
    /// 100 small facts/s (a status every 10 ms) or ~6 MiB/s of 1 MiB states per identity; a
    /// burst fits twelve of the largest facts.
    fn default() -> Self {
        FactRate { per_second: 100, burst: 200 }
    }
}

impl FactRate {
    /// The units a fact of `encoded` state bytes costs.
    pub fn cost(encoded: usize) -> u32 {
        u32::try_from(encoded.div_ceil(FACT_UNIT_BYTES).max(1)).unwrap_or(u32::MAX)
    }
}

type Keyed = RateLimiter<(String, String), DefaultKeyedStateStore<(String, String)>, DefaultClock>;

/// One keyed limiter of a gateway process (sends, or facts).
pub struct SendLimiter {
    limiter: Option<Keyed>,
    burst: u32,
    clock: DefaultClock,
}

impl std::fmt::Debug for SendLimiter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SendLimiter").field("enabled", &self.limiter.is_some()).finish()
    }
}

impl SendLimiter {
    /// `None` turns limiting off.
    pub fn new(rate: Option<SendRate>) -> Self {
        Self::keyed(rate.map(|r| (r.per_second, r.burst)))
    }

    /// The plugin fact limiter; `None` turns it off.
    pub fn for_facts(rate: Option<FactRate>) -> Self {
        Self::keyed(rate.map(|r| (r.per_second, r.burst)))
    }

    fn keyed(rate: Option<(u32, u32)>) -> Self {
        let quota = rate.and_then(|(per_second, burst)| {
            let per_second = NonZeroU32::new(per_second)?;
            let burst = NonZeroU32::new(burst.max(per_second.get()))?;
            Some((Quota::per_second(per_second).allow_burst(burst), burst.get()))
        });
        SendLimiter {
            limiter: quota.map(|(q, _)| RateLimiter::keyed(q)),
            burst: quota.map_or(0, |(_, b)| b),
            clock: DefaultClock::default(),
        }
    }

    /// Takes one unit from the identity's bucket, or says how long until one is available.
    pub fn check(&self, tenant: &str, identity: &str) -> Result<(), Duration> {
        self.check_n(tenant, identity, 1)
    }

    /// Takes `n` units at once (at most a full bucket: anything larger costs a full bucket, so
    /// it is slow but always possible).
    pub fn check_n(&self, tenant: &str, identity: &str, n: u32) -> Result<(), Duration> {
        let Some(limiter) = &self.limiter else { return Ok(()) };
        let Some(n) = NonZeroU32::new(n.clamp(1, self.burst.max(1))) else { return Ok(()) };
        match limiter.check_key_n(&(tenant.to_string(), identity.to_string()), n) {
            Ok(Ok(())) => Ok(()),
            Ok(Err(not_until)) => Err(not_until.wait_time_from(self.clock.now())),
            // Cannot happen: `n` is clamped to the burst.
            Err(_) => Err(Duration::from_secs(1)),
        }
    }

    /// Forgets identities whose buckets are full again, so memory follows active senders.
    pub fn prune(&self) {
        if let Some(limiter) = &self.limiter {
            limiter.retain_recent();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_burst_passes_then_the_identity_waits_and_others_do_not() {
        let l = SendLimiter::new(Some(SendRate { per_second: 1, burst: 3 }));
        for _ in 0..3 {
            assert!(l.check("t", "alice").is_ok());
        }
        let wait = l.check("t", "alice").unwrap_err();
        assert!(wait > Duration::ZERO && wait <= Duration::from_secs(1), "{wait:?}");
        assert!(l.check("t", "bob").is_ok(), "buckets are per identity");
        assert!(l.check("u", "alice").is_ok(), "and per tenant");
    }

    #[test]
    fn facts_cost_by_size_and_a_largest_fact_always_fits_a_bucket() {
        assert_eq!(FactRate::cost(10), 1);
        assert_eq!(FactRate::cost(FACT_UNIT_BYTES + 1), 2);
        assert_eq!(FactRate::cost(1024 * 1024), 16);
        let l = SendLimiter::for_facts(Some(FactRate { per_second: 1, burst: 20 }));
        assert!(l.check_n("t", "a", 16).is_ok());
        assert!(l.check_n("t", "a", 16).is_err(), "the bucket is spent");
        let tiny = SendLimiter::for_facts(Some(FactRate { per_second: 1, burst: 4 }));
        assert!(tiny.check_n("t", "a", 16).is_ok(), "costs a full bucket, not never");
        assert!(tiny.check_n("t", "a", 1).is_err());
    }

    #[test]
    fn no_rate_means_no_limit() {
        let l = SendLimiter::new(None);
        assert!((0..10_000).all(|_| l.check("t", "a").is_ok()));
    }
}
