//! Folds a run of stored events into the row sets one batch writes: new rows, and per-key
//! patches in which several events on the same row are already merged. Backend-independent.
//! Every text goes through the projector's encoding (`encode.rs`: U+0000 becomes U+FFFD), and an
//! event whose JSON neither backend could read back, or whose correlation id is longer than the
//! column, becomes a dead letter here, the same way on both backends.
//!
//! Deliberately does no I/O and no validation of the signal rules: the stream already obeyed
//! them (`bus::signal`), so this only records what happened. Merging per key matters because a
//! multi-row upsert may touch each row once per statement.

use foldhash::HashMap;

use bus::event::{EventBody, SessionKind, SignalSent, Surface};
use bus::send::MAX_CORRELATION_ID_CHARS;
use uuid::Uuid;

use crate::batch_groups::{GroupChanges, GroupFold};
use crate::dead_letter::{AsEntry, DeadLetter};

mod directives;
mod rows;
use crate::encode::{check_json, json_text, text};
pub use directives::{DirectivePatch, RequestedRow};
pub use rows::{AgentRow, FactRow, SentRow, SessionPatch, SessionRow, SignalPatch};

/// The name of the one projection that owns every read model (its checkpoint row).
pub const PROJECTION: &str = "read_models";

/// One batch, folded. `from_seq..=to_seq` is the stream range it covers.
#[derive(Debug, Clone, Default)]
pub struct Batch {
    pub from_seq: u64,
    pub to_seq: u64,
    pub events: usize,
    pub sent: Vec<SentRow>,
    pub signal_patches: Vec<SignalPatch>,
    /// Registrations, at most one per (tenant, identity): the first, or the first after the
    /// batch's last removal of it (a registration only follows a removal on the stream).
    pub agents: Vec<AgentRow>,
    /// Identities removed in this batch (`agent.removed`): their `agents` and `recipient_state`
    /// rows are deleted before `agents` is inserted, so a removal followed by a registration in
    /// one batch ends registered, as it does split over two.
    pub removed_agents: Vec<(String, String)>,
    pub sessions: Vec<SessionRow>,
    pub session_patches: Vec<SessionPatch>,
    pub facts: Vec<FactRow>,
    /// The newest fact per (tenant, plugin) in this batch.
    pub plugin_states: Vec<FactRow>,
    /// Identities whose recipient state may have changed.
    pub touched: Vec<(String, String)>,
    /// What the batch's group events leave of `groups` and `group_members`.
    pub groups: GroupChanges,
    /// Events of the range that are skipped, with why.
    pub dead_letters: Vec<DeadLetter>,
    /// Directives created in this batch (`batch/directives.rs`).
    pub directives: Vec<RequestedRow>,
    /// Per directive, what this batch's later events did to it.
    pub directive_patches: Vec<DirectivePatch>,
    /// Whether a row of `sent` may exist already, so its insert needs a conflict arm (`bisect`
    /// sets it for the one retry of a batch whose plain insert met an existing row).
    pub sent_may_exist: bool,
}

fn kind_str(k: SessionKind) -> String {
    k.as_str().to_string()
}

fn surface_str(s: Surface) -> String {
    s.as_str().to_string()
}

/// Why a `signal.sent` cannot be stored as it is, if it cannot. `payload` is already encoded.
fn unstorable_sent(s: &SignalSent, payload: &str) -> Option<String> {
    if let Err(e) = check_json(payload) {
        return Some(format!("the payload is not JSON the read models can hold: {e}"));
    }
    let corr = s.correlation_id.as_deref().map_or(0, |c| c.chars().count());
    (corr > MAX_CORRELATION_ID_CHARS)
        .then(|| format!("the correlation_id has {corr} characters; the read models hold {MAX_CORRELATION_ID_CHARS}"))
}

impl Batch {
    /// A batch that only records `dead` and moves the checkpoint past it.
    pub fn dead_letter(dead: DeadLetter) -> Batch {
        Batch { from_seq: dead.seq, to_seq: dead.seq, events: 1, dead_letters: vec![dead], ..Batch::default() }
    }

    /// Events applied to the read models (the range less its dead letters).
    pub fn applied_events(&self) -> usize {
        self.events - self.dead_letters.len()
    }

