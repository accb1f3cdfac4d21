//! Per-identity send rate limits: a keyed token bucket (governor) per `(tenant, identity)`, so
//! one runaway agent cannot starve the stream for everyone else. Over the limit a send answers
//! `rate_limited` (429) with `retry_after_ms`, and nothing is appended.
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

type Keyed = RateLimiter<(String, String), DefaultKeyedStateStore<(String, String)>, DefaultClock>;

/// The limiter of one gateway process.
pub struct SendLimiter {
    limiter: Option<Keyed>,
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
        let limiter = rate.and_then(|r| {
            let per_second = NonZeroU32::new(r.per_second)?;
            let burst = NonZeroU32::new(r.burst.max(r.per_second))?;
            Some(RateLimiter::keyed(Quota::per_second(per_second).allow_burst(burst)))
        });
        SendLimiter { limiter, clock: DefaultClock::default() }
    }

    /// Takes one send from the identity's bucket, or says how long until one is available.
    pub fn check(&self, tenant: &str, identity: &str) -> Result<(), Duration> {
        let Some(limiter) = &self.limiter else { return Ok(()) };
        limiter
            .check_key(&(tenant.to_string(), identity.to_string()))
            .map_err(|not_until| not_until.wait_time_from(self.clock.now()))
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
    fn no_rate_means_no_limit() {
        let l = SendLimiter::new(None);
        assert!((0..10_000).all(|_| l.check("t", "a").is_ok()));
    }
}
