//! Finding a send gathered into a `sends.recorded` (`event::sends`) from its signal's id: its
//! send window names the subject, which holds a few dozen stream messages at most. Used by
//! `SignalStore::load` when a signal's own subject holds no send.
//!
//! Deliberately decides nothing: it only reads, and folds what it read.

use chrono::{DateTime, Utc};
use uuid::Uuid;

use super::SignalStore;
use crate::error::Result;
use crate::event::{send_window, Entity, EventBody, SignalSent};
use crate::log::Stored;
use crate::signal::SignalState;

impl SignalStore {
    /// The send of `signal_id` in its tenant's send window, with the sequence of the
    /// `sends.recorded` holding it. A void copy (stored too late) holds nothing.
    pub(super) async fn find_gathered(
        &self,
        tenant: &str,
        signal_id: Uuid,
        born: DateTime<Utc>,
    ) -> Result<Option<(u64, SignalSent)>> {
        let Some(window) = send_window(signal_id) else { return Ok(None) };
        let subject = self.log.subjects().of(tenant, Entity::Sends(window));
        let find = |stored: Vec<Stored>| {
            stored.into_iter().find_map(|s| match s.event.body {
                EventBody::SendsRecorded(r) => {
                    r.sends.into_iter().find(|sent| sent.signal_id == signal_id).map(|sent| (s.seq, sent))
                }
                _ => None,
            })
        };
        if let Some(found) = find(self.log.read_subject_born(&subject, born).await?) {
            return Ok(Some(found));
        }
        Ok(find(self.log.read_subject(&subject).await?))
    }
}

/// A signal's state from its gathered send, if any, and the events on its subject; with the
/// newest sequence on the subject (0: none there).
pub(super) fn folded(gathered: Option<SignalSent>, stored: Vec<Stored>) -> (SignalState, u64) {
    let last = stored.last().map_or(0, |s| s.seq);
    let mut state = gathered
        .map_or_else(SignalState::default, |sent| SignalState::from_event(EventBody::SignalSent(Box::new(sent))));
    for s in stored {
        state.apply(&s.event.body);
    }
    (state, last)
}
