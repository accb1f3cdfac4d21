//! The command side over an event log: load a signal's events, let the pure rules decide, and
//! append the outcome with a per-signal compare-and-set, retrying when another writer won.
//!
//! Directives get the same treatment on their own subjects in `store/directives.rs`.
//!
//! Deliberately holds no state of its own: the stream is the only truth about a signal, so any
//! number of gateways and sweepers can run this against one log and still agree.

use std::time::Instant;

use chrono::{DateTime, Utc};
use uuid::Uuid;

use crate::agent::{AgentCommand, AgentState};
use crate::error::{DomainError, Error, Refusal, Result};
use crate::event::{Entity, Event, EventBody, SignalSent};
use crate::fold::Fold;
use crate::log::{Appended, Expect, SharedLog};
use crate::metrics;
use crate::send::SendDecision;
use crate::signal::{decide, decide_hinted, Hint, SignalCommand, SignalState};

mod directives;
mod gathered;
pub use directives::{DirectiveExecuted, DirectiveRefused, LifecycleSent};
use gathered::folded;

/// How many times a command is re-decided after losing a compare-and-set before giving up.
/// Each loss means someone else changed the signal, and a signal has at most a handful of
/// events, so a handful of retries always reaches a terminal answer.
pub(crate) const MAX_ATTEMPTS: usize = 16;

/// The result of a command: the state after it and the sequences of what it appended.
#[derive(Debug, Clone)]
pub struct Executed {
    pub state: SignalState,
    pub appended: Vec<u64>,
    /// The newest sequence known on the signal's subject after the command.
    pub last_seq: u64,
}

/// What a send recorded, or found recorded under its dedupe key.
#[derive(Debug, Clone)]
pub struct SendRecorded {
    pub state: SignalState,
    /// False when an earlier send with the same dedupe key had already been recorded.
    pub created: bool,
    pub seq: u64,
}

/// What a caller knows about a signal before deciding on it (see `execute_hinted`).
#[derive(Debug, Clone)]
pub struct Known<'a> {
    pub hint: Hint<'a>,
    /// The newest sequence on the signal's subject as the hint has it: the event the hint
    /// describes, or 0 for a send gathered in its window (`sends.recorded`), whose subject is
    /// empty until its next event.
    pub last_seq: u64,
    /// The signal's correlation id, carried by every event of it.
    pub correlation_id: Option<String>,
}

/// What `execute_hinted` appended (its sequence and event), and the state after it when the
/// stream was read (`None` when the hint sufficed).
#[derive(Debug, Clone)]
pub struct Hinted {
    pub appended: Option<(u64, EventBody)>,
    pub state: Option<SignalState>,
}

#[derive(Debug, Clone)]
pub struct SignalStore {
    log: SharedLog,
}

impl SignalStore {
    pub fn new(log: SharedLog) -> Self {
        Self { log }
    }

    pub fn log(&self) -> &SharedLog {
        &self.log
    }

    /// Appends `event` and records the append latency.
    pub async fn append(&self, event: &Event, expect: Expect) -> Result<Appended> {
        let started = Instant::now();
        let result = self.log.append(event, expect).await;
        metrics::record_append(started.elapsed());
        result
    }

    /// The signal's state folded from the stream, and the newest sequence on its subject (0
    /// while the subject is empty: a send gathered in its window, `sends.recorded`, lives there).
    pub async fn load(&self, tenant: &str, signal_id: Uuid) -> Result<(SignalState, u64)> {
        let subject = self.log.subjects().of(tenant, Entity::Signal(signal_id));
        let Some(born) = born_of(signal_id) else {
            return Ok(folded(None, self.log.read_subject(&subject).await?));
        };
        let stored = self.log.read_subject_born(&subject, born).await?;
        if stored.first().is_some_and(|s| is_birth(&s.event.body)) {
            return Ok(folded(None, stored));
        }
        // No send on the subject from the bound on: it was gathered, and every event the
        // subject holds came after it; or the bound was too late (a clock far off), and then
        // the whole subject — "nothing there" must be true.
        if let Some((gathered_at, sent)) = self.find_gathered(tenant, signal_id, born).await? {
            return Ok(folded(Some(sent), self.log.read_subject_after(&subject, gathered_at).await?));
        }
        Ok(folded(None, self.log.read_subject(&subject).await?))
    }

