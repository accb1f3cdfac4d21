//! Folding one subject's events into its state: a state implements `apply` (one event in) and
//! gets `from_events` (all of them, from the default) with it.

use crate::event::EventBody;

/// A state built by folding events in order.
pub trait Fold: Default {
    /// Folds one event in; events that cannot follow the current state are ignored.
    fn apply(&mut self, event: &EventBody);

    /// The state after `events`, starting from the default.
    fn from_events<'a>(events: impl IntoIterator<Item = &'a EventBody>) -> Self {
        let mut state = Self::default();
        events.into_iter().for_each(|e| state.apply(e));
        state
    }
}
