//! Batching the auto-acks, as the Python client does: handled ids wait in a buffer and go out
//! together in one `{"op":"ack","signal_ids":[...]}` frame (CONTRACT §5), when `ack_max` ids
//! wait or `ack_interval` after the first one, whichever comes first; one batch in flight at
//! a time, so ids handled meanwhile share the next frame. `close()` flushes the buffer.
//!
//! Deliberately no retry and no durable record: a batch the bus did not take (the session
//! dropped and HTTP failed too) is dropped with a warning. The bus redelivers those signals on
//! the next session, the dedupe drops the duplicates and re-acks them (`delivery::on_push`).

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use crate::rpc::ack_ids;
use crate::shared::Inner;

/// Queues a handled id for the next batch.
pub(crate) fn queue_ack(inner: &Inner, id: String) {
    inner.ack_buffer.lock().unwrap().push(id);
    inner.ack_wakeup.notify_one();
}

/// Sends what the buffer holds; `false` when the bus did not take it.
async fn flush(inner: &Inner) -> bool {
    let ids = std::mem::take(&mut *inner.ack_buffer.lock().unwrap());
    if ids.is_empty() {
        return true;
    }
    match ack_ids(inner, &ids).await {
        Ok(acked) => {
            tracing::debug!(ids = ids.len(), acked, "ack batch sent");
            true
        }
        Err(e) => {
            tracing::warn!(ids = ids.len(), error = %e, "acks not sent: those signals come back on the next session and are deduped");
            false
        }
    }
}

/// The batching task: waits for a first id, lingers for more, sends, repeats until shutdown.
pub(crate) async fn ack_loop(inner: Arc<Inner>) {
    loop {
        tokio::select! {
            _ = inner.shutdown.cancelled() => return,
            _ = inner.ack_wakeup.notified() => {}
        }
        let deadline = Instant::now() + inner.ack_interval;
        while inner.ack_buffer.lock().unwrap().len() < inner.ack_max {
            tokio::select! {
                _ = inner.shutdown.cancelled() => return,
                _ = tokio::time::sleep_until(deadline) => break,
                _ = inner.ack_wakeup.notified() => {} // one more id: check the size again
            }
        }
        // Not raced with shutdown: `close()` flushes whatever this leaves, and a drop gives up.
        flush(&inner).await;
    }
}

/// `close()`'s last flush, over the session while it is still open; bounded, so a bus that
/// stopped answering cannot hold the close up.
pub(crate) async fn flush_before_close(inner: &Inner) {
    if inner.ack_buffer.lock().unwrap().is_empty() {
        return;
    }
    if tokio::time::timeout(Duration::from_secs(2), flush(inner)).await.is_err() {
        tracing::warn!("acks not sent before close: those signals come back on the next session");
    }
}
