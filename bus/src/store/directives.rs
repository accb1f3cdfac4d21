//! The command side of directives (CONTRACT §14): load a directive's subject, fold it, let
//! `directive::decide` rule, and append the one event it causes with a compare-and-set on that
//! subject, deciding again whenever another writer got there first. Of racing transitions
//! (complete vs cancel vs expire, two members starting) exactly one is appended; the others are
//! decided again on the stream as it now is and told why they lost (`InvalidTransition`,
//! `AlreadyClaimed`).
//!
//! Then the effects of an appended event, carried out by `send_lifecycle`: its lifecycle
//! signals, recorded as ordinary async sends through `record_send` under their dedupe keys (a
//! retry is a repeat, never a second signal), and the recalls of the `DirectiveRequested`
//! signals nobody should be handed any more.
//!
//! Deliberately reads no presence, groups or policy: the caller hands in a group's members (in
//! `CreateDirective`) and a recipient view function, so this stays the stream's business only.

use chrono::{DateTime, Utc};
use futures::stream::{self, StreamExt};
use uuid::Uuid;

use super::{settled, SendRecorded, SignalStore, MAX_ATTEMPTS};
use crate::catalog::TypeTable;
use crate::directive::{
    decide, directive_id_for, lifecycle_decision, DirectiveCommand, DirectiveEffects, DirectiveState,
};
use crate::error::{DomainError, Error, Result};
use crate::event::{Entity, Event};
use crate::fold::Fold;
use crate::group_store::FANOUT_CONCURRENCY;
use crate::log::Expect;
use crate::send::RecipientView;
use crate::signal::{RecallOutcome, SignalCommand};

/// The result of a directive command: the directive after it, and what it appended (nothing
/// for an idempotent repeat: a create repeating its key, a decline repeated).
#[derive(Debug, Clone)]
pub struct DirectiveExecuted {
    pub state: DirectiveState,
    pub appended: Option<(u64, Event)>,
    /// The newest sequence on the directive's subject after the command.
    pub last_seq: u64,
}

impl DirectiveExecuted {
    /// The effects the appended event causes (none when nothing was appended).
    pub fn effects(&self, tenant: &str) -> DirectiveEffects {
        match &self.appended {
            Some((_, event)) => DirectiveEffects::of(tenant, &self.state, &event.body),
            None => DirectiveEffects::default(),
        }
    }
}

/// A command `decide` refused, and the directive as it was decided on.
#[derive(Debug, Clone)]
pub struct DirectiveRefused {
    pub error: DomainError,
    pub state: Box<DirectiveState>,
}

/// What `send_lifecycle` did: each lifecycle signal's send, and each recall's outcome.
#[derive(Debug, Clone, Default)]
pub struct LifecycleSent {
    /// `(recipient, send)`: `created: false` when an earlier attempt had already recorded it.
    pub sent: Vec<(String, SendRecorded)>,
    /// Recipients the send refused (no longer registered), with the refusal.
    pub refused: Vec<(String, DomainError)>,
    pub recalled: Vec<(Uuid, RecallOutcome)>,
}

impl SignalStore {
    /// The directive's state folded from its subject, and the newest sequence on it.
    pub async fn load_directive(&self, tenant: &str, directive_id: Uuid) -> Result<(DirectiveState, u64)> {
        let subject = self.log().subjects().of(tenant, Entity::Directive(directive_id));
        let stored = self.log().read_subject(&subject).await?;
        let last = stored.last().map_or(0, |s| s.seq);
        Ok((DirectiveState::from_events(stored.iter().map(|s| &s.event.body)), last))
    }

    /// Decides `command` on directive `directive_id` against the stream and appends the event it
    /// causes expecting the subject's newest sequence to be the one decided on; on a lost race,
    /// reads and decides again. A create must name `directive_id_for(tenant, issuer, key)`, so
    /// every repeat of it contends for one subject: the first is appended, the others find it
    /// (the same request: answered with the directive as it is now; another: `IdempotencyConflict`).
    /// An append whose outcome the log cannot tell is returned as the log's error, never guessed.
    pub async fn execute_directive(
        &self,
        tenant: &str,
        directive_id: Uuid,
        command: &DirectiveCommand,
        actor: &str,
        now: DateTime<Utc>,
    ) -> Result<DirectiveExecuted> {
        match self.try_directive(tenant, directive_id, command, actor, now).await? {
            Ok(executed) => Ok(executed),
            Err(refused) => Err(refused.error.into()),
        }
    }

