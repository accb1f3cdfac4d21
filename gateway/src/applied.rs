//! `Applied`: the stream position this process has applied to its tables, as the stream tail
//! reports it — what drains and back-pressure wait on or measure against.
//!
//! Deliberately a leaf: it carries a number and knows nothing of what was applied or who reads it.

use std::time::Duration;

use tokio::sync::watch;

/// The stream position this process has applied to registry and presence, as the stream tail
/// reports it: what a drain waits for so it sees what presence sees.
#[derive(Debug, Clone)]
pub struct Applied(watch::Receiver<u64>);

impl Applied {
    pub fn channel() -> (watch::Sender<u64>, Applied) {
        let (tx, rx) = watch::channel(0u64);
        (tx, Applied(rx))
    }

    pub fn get(&self) -> u64 {
        *self.0.borrow()
    }

    /// Waits until the stream is applied up to `seq`; false when `timeout` passed first.
    pub async fn wait(&self, seq: u64, timeout: Duration) -> bool {
        let mut rx = self.0.clone();
        let reached = tokio::time::timeout(timeout, rx.wait_for(|s| *s >= seq)).await;
        matches!(reached, Ok(Ok(_)))
    }
}