    /// Decides `command` against the stream's current state and appends the result with a
    /// compare-and-set, re-deciding whenever a concurrent writer got there first.
    pub async fn execute(
        &self,
        tenant: &str,
        signal_id: Uuid,
        command: &SignalCommand,
        actor: &str,
        now: DateTime<Utc>,
    ) -> Result<Executed> {
        for _ in 0..MAX_ATTEMPTS {
            let (mut state, mut last_seq) = self.load(tenant, signal_id).await?;
            let bodies = decide(&state, command, now)?;
            let mut appended = Vec::with_capacity(bodies.len());
            let mut lost = false;
            for body in bodies {
                let mut event = Event::new(tenant, Some(actor.to_string()), now, body);
                event.correlation_id = state.sent.as_ref().and_then(|s| s.correlation_id.clone());
                match self.append(&event, Expect::LastSubjectSeq(last_seq)).await {
                    Ok(a) => {
                        state.apply(&event.body);
                        last_seq = a.seq;
                        appended.push(a.seq);
                    }
                    Err(Error::Conflict { .. }) => {
                        lost = true;
                        break;
                    }
                    Err(e) => return Err(settled(e)),
                }
            }
            if !lost {
                return Ok(Executed { state, appended, last_seq });
            }
        }
        Err(Error::Unavailable(format!("signal {signal_id} is too contended")))
    }

    /// Decides and appends like `execute`, but first on what the caller already knows: with
    /// `known`, the command is decided on its hint and appended expecting `known.last_seq` to
    /// still be the signal's newest sequence — no read. A stale hint (the compare-and-set
    /// loses) or one that cannot settle the command falls back to read → decide → append.
    ///
    /// `command` is built from the state it is decided on (the hint's, or the stream's), for
    /// commands whose shape depends on it (whether a redelivery is allowed).
    pub async fn execute_hinted(
        &self,
        tenant: &str,
        signal_id: Uuid,
        command: impl Fn(&SignalState) -> SignalCommand,
        actor: &str,
        now: DateTime<Utc>,
        known: Option<Known<'_>>,
    ) -> Result<Hinted> {
        if let Some(known) = known {
            let cmd = command(&known.hint.status());
            let body = match decide_hinted(signal_id, &known.hint, &cmd, now) {
                // The hint is the newest event, and what it refuses stays refused.
                Some(Err(refused)) => return Err(refused.into()),
                Some(Ok(bodies)) => <[EventBody; 1]>::try_from(bodies).ok().map(|[body]| body),
                None => None,
            };
            if let Some(body) = body {
                let mut event = Event::new(tenant, Some(actor.to_string()), now, body);
                event.correlation_id = known.correlation_id;
                match self.append(&event, Expect::LastSubjectSeq(known.last_seq)).await {
                    Ok(a) => return Ok(Hinted { appended: Some((a.seq, event.body)), state: None }),
                    // Something happened since the hint: read the stream and decide again.
                    Err(Error::Conflict { .. }) => {}
                    Err(e) => return Err(settled(e)),
                }
            }
        }
        for _ in 0..MAX_ATTEMPTS {
            let (state, last_seq) = self.load(tenant, signal_id).await?;
            let bodies = decide(&state, &command(&state), now)?;
            let Ok([body]) = <[EventBody; 1]>::try_from(bodies) else {
                // Nothing to append (an ack repeated): the state already answers.
                return Ok(Hinted { appended: None, state: Some(state) });
            };
            let mut event = Event::new(tenant, Some(actor.to_string()), now, body);
            event.correlation_id = state.sent.as_ref().and_then(|s| s.correlation_id.clone());
            match self.append(&event, Expect::LastSubjectSeq(last_seq)).await {
                Ok(a) => {
                    let mut state = state;
                    state.apply(&event.body);
                    return Ok(Hinted { appended: Some((a.seq, event.body)), state: Some(state) });
                }
                Err(Error::Conflict { .. }) => continue,
                Err(e) => return Err(settled(e)),
            }
        }
        Err(Error::Unavailable(format!("signal {signal_id} is too contended")))
    }

