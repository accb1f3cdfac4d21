//! `Announcers`: who this process tells, as the stream tail reads each `signal.sent`, that a
//! signal was sent — a surface (MCP) adds itself when its router is built.
//!
//! Deliberately a leaf that knows no surface: it holds callbacks and calls them in order, so
//! the shared state can carry it without knowing who listens.

use std::sync::{Arc, RwLock};

use bus::event::SignalSent;

/// Tells another surface (MCP) that a signal waits: `(tenant, signal.sent)` — sent, or released
/// when it was scheduled. Shared, so a release read later can still call it.
pub type Announce = Arc<dyn Fn(&str, &SignalSent) + Send + Sync>;

/// The announcements of this process, added once per router and called for every `signal.sent`.
#[derive(Default)]
pub struct Announcers(RwLock<Vec<Announce>>);

impl std::fmt::Debug for Announcers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Announcers").field("count", &self.0.read().unwrap().len()).finish()
    }
}

impl Announcers {
    pub fn add(&self, announce: Announce) {
        self.0.write().unwrap().push(announce);
    }

    pub fn announce(&self, tenant: &str, sent: &SignalSent) {
        for announce in self.0.read().unwrap().iter() {
            announce(tenant, sent);
        }
    }
}
