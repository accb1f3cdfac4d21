//! The `throughput` scenario's events as the stream holds them (`bench throughput`: M senders →
//! N recipients, one WebSocket session each, every send pushed at once and recorded in its
//! `signal.sent`, the recipients' acks appended in `signals.acked` batches a few hundred events
//! later) — what the live projector folds while back-pressure waits on it. `Flow::gathered`
//! records them as a flat-out gateway does: the sends of one append in one `sends.recorded`, the
//! acks handed in meanwhile in one `acks.recorded`.
//!
//! Deliberately deterministic for a seed and free of the mixed workload's churn (registrations,
//! session opens and closes, expiries, recalls): `workload.rs` covers the rules, this the rate.

use std::collections::VecDeque;

use bus::event::{send_window, AcksRecorded, Event, EventBody, SendsRecorded, SignalSent, SignalsAcked};
use chrono::{DateTime, Duration, Utc};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use uuid::Uuid;

use super::{acks, ev, heartbeat, opened, registered, sent_pushed};

/// Signals a recipient acks in one `signals.acked` (the bench's ~1.1 events per signal).
const ACK_BATCH: usize = 10;
/// Events between a push and its ack: ~15–30 ms of a stream at ~15,000 events/s, which is how
/// far behind their sends acks land live (so most land in a later batch than their send).
const ACK_LAG: std::ops::Range<u64> = 200..450;
/// Events between two heartbeats of every session (about one per second at that rate).
const HEARTBEAT_EVERY: u64 = 15_000;

/// A recipient with its one session and its pushed, unacked signals (id, event number).
struct Recipient {
    name: String,
    session: Uuid,
    unacked: VecDeque<(Uuid, u64)>,
}

pub struct Flow {
    rng: StdRng,
    clock: DateTime<Utc>,
    senders: Vec<String>,
    recipients: Vec<Recipient>,
    /// Logical events so far (each gathered send or ack batch counts as one).
    n: u64,
    out: VecDeque<Event>,
    /// Sends per `sends.recorded` (1: each its own `signal.sent`), and what waits to be gathered.
    gather: usize,
    sends: Vec<SignalSent>,
    acks: Vec<SignalsAcked>,
}

impl Flow {
    pub fn new(seed: u64, senders: usize, recipients: usize) -> Self {
        Flow::gathered(seed, senders, recipients, 1)
    }

    /// The same flow with `per_message` sends gathered into each `sends.recorded` (and the acks
    /// of that stretch into one `acks.recorded`), as the gateway records them flat out.
    pub fn gathered(seed: u64, senders: usize, recipients: usize, per_message: usize) -> Self {
        Flow {
            gather: per_message.max(1),
            sends: Vec::new(),
            acks: Vec::new(),
            rng: StdRng::seed_from_u64(seed),
            // In the past, as in `workload.rs`: heartbeats are stale whenever tables are compared.
            clock: Utc::now() - Duration::hours(3),
            senders: (0..senders).map(|i| format!("sender-{i}")).collect(),
            recipients: (0..recipients)
                .map(|i| Recipient {
                    name: format!("recipient-{i}"),
                    session: Uuid::new_v4(),
                    unacked: VecDeque::new(),
                })
                .collect(),
            n: 0,
            out: VecDeque::new(),
        }
    }

    /// The next `n` events (stream messages: a gathered one holds several logical events).
    pub fn events(&mut self, n: usize) -> Vec<Event> {
        if self.n == 0 {
            self.start();
        }
        while self.out.len() < n {
            self.step();
        }
        self.out.drain(..n).collect()
    }

    fn push(&mut self, e: Event) {
        self.n += 1;
        if self.gather == 1 {
            self.out.push_back(e);
            return;
        }
        let at = e.occurred_at;
        match e.body {
            EventBody::SignalSent(s) => self.sends.push(*s),
            EventBody::SignalsAcked(a) => self.acks.push(a),
            _ => {
                self.out.push_back(e);
                return;
            }
        }
        if self.sends.len() >= self.gather {
            let sends = std::mem::take(&mut self.sends);
            let window = send_window(sends[0].signal_id).unwrap_or(0);
            self.out.push_back(ev(at, EventBody::SendsRecorded(SendsRecorded { window, sends })));
            if !self.acks.is_empty() {
                let acks = std::mem::take(&mut self.acks);
                self.out.push_back(ev(at, EventBody::AcksRecorded(AcksRecorded { acks })));
            }
        }
    }

    fn start(&mut self) {
        let at = self.clock;
        for s in self.senders.clone() {
            self.push(registered(&s, at));
        }
        for (r, session) in self.sessions() {
            self.push(registered(&r, at));
            self.push(opened(session, &r, at));
        }
    }

    /// Every recipient's name and session.
    fn sessions(&self) -> Vec<(String, Uuid)> {
        self.recipients.iter().map(|r| (r.name.clone(), r.session)).collect()
    }

    fn step(&mut self) {
        self.clock += Duration::microseconds(66);
        let at = self.clock;
        if self.n.is_multiple_of(HEARTBEAT_EVERY) {
            for (r, session) in self.sessions() {
                self.push(heartbeat(session, &r, at));
            }
        }
        let from = self.senders[self.rng.gen_range(0..self.senders.len())].clone();
        let to = self.rng.gen_range(0..self.recipients.len());
        let id = bus::send::new_signal_id();
        let (name, session) = (self.recipients[to].name.clone(), self.recipients[to].session);
        let mut send = sent_pushed(id, &from, &name, session, at);
        // A pushed send must be stored before its TTL runs out; the clock here is hours behind.
        if let EventBody::SignalSent(s) = &mut send.body {
            s.expires_at = at + Duration::days(1);
        }
        self.push(send);
        let lag = self.rng.gen_range(ACK_LAG);
        let now = self.n;
        let unacked = &mut self.recipients[to].unacked;
        unacked.push_back((id, now));
        // The recipient acks once a batch of its pushes is old enough.
        let due = unacked.iter().take_while(|(_, k)| now - k >= lag).count();
        if due >= ACK_BATCH {
            let ids: Vec<Uuid> = unacked.drain(..due).map(|(id, _)| id).collect();
            self.push(acks(&ids, &name, Some(session), at));
        }
    }
}