    /// Folds `entries` (consecutive, oldest first) into one batch.
    pub(crate) fn fold<T: AsEntry>(entries: &[T]) -> Batch {
        let mut b = Batch {
            from_seq: entries.first().map_or(0, |s| s.seq()),
            to_seq: entries.last().map_or(0, |s| s.seq()),
            events: entries.len(),
            ..Batch::default()
        };
        let mut patches: HashMap<Uuid, usize> = HashMap::default();
        let mut sessions: HashMap<Uuid, usize> = HashMap::default();
        let mut states: HashMap<(String, String), usize> = HashMap::default();
        let mut touched: HashMap<(String, String), ()> = HashMap::default();
        let mut agents: HashMap<(String, String), Option<AgentRow>> = HashMap::default();
        let mut removed: HashMap<(String, String), ()> = HashMap::default();
        let mut directive_patches: HashMap<Uuid, usize> = HashMap::default();
        let mut groups = GroupFold::default();
        for entry in entries {
            let stored = match entry.entry() {
                Ok(stored) => stored,
                Err(dead) => {
                    b.dead_letters.push(dead.clone());
                    continue;
                }
            };
            let seq = stored.seq as i64;
            let ev = &stored.event;
            let at = ev.occurred_at;
            let tenant = &text(&ev.tenant);
            let mut patch = |b: &mut Batch, id: Uuid| -> usize {
                *patches.entry(id).or_insert_with(|| {
                    b.signal_patches.push(SignalPatch {
                        id,
                        delivered_at: None,
                        via: None,
                        session: None,
                        acked_at: None,
                        expired_at: None,
                        expired_reason: None,
                        recalled_at: None,
                        released_at: None,
                        seq,
                    });
                    b.signal_patches.len() - 1
                })
            };
            match &ev.body {
                // Gathered sends fold as each alone would, on a subject still empty (`sends_at`).
                EventBody::SignalSent(_) | EventBody::SendsRecorded(_) => {
                    for (s, own_seq) in ev.body.sends_at(stored.seq) {
                        let own_seq = own_seq as i64;
                        let payload = json_text(&s.payload);
                        if let Some(reason) = unstorable_sent(s, &payload) {
                            // One dead letter per event; the rest of a gathered event still folds.
                            if b.dead_letters.last().is_none_or(|d| d.seq != stored.seq) {
                                b.dead_letters.push(DeadLetter::of(stored, &reason));
                            }
                            continue;
                        }
                        b.sent.push(SentRow {
                            id: s.signal_id,
                            tenant: tenant.clone(),
                            from: text(&s.from),
                            to: text(&s.to),
                            signal_type: text(&s.signal_type),
                            category: s.category.as_str().to_string(),
                            priority: s.priority,
                            payload: payload.into_owned(),
                            delivery_class: s.delivery_class.as_str().to_string(),
                            recipient_state: s.recipient_state.as_str().to_string(),
                            publish_path: s.publish_path.as_str().to_string(),
                            correlation_id: s.correlation_id.as_deref().map(text),
                            created_at: s.created_at,
                            expires_at: s.expires_at,
                            fanout_id: s.fanout_id,
                            deliver_at: s.deliver_at,
                            seq: own_seq,
                        });
                        // A send that recorded its push is delivered by the same event.
                        if let Some(d) = s.delivery() {
                            let i = patch(&mut b, d.signal_id);
                            b.signal_patches[i].delivered(&d, at, own_seq);
                        }
                    }
                }
                // A bounce never enters signal_queue (CONTRACT §4).
                EventBody::SignalBounced(_) => {}
                EventBody::SignalDelivered(d) => {
                    let i = patch(&mut b, d.signal_id);
                    b.signal_patches[i].delivered(d, at, seq);
                }
                EventBody::SignalAcked(a) => {
                    let i = patch(&mut b, a.signal_id);
                    let p = &mut b.signal_patches[i];
                    p.acked_at.get_or_insert(at);
                    p.seq = seq;
                }
                // Several sessions' batches in one `acks.recorded` fold as each alone would.
                EventBody::SignalsAcked(_) | EventBody::AcksRecorded(_) => {
                    for id in ev.body.acked_ids() {
                        let before = b.signal_patches.len();
                        let i = patch(&mut b, *id);
                        let fresh = b.signal_patches.len() > before;
                        let p = &mut b.signal_patches[i];
                        p.acked_at.get_or_insert(at);
                        // Stored on an acks subject, not the signal's: the newest sequence of
                        // the signal's subject (the sweeper's compare-and-set) stays.
                        if fresh {
                            p.seq = 0;
                        }
                    }
                }
                EventBody::SignalExpired(e) => {
                    let i = patch(&mut b, e.signal_id);
                    let p = &mut b.signal_patches[i];
                    if p.expired_at.is_none() {
                        p.expired_at = Some(at);
                        p.expired_reason = Some(e.reason().as_str());
                    }
                    p.seq = seq;
                }
                EventBody::SignalRecalled(r) => {
                    let i = patch(&mut b, r.signal_id);
                    let p = &mut b.signal_patches[i];
                    p.recalled_at.get_or_insert(at);
                    p.seq = seq;
                }
                EventBody::SignalReleased(r) => {
                    let i = patch(&mut b, r.signal_id);
                    let p = &mut b.signal_patches[i];
                    p.released_at.get_or_insert(at);
                    p.seq = seq;
                }
                EventBody::AgentRegistered(a) => {
                    let identity = text(&a.identity);
                    let key = (tenant.clone(), identity.clone());
                    touched.insert(key.clone(), ());
                    let row = AgentRow { tenant: tenant.clone(), identity, kind: kind_str(a.kind), registered_at: at };
                    // The first registration holds (the rows' `ON CONFLICT DO NOTHING`), as in the
                    // gateway's registry; only a removal clears the slot.
                    agents.entry(key).or_insert(None).get_or_insert(row);
                }
                EventBody::AgentRemoved(r) => {
                    let key = (tenant.clone(), text(&r.identity));
                    agents.insert(key.clone(), None);
                    removed.insert(key, ());
                }
                // Token hashes are secrets; no read model holds them.
                EventBody::TokenRotated(_) => {}
                EventBody::SessionOpened(o) => {
                    let identity = text(&o.identity);
                    touched.insert((tenant.clone(), identity.clone()), ());
                    b.sessions.push(SessionRow {
                        session_id: o.session_id,
                        tenant: tenant.clone(),
                        identity,
                        kind: kind_str(o.kind),
                        surface: surface_str(o.surface),
                        node: text(&o.node),
                        opened_at: at,
                    });
                }
                EventBody::SessionHeartbeat(h) => {
                    let i = session_patch(&mut b, &mut sessions, h.session_id);
                    let p = &mut b.session_patches[i];
                    p.heartbeat = Some(p.heartbeat.map_or(at, |t| t.max(at)));
                    touched.insert((tenant.clone(), text(&h.identity)), ());
                }
                EventBody::SessionClosed(c) => {
                    let i = session_patch(&mut b, &mut sessions, c.session_id);
                    b.session_patches[i].released_at.get_or_insert(at);
                    touched.insert((tenant.clone(), text(&c.identity)), ());
                }
                EventBody::PluginFactRecorded(f) => {
                    let fact = json_text(&f.state);
                    if let Err(e) = check_json(&fact) {
                        let reason = format!("the state is not JSON the read models can hold: {e}");
                        b.dead_letters.push(DeadLetter::of(stored, &reason));
                        continue;
                    }
                    let row = FactRow {
                        tenant: tenant.clone(),
                        plugin: text(&f.plugin),
                        seq: f.seq as i64,
                        fact_type: text(&f.fact_type),
                        fact: fact.into_owned(),
                        recorded_by: text(&f.recorded_by),
                        created_at: at,
                    };
                    let key = (tenant.clone(), row.plugin.clone());
                    match states.get(&key) {
                        Some(&i) if b.plugin_states[i].seq >= row.seq => {}
                        Some(&i) => b.plugin_states[i] = row.clone(),
                        None => {
                            states.insert(key, b.plugin_states.len());
                            b.plugin_states.push(row.clone());
                        }
                    }
                    b.facts.push(row);
                }
                // Stored too late to count (its writer answered "nothing was accepted").
                EventBody::Voided(_) => {}
                body if body.directive_id().is_some() => {
                    if let Err(reason) = directives::fold(&mut b, &mut directive_patches, stored, tenant) {
                        b.dead_letters.push(DeadLetter::of(stored, &reason));
                    }
                }
                body if groups.fold(tenant, at, body) => {}
                _ => {}
            }
        }
        b.touched = touched.into_keys().collect();
        b.touched.sort();
        b.agents = agents.into_values().flatten().collect();
        b.agents.sort_by(|x, y| (&x.tenant, &x.identity).cmp(&(&y.tenant, &y.identity)));
        b.removed_agents = removed.into_keys().collect();
        b.removed_agents.sort();
        b.groups = groups.finish();
        b
    }
}

fn session_patch(b: &mut Batch, index: &mut HashMap<Uuid, usize>, id: Uuid) -> usize {
    *index.entry(id).or_insert_with(|| {
        b.session_patches.push(SessionPatch { session_id: id, heartbeat: None, released_at: None });
        b.session_patches.len() - 1
    })
}
