//! The heartbeat throttle of this node's piggyback sessions: a call on a session records at most
//! one `session.heartbeat` per interval; a call inside the interval is owed one, which the
//! reaper's next tick records with the call's time.
//!
//! Deliberately only bookkeeping: `lifecycle.rs` builds and records the events.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use uuid::Uuid;

use crate::agent::Agent;

/// Per-session heartbeat throttle of this node: at most one `session.heartbeat` per interval,
/// and a call inside the interval is owed one (recorded by the reaper's next tick with the
/// call's time), so other nodes never see a session as quieter than it was by more than that.
#[derive(Debug, Default)]
pub struct Heartbeats {
    beats: Mutex<HashMap<Uuid, Beat>>,
}

#[derive(Debug)]
struct Beat {
    tenant: String,
    identity: String,
    recorded: Instant,
    last_call: DateTime<Utc>,
    owed: bool,
}

/// A heartbeat to record: (session, tenant, identity, when the call happened).
pub type Owed = (Uuid, String, String, DateTime<Utc>);

impl Heartbeats {
    /// Notes a call at `now`; true when its heartbeat should be recorded at once.
    pub fn call(&self, id: Uuid, agent: &Agent, now: DateTime<Utc>, interval: Duration) -> bool {
        let mut beats = self.beats.lock().unwrap();
        match beats.get_mut(&id) {
            Some(b) if b.recorded.elapsed() < interval => {
                b.owed = true;
                b.last_call = now;
                false
            }
            Some(b) => {
                b.recorded = Instant::now();
                b.owed = false;
                b.last_call = now;
                true
            }
            None => {
                let beat = Beat {
                    tenant: agent.tenant.clone(),
                    identity: agent.identity.clone(),
                    recorded: Instant::now(),
                    last_call: now,
                    owed: false,
                };
                beats.insert(id, beat);
                true
            }
        }
    }

    /// Heartbeats owed whose interval has passed; they count as recorded from now.
    pub fn take_owed(&self, interval: Duration) -> Vec<Owed> {
        let mut beats = self.beats.lock().unwrap();
        beats
            .iter_mut()
            .filter(|(_, b)| b.owed && b.recorded.elapsed() >= interval)
            .map(|(id, b)| {
                b.owed = false;
                b.recorded = Instant::now();
                (*id, b.tenant.clone(), b.identity.clone(), b.last_call)
            })
            .collect()
    }

    pub fn forget(&self, id: Uuid) {
        self.beats.lock().unwrap().remove(&id);
    }
}
