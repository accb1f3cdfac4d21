//! Counting the bench process's heap allocations, in builds with `--features count-allocs`: the
//! global allocator (mimalloc, as the shipped binary's) wrapped in `stats_alloc`'s counter, so
//! `throughput` and `latency` report allocations per delivered signal — the bus's and its client
//! sessions' together, as they share the process.
//!
//! Deliberately a build of its own: the counter is a few shared atomics per allocation, which
//! would tax every other measurement; and it counts only (no call sites: a heap profiler does
//! that, see docs/performance.md).

#[cfg(feature = "count-allocs")]
mod counted {
    pub type Global = stats_alloc::StatsAlloc<mimalloc::MiMalloc>;
    pub const fn global() -> Global {
        stats_alloc::StatsAlloc::new(mimalloc::MiMalloc)
    }

    pub fn now() -> Option<super::Allocs> {
        let s = crate::GLOBAL.stats();
        Some(super::Allocs {
            calls: (s.allocations + s.reallocations) as u64,
            bytes: (s.bytes_allocated as i64 + s.bytes_reallocated as i64).max(0) as u64,
        })
    }
}

#[cfg(not(feature = "count-allocs"))]
mod counted {
    pub type Global = mimalloc::MiMalloc;
    pub const fn global() -> Global {
        mimalloc::MiMalloc
    }

    pub fn now() -> Option<super::Allocs> {
        None
    }
}

pub use counted::{global, Global};

/// Allocations (calls to `alloc`, `alloc_zeroed` and `realloc`) and their bytes.
#[derive(Debug, Clone, Copy, Default)]
pub struct Allocs {
    pub calls: u64,
    pub bytes: u64,
}

impl Allocs {
    /// So far in this process; `None` in a build without the counter.
    pub fn now() -> Option<Allocs> {
        counted::now()
    }

    pub fn since(self, before: Allocs) -> Allocs {
        Allocs { calls: self.calls.saturating_sub(before.calls), bytes: self.bytes.saturating_sub(before.bytes) }
    }
}

#[cfg(all(test, feature = "count-allocs"))]
mod tests {
    use super::*;

    #[test]
    fn an_allocation_is_counted() {
        let before = Allocs::now().expect("a counting build");
        let v: Vec<u8> = Vec::with_capacity(1000);
        let after = Allocs::now().expect("a counting build").since(before);
        drop(v);
        // Other test threads may allocate meanwhile, so at least, not exactly.
        assert!(after.calls >= 1 && after.bytes >= 1000, "{after:?}");
    }
}
