//! Delivery of pushed signals: each one once (a redelivery is dropped by id, re-acked when it
//! was handled), to a waiting `ask`, else to the inbox — which the handler's `dispatch` task
//! drains (acking after `Ok`), or `Client::receive` when there is no handler.
//!
//! Deliberately no I/O: the session loop (`session.rs`) hands it each pushed signal, the acks
//! go out through `acks.rs`. It never names the `Client`: the handler runs through a closure the
//! facade hands to `dispatch`.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use crate::acks::queue_ack;
use crate::shared::{HandlerRun, Inner};
use crate::types::Signal;

/// A pushed signal: dropped when seen (re-acked if it was handled: the first ack may have died
/// with the old session), handed to a waiting `ask`, else queued for the handler/`receive`.
pub(crate) fn on_push(inner: &Inner, sig: Signal) {
    let mut seen = inner.seen.lock().unwrap();
    if let Some(handled) = seen.get(&sig.id) {
        inner.duplicates_dropped.fetch_add(1, Ordering::Relaxed);
        tracing::debug!(signal_id = %sig.id, redelivered = sig.redelivered, "duplicate signal dropped");
        if handled && inner.auto_ack {
            queue_ack(inner, sig.id);
        }
        return;
    }
    if let Some(cid) = &sig.correlation_id {
        if let Some(tx) = inner.asks.lock().unwrap().remove(cid) {
            seen.remember(&sig.id, true);
            if inner.auto_ack {
                queue_ack(inner, sig.id.clone());
            }
            let _ = tx.send(sig);
            return;
        }
    }
    seen.remember(&sig.id, false);
    let _ = inner.inbox_tx.send(sig);
}

/// Runs the handler on each queued signal, one at a time; acks (batched) after `Ok`, forgets
/// the id after `Err` so the redelivery runs it again. `run_handler` is the facade's: it lends
/// the handler a client handle per signal and answers `None` once the caller's last handle is
/// gone, which ends this task (so dropping the client ends it).
pub(crate) async fn dispatch<F>(inner: Arc<Inner>, run_handler: F)
where
    F: Fn(Signal) -> Option<HandlerRun> + Send + 'static,
{
    let mut rx = inner.inbox_rx.lock().await;
    loop {
        let sig = tokio::select! {
            _ = inner.shutdown.cancelled() => return,
            s = rx.recv() => match s { Some(s) => s, None => return },
        };
        let id = sig.id.clone();
        let Some(run) = run_handler(sig) else { return };
        match run.await {
            Ok(()) => {
                inner.seen.lock().unwrap().remember(&id, true);
                if inner.auto_ack {
                    queue_ack(&inner, id);
                }
            }
            Err(e) => {
                tracing::error!(signal_id = %id, error = %e, "the signal handler failed; not acked: it comes back on the next session");
                inner.seen.lock().unwrap().forget(&id);
            }
        }
    }
}
