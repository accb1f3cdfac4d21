//! What the stream itself says happened to every signal: which sends count, how each signal's
//! life went, and whether any signal has two terminal outcomes. The cluster test compares this
//! with what the bus answered.
//!
//! Deliberately reads the raw events (not `SignalState`, whose fold ignores an event that cannot
//! follow the state): a second terminal event that slipped past the compare-and-set must show.

use std::collections::HashMap;

use bus::event::EventBody;
use bus::log::jetstream::{JetStreamConfig, JetStreamLog};
use bus::log::EventLog;
use bus::signal::{SignalState, Status};
use uuid::Uuid;

/// One signal as the stream has it.
#[derive(Debug, Default)]
pub struct Life {
    pub correlation_id: Option<String>,
    /// Terminal events: first deliveries (not redeliveries), expiries, recalls.
    pub terminals: Vec<&'static str>,
    /// A redelivery stored before any first delivery.
    pub early_redelivery: bool,
    pub state: Option<Status>,
}

/// Every signal on the stream (voided events ignored, as every reader does).
pub struct Audit {
    pub signals: HashMap<Uuid, Life>,
    /// Terminal events per directive (completed, failed, rejecting decline, canceled, expired).
    pub directive_terminals: HashMap<Uuid, usize>,
}

impl Audit {
    pub async fn read(urls: &str, replicas: usize) -> Audit {
        let config = JetStreamConfig { replicas, ..Default::default() };
        let log = JetStreamLog::connect(urls, config).await.expect("connect to the stream");
        let last_seq = log.last_seq().await.unwrap();
        let mut events = Vec::new();
        while (events.len() as u64) < last_seq {
            let page = log.read(events.len() as u64 + 1, 10_000).await.unwrap();
            assert!(!page.is_empty(), "the stream ended before its last sequence {last_seq}");
            events.extend(page);
        }
        let mut bodies: HashMap<Uuid, Vec<EventBody>> = HashMap::new();
        let mut directive_terminals: HashMap<Uuid, usize> = HashMap::new();
        for stored in &events {
            let ends = match &stored.event.body {
                EventBody::DirectiveDeclined(d) => d.rejects,
                EventBody::DirectiveCompleted(_)
                | EventBody::DirectiveFailed(_)
                | EventBody::DirectiveCanceled(_)
                | EventBody::DirectiveExpired(_) => true,
                _ => false,
            };
            if let (true, Some(id)) = (ends, stored.event.body.directive_id()) {
                *directive_terminals.entry(id).or_default() += 1;
            }
        }
        for stored in events {
            if let Some(id) = stored.event.body.signal_id() {
                bodies.entry(id).or_default().push(stored.event.body);
            } else if let EventBody::SendsRecorded(r) = stored.event.body {
                // Gathered sends: each the first event of its signal's life.
                for sent in r.sends {
                    bodies.entry(sent.signal_id).or_default().push(EventBody::SignalSent(Box::new(sent)));
                }
            }
        }
        let signals = bodies.into_iter().map(|(id, bodies)| (id, life_of(&bodies))).collect();
        Audit { signals, directive_terminals }
    }

    /// How many terminal events directive `id` (as text) has on the stream.
    pub fn directive_ends(&self, id: &str) -> usize {
        id.parse().ok().and_then(|id: Uuid| self.directive_terminals.get(&id).copied()).unwrap_or(0)
    }

    /// The signal sent with correlation id `corr`, if a send of it counts.
    pub fn by_correlation(&self) -> HashMap<&str, &Life> {
        self.signals.values().filter_map(|l| l.correlation_id.as_deref().map(|c| (c, l))).collect()
    }

    /// Signals with more than one terminal outcome, or a redelivery before a delivery.
    pub fn violations(&self) -> Vec<(Uuid, &Life)> {
        self.signals
            .iter()
            .filter(|(_, l)| l.terminals.len() > 1 || l.early_redelivery)
            .map(|(id, l)| (*id, l))
            .collect()
    }
}

fn life_of(bodies: &[EventBody]) -> Life {
    let mut life = Life::default();
    for body in bodies {
        match body {
            EventBody::SignalSent(sent) => {
                life.correlation_id = sent.correlation_id.clone();
                if sent.pushed_to.is_some() {
                    life.terminals.push("delivered");
                }
            }
            EventBody::SignalDelivered(d) if d.redelivered => {
                life.early_redelivery |= !life.terminals.contains(&"delivered");
            }
            EventBody::SignalDelivered(_) => life.terminals.push("delivered"),
            EventBody::SignalExpired(_) => life.terminals.push("expired"),
            EventBody::SignalRecalled(_) => life.terminals.push("recalled"),
            _ => {}
        }
    }
    let state = SignalState::from_events(bodies);
    life.state = state.sent.is_some().then_some(state.status);
    life
}
