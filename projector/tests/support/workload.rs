//! A randomized but rule-abiding workload: agents register (and are removed and registered
//! again), sessions open, heartbeat and close,
//! signals are sent, bounced, delivered (and redelivered after their session closes), acked,
//! expired and recalled, plugins record facts — every event legal for the state it follows.
//!
//! Deliberately deterministic for a seed, so a failure can be replayed.

use std::collections::HashMap;

use bus::catalog::Category;
use bus::event::{DeliveredVia, Event};
use chrono::{DateTime, Duration, Utc};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use uuid::Uuid;

use super::*;

pub struct Workload {
    rng: StdRng,
    clock: DateTime<Utc>,
    agents: Vec<String>,
    /// Removed agents, which may be registered again.
    removed: Vec<String>,
    next_agent: usize,
    /// Open sessions: (session, identity).
    open: Vec<(Uuid, String)>,
    /// Pending signals: (id, from, to, expires_at).
    pending: Vec<(Uuid, String, String, DateTime<Utc>)>,
    /// Delivered, not acked: (id, to, session it went to).
    unacked: Vec<(Uuid, String, Option<Uuid>)>,
    closed_sessions: Vec<Uuid>,
    plugin_seq: HashMap<String, u64>,
}

impl Workload {
    pub fn new(seed: u64) -> Self {
        Workload {
            rng: StdRng::seed_from_u64(seed),
            // In the past, so every heartbeat is older than the stale threshold whenever the
            // tables are compared: recipient state is then the same for live and rebuilt.
            clock: Utc::now() - Duration::hours(3),
            agents: Vec::new(),
            removed: Vec::new(),
            next_agent: 0,
            open: Vec::new(),
            pending: Vec::new(),
            unacked: Vec::new(),
            closed_sessions: Vec::new(),
            plugin_seq: HashMap::new(),
        }
    }

    fn pick<T: Clone>(rng: &mut StdRng, v: &[T]) -> Option<T> {
        (!v.is_empty()).then(|| v[rng.gen_range(0..v.len())].clone())
    }

    fn take<T>(rng: &mut StdRng, v: &mut Vec<T>) -> Option<T> {
        (!v.is_empty()).then(|| v.swap_remove(rng.gen_range(0..v.len())))
    }

    /// The next `n` events.
    pub fn events(&mut self, n: usize) -> Vec<Event> {
        let mut out = Vec::with_capacity(n);
        while out.len() < n {
            if let Some(e) = self.step() {
                out.push(e);
            }
        }
        out
    }

    fn step(&mut self) -> Option<Event> {
        self.clock += Duration::milliseconds(self.rng.gen_range(1..40));
        let at = self.clock;
        let rng = &mut self.rng;
        if self.agents.len() < 3 || rng.gen_bool(0.01) {
            let name = format!("agent-{}", self.next_agent);
            self.next_agent += 1;
            self.agents.push(name.clone());
            return Some(registered(&name, at));
        }
        // A removal leaves the agent's sessions open, as on a real stream, where their closes
        // follow it; agent-0 stays, it owns the plugins.
        if self.agents.len() > 3 && rng.gen_bool(0.004) {
            let name = self.agents.swap_remove(rng.gen_range(1..self.agents.len()));
            self.pending.retain(|p| p.2 != name);
            self.removed.push(name.clone());
            return Some(removed(&name, at));
        }
        if rng.gen_bool(0.004) {
            let name = Self::take(rng, &mut self.removed)?;
            self.agents.push(name.clone());
            return Some(registered(&name, at));
        }
        match rng.gen_range(0..100) {
            0..=5 => {
                let who = Self::pick(rng, &self.agents)?;
                let s = Uuid::new_v4();
                self.open.push((s, who.clone()));
                Some(opened(s, &who, at))
            }
            6..=12 => {
                let (s, who) = Self::pick(rng, &self.open)?;
                Some(heartbeat(s, &who, at))
            }
            13..=16 => {
                let (s, who) = Self::take(rng, &mut self.open)?;
                self.closed_sessions.push(s);
                Some(closed(s, &who, at))
            }
            17..=42 => {
                let from = Self::pick(rng, &self.agents)?;
                let to = Self::pick(rng, &self.agents)?;
                let id = bus::send::new_signal_id();
                let category = [Category::Blocker, Category::Ask, Category::Task, Category::Info][rng.gen_range(0..4)];
                let ttl = Duration::seconds(rng.gen_range(1..600));
                self.pending.push((id, from.clone(), to.clone(), at + ttl));
                Some(sent(id, &from, &to, category, at, ttl))
            }
            43..=45 => {
                let from = Self::pick(rng, &self.agents)?;
                let to = Self::pick(rng, &self.agents)?;
                Some(bounced(bus::send::new_signal_id(), &from, &to, at))
            }
            46..=62 => {
                let i = (0..self.pending.len()).find(|&i| self.pending[i].3 > at)?;
                let (id, _, to, _) = self.pending.swap_remove(i);
                let session = self.open.iter().find(|(_, w)| *w == to).map(|(s, _)| *s);
                let via = if session.is_some() { DeliveredVia::WsPush } else { DeliveredVia::Inbox };
                self.unacked.push((id, to.clone(), session));
                Some(delivered(id, &to, via, session, false, at))
            }
            63..=67 => {
                // Redelivery: a delivered, unacked signal whose session has closed.
                let i =
                    self.unacked.iter().position(|(_, _, s)| s.is_some_and(|s| self.closed_sessions.contains(&s)))?;
                let (id, to, _) = self.unacked[i].clone();
                let session = self.open.iter().find(|(_, w)| *w == to).map(|(s, _)| *s)?;
                self.unacked[i].2 = Some(session);
                Some(delivered(id, &to, DeliveredVia::StartupDrain, Some(session), true, at))
            }
            68..=79 => {
                let (id, to, _) = Self::take(rng, &mut self.unacked)?;
                Some(acked(id, &to, at))
            }
            80..=85 => {
                // Due ones expire by TTL (some as older releases wrote it, without a reason);
                // any pending one may be forced by an operator or given up.
                if let Some(i) = self.pending.iter().position(|p| p.3 <= at) {
                    let (id, _, _, exp) = self.pending.swap_remove(i);
                    return Some(match rng.gen_range(0..2) {
                        0 => expired(id, exp, at),
                        _ => expired_for(id, exp, at, ExpiryReason::Ttl),
                    });
                }
                let (id, _, _, exp) = Self::take(rng, &mut self.pending)?;
                let reasons = [ExpiryReason::Forced, ExpiryReason::Removed, ExpiryReason::Undeliverable];
                Some(expired_for(id, exp, at, reasons[rng.gen_range(0..3)]))
            }
            86..=90 => {
                let (id, from, _, _) = Self::take(rng, &mut self.pending)?;
                Some(recalled(id, &from, at))
            }
            _ => {
                let plugin = format!("agent-0/p{}", rng.gen_range(0..4));
                let seq = self.plugin_seq.entry(plugin.clone()).or_insert(0);
                *seq += 1;
                Some(fact(&plugin, *seq, &format!(r#"{{"v": {}}}"#, *seq), at))
            }
        }
    }
}