    /// Records a send decision. The first event on a signal's subject is appended with
    /// "subject empty" as the condition, so of several sends sharing a dedupe key exactly one is
    /// recorded, and the others get the state of the one that was. A subject holding only void
    /// events (sends stored too late to count) counts as empty.
    pub async fn record_send(
        &self,
        tenant: &str,
        actor: &str,
        decision: SendDecision,
        now: DateTime<Utc>,
    ) -> Result<SendRecorded> {
        let (signal_id, correlation_id, body) = match decision {
            SendDecision::Accepted(sent) => (sent.signal_id, sent.correlation_id.clone(), EventBody::SignalSent(sent)),
            SendDecision::Bounced(b) => (b.signal_id, None, EventBody::SignalBounced(b)),
        };
        let mut expect = 0;
        let mut body = Some(body);
        for _ in 0..MAX_ATTEMPTS {
            // Each attempt is an event of its own (a new id); the body moves from one to the next.
            let Some(next) = body.take() else { break };
            let mut event = Event::new(tenant, Some(actor.to_string()), now, next);
            event.correlation_id = correlation_id.clone();
            match self.append(&event, Expect::LastSubjectSeq(expect)).await {
                Ok(a) => {
                    let state = SignalState::from_event(event.body);
                    return Ok(SendRecorded { state, created: true, seq: a.seq });
                }
                Err(Error::Conflict { .. }) => {
                    let (state, seq) = self.load(tenant, signal_id).await?;
                    // Only void events there: an earlier attempt was stored too late to count
                    // (its caller heard "nothing was accepted"), so this send is still the first.
                    if state.sent.is_none() && !state.bounced && seq > expect {
                        expect = seq;
                        body = Some(event.body);
                        continue;
                    }
                    return Ok(SendRecorded { state, created: false, seq });
                }
                Err(e) => return Err(e),
            }
        }
        Err(Error::Unavailable(format!("signal {signal_id} is too contended")))
    }

    /// Appends an event that is not part of any signal's life (sessions, agents), unconditionally.
    pub async fn record(&self, event: &Event) -> Result<Appended> {
        self.append(event, Expect::Any).await
    }
}

impl SignalStore {
    /// Decides `command` on agent `identity` against its subject and appends the event with a
    /// compare-and-set, deciding again whenever another writer got there first, so of
    /// concurrent registrations (or a registration racing a removal) on every gateway exactly
    /// one wins. Returns the event and its sequence.
    pub async fn execute_agent(
        &self,
        tenant: &str,
        identity: &str,
        command: &AgentCommand,
        actor: &str,
        now: DateTime<Utc>,
    ) -> Result<(u64, Event)> {
        let subject = self.log.subjects().of(tenant, Entity::Agent(identity));
        for _ in 0..MAX_ATTEMPTS {
            let stored = self.log.read_subject(&subject).await?;
            let last = stored.last().map_or(0, |s| s.seq);
            let state = AgentState::from_events(stored.iter().map(|s| &s.event.body));
            let event = Event::new(tenant, Some(actor.to_string()), now, crate::agent::decide(&state, command)?);
            match self.append(&event, Expect::LastSubjectSeq(last)).await {
                Ok(a) => return Ok((a.seq, event)),
                Err(Error::Conflict { .. }) => continue,
                Err(e) => return Err(e),
            }
        }
        Err(Error::Unavailable(format!("agent {identity} is too contended")))
    }