    /// `execute_directive`, with a refusal (`decide`'s error) answered together with the state
    /// it was decided on, read from the stream by this call: a caller that shows the directive
    /// with the refusal reads it no second time.
    pub async fn try_directive(
        &self,
        tenant: &str,
        directive_id: Uuid,
        command: &DirectiveCommand,
        actor: &str,
        now: DateTime<Utc>,
    ) -> Result<Result<DirectiveExecuted, DirectiveRefused>> {
        if let DirectiveCommand::Create(c) = command {
            if c.directive_id != directive_id || directive_id != directive_id_for(tenant, &c.issuer, &c.idempotency_key)
            {
                return Err(DomainError::invalid("a create must name directive_id_for(tenant, issuer, key)").into());
            }
        }
        // A create is tried first on the empty subject, unread: the first of its repeats is
        // appended without a read, and any other finds the subject taken and reads it.
        let mut unread = matches!(command, DirectiveCommand::Create(_));
        for attempt in 0..MAX_ATTEMPTS {
            let (mut state, last_seq) = match std::mem::take(&mut unread) {
                true => (DirectiveState::default(), 0),
                false => self.load_directive(tenant, directive_id).await?,
            };
            let decided = match decide(&state, command, now) {
                Ok(events) => events,
                Err(error) => return Ok(Err(DirectiveRefused { error, state: Box::new(state) })),
            };
            let Some(body) = decided.into_iter().next() else {
                return Ok(Ok(DirectiveExecuted { state, appended: None, last_seq }));
            };
            let mut event = Event::new(tenant, Some(actor.to_string()), now, body);
            event.correlation_id = Some(directive_id.to_string());
            match self.append(&event, Expect::LastSubjectSeq(last_seq)).await {
                Ok(a) => {
                    state.apply(&event.body);
                    tracing::debug!(%directive_id, seq = a.seq, event = event.body.type_name(), "directive event appended");
                    return Ok(Ok(DirectiveExecuted { state, appended: Some((a.seq, event)), last_seq: a.seq }));
                }
                Err(Error::Conflict { .. }) => {
                    tracing::debug!(%directive_id, attempt, action = command.action(), "directive append lost a race");
                }
                Err(e) => return Err(settled(e)),
            }
        }
        Err(Error::Unavailable(format!("directive {directive_id} is too contended")))
    }

    /// Carries out `effects`: records each lifecycle signal as an ordinary async send from the
    /// identity that acted (`record_send`, under its dedupe key, so running this again after a
    /// crash records nothing twice), then recalls the pending `DirectiveRequested` signals on
    /// the issuer's behalf. `view` is presence's answer for a recipient at `now`. A recipient
    /// the send refuses (removed since) is reported in `refused`, not an error: the directive's
    /// event is on the stream whatever becomes of its signals.
    pub async fn send_lifecycle(
        &self,
        tenant: &str,
        table: &TypeTable,
        effects: &DirectiveEffects,
        view: impl Fn(&str) -> RecipientView,
        now: DateTime<Utc>,
    ) -> Result<LifecycleSent> {
        let mut out = LifecycleSent::default();
        let mut decided = Vec::with_capacity(effects.signals.len());
        for signal in &effects.signals {
            match lifecycle_decision(table, tenant, signal, view(&signal.to), now) {
                Ok(decision) => decided.push((signal.to.clone(), signal.from.clone(), decision)),
                Err(refused) => {
                    tracing::warn!(to = %signal.to, signal_type = signal.signal_type, error = %refused, "lifecycle signal refused");
                    out.refused.push((signal.to.clone(), refused));
                }
            }
        }
        // Each signal and each recall is its own compare-and-set: they go out together, so a
        // group's requests or recalls cost one round trip, not one per member.
        let sends = stream::iter(decided).map(|(to, from, decision)| async move {
            self.record_send(tenant, &from, decision, now).await.map(|r| (to, r))
        });
        for sent in sends.buffered(FANOUT_CONCURRENCY).collect::<Vec<_>>().await {
            out.sent.push(sent?);
        }
        let recalls = stream::iter(effects.recalls.clone()).map(|signal_id| {
            let by = effects.recall_by.clone();
            async move {
                let command = SignalCommand::Recall { by: by.clone() };
                let executed = self.execute(tenant, signal_id, &command, &by, now).await?;
                Ok::<_, Error>((signal_id, RecallOutcome::of(&executed.state, &by)))
            }
        });
        for recalled in recalls.buffered(FANOUT_CONCURRENCY).collect::<Vec<_>>().await {
            out.recalled.push(recalled?);
        }
        Ok(out)
    }
}
