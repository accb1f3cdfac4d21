//! Waiting for a send's push to be recorded: a send that resolved to a live WebSocket session
//! answers `delivered: true` only once the stream holds the `signal.delivered` event, which any
//! gateway's push may append. The stream tail (`tail`) reports every delivery here.
//!
//! Deliberately decides nothing: what a send answers when no delivery comes is `send.rs`'s call
//! (and the stream's, through the per-signal compare-and-set).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use tokio::sync::Notify;
use uuid::Uuid;

/// The signals whose delivery a send is waiting for.
#[derive(Debug, Default)]
pub struct Confirmations {
    // A std mutex: held only to look up or insert an entry, never across an await.
    waiting: Mutex<HashMap<Uuid, Arc<Notify>>>,
}

impl Confirmations {
    /// Starts watching `signal_id`; watch before appending the send, so no delivery is missed.
    pub fn watch(self: &Arc<Self>, signal_id: Uuid) -> Watch {
        let notify = Arc::new(Notify::new());
        self.waiting.lock().unwrap().insert(signal_id, notify.clone());
        Watch { owner: self.clone(), signal_id, notify }
    }

    /// Called for every `signal.delivered` on the stream.
    pub fn delivered(&self, signal_id: Uuid) {
        if let Some(n) = self.waiting.lock().unwrap().get(&signal_id) {
            // Stores a permit if the send is not waiting yet.
            n.notify_one();
        }
    }
}

/// One send's watch; stops watching when dropped.
pub struct Watch {
    owner: Arc<Confirmations>,
    signal_id: Uuid,
    notify: Arc<Notify>,
}

impl Watch {
    /// Whether a delivery of the signal reached the stream within `timeout`.
    pub async fn delivered_within(&self, timeout: std::time::Duration) -> bool {
        tokio::time::timeout(timeout, self.notify.notified()).await.is_ok()
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        self.owner.waiting.lock().unwrap().remove(&self.signal_id);
    }
}