    /// Issues or revokes a tenant admin token: one compare-and-set on the token's own subject.
    pub async fn execute_admin_token(
        &self,
        tenant: &str,
        token_id: uuid::Uuid,
        command: &crate::admin_token::AdminTokenCommand,
        actor: &str,
        now: DateTime<Utc>,
    ) -> Result<(u64, Event)> {
        let subject = self.log.subjects().of(tenant, Entity::AdminToken(token_id));
        for _ in 0..MAX_ATTEMPTS {
            let stored = self.log.read_subject(&subject).await?;
            let last = stored.last().map_or(0, |s| s.seq);
            let state = crate::admin_token::AdminTokenState::from_events(stored.iter().map(|s| &s.event.body));
            let event = Event::new(tenant, Some(actor.to_string()), now, crate::admin_token::decide(state, command)?);
            match self.append(&event, Expect::LastSubjectSeq(last)).await {
                Ok(a) => return Ok((a.seq, event)),
                Err(Error::Conflict { .. }) => continue,
                Err(e) => return Err(e),
            }
        }
        Err(Error::Unavailable(format!("token {token_id} is too contended")))
    }
}

/// When a signal was made, if its id says (a v7 id's first 48 bits are its unix milliseconds;
/// ids made before v7 do not say).
fn born_of(id: Uuid) -> Option<DateTime<Utc>> {
    if id.get_version_num() != 7 {
        return None;
    }
    let b = id.as_bytes();
    let ms = u64::from_be_bytes([0, 0, b[0], b[1], b[2], b[3], b[4], b[5]]);
    DateTime::from_timestamp_millis(i64::try_from(ms).ok()?)
}

/// Whether `body` can be the first event on a signal's subject: its send, or the bounce that
/// took its place.
fn is_birth(body: &EventBody) -> bool {
    matches!(body, EventBody::SignalSent(_) | EventBody::SignalBounced(_))
}

/// The signal a state describes, or `NotFound`.
pub fn sent_of(state: &SignalState) -> Result<&SignalSent, DomainError> {
    state.sent.as_deref().ok_or(DomainError::NotFound)
}

impl SignalStore {
    /// Records a plugin fact with the next per-(tenant, plugin) `seq`: the seq is the previous
    /// fact's plus one, and the append is conditional on that previous fact still being the
    /// newest, so concurrent writers never share a seq. Returns the assigned seq.
    pub async fn record_fact(
        &self,
        tenant: &str,
        actor: &str,
        fact: crate::event::PluginFactRecorded,
        now: DateTime<Utc>,
    ) -> Result<u64> {
        let subject = self.log.subjects().of(tenant, Entity::Plugin(&fact.plugin));
        for _ in 0..MAX_ATTEMPTS * 4 {
            let last = self.log.last_on_subject(&subject).await?;
            let (last_seq, prev) = match &last {
                Some(s) => match &s.event.body {
                    EventBody::PluginFactRecorded(f) => (s.seq, f.seq),
                    _ => (s.seq, 0),
                },
                None => (0, 0),
            };
            let body =
                EventBody::PluginFactRecorded(crate::event::PluginFactRecorded { seq: prev + 1, ..fact.clone() });
            let event = Event::new(tenant, Some(actor.to_string()), now, body);
            match self.append(&event, Expect::LastSubjectSeq(last_seq)).await {
                Ok(_) => return Ok(prev + 1),
                Err(Error::Conflict { .. }) => continue,
                Err(e) => return Err(e),
            }
        }
        Err(Error::Unavailable(format!("plugin {} is too contended", fact.plugin)))
    }
}

/// A delivery the log could not store before its signal's `expires_at` is a delivery of an
/// expired signal: the rules' own answer, so callers handle it as they handle that refusal.
pub(crate) fn settled(e: Error) -> Error {
    match e {
        Error::TooLate => DomainError::Refused(Refusal::Expired).into(),
        e => e,
    }
}
