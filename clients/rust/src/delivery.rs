//! Delivery of pushed signals: each one once (a redelivery is dropped by id, re-acked when it
//! was handled), to a waiting `run_directive` (its directive's lifecycle signals) or `on_directive`
//! worker (a `DirectiveRequested` of its type; the end of one it serves is acked and dropped),
//! to a waiting `ask`, else to the inbox — which the
//! handler's `dispatch` task drains (acking after `Ok`), or `Client::receive` when there is no
//! handler.
//!
//! Deliberately no I/O: the session loop (`session.rs`) hands it each pushed signal, the acks
//! go out through `acks.rs`. It never names the `Client`: the handler runs through a closure the
//! facade hands to `dispatch`.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use crate::acks::queue_ack;
use futures::stream::{FuturesUnordered, StreamExt};
use tokio::sync::mpsc;

use crate::shared::{HandlerError, HandlerRun, Inner};
use crate::types::Signal;
use crate::types_directive::{pattern_match, Directive};

/// The lifecycle signals the issuer of a directive is sent (CONTRACT §14); `run_directive` waits
/// on them. (`DirectiveCanceled` goes to the worker side; the issuer's own cancel is told to the
/// waiter by `directives.rs`.)
const TO_ISSUER: [&str; 5] =
    ["DirectiveStarted", "DirectiveCompleted", "DirectiveFailed", "DirectiveRejected", "DirectiveExpired"];

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
    if let Some((directive, waiters)) = directive_waiters(inner, &sig) {
        // Consumed by `run_directive`, which returns a value, not the signal: acked here always.
        seen.remember(&sig.id, true);
        queue_ack(inner, sig.id.clone());
        for tx in waiters {
            let _ = tx.send(directive.clone());
        }
        return;
    }
    if served_ending(inner, &sig) {
        // The end of a directive a worker serves: nothing to do (a handler still at work learns
        // of it from its next report), and a client that only serves must not pile these up.
        seen.remember(&sig.id, true);
        queue_ack(inner, sig.id);
        return;
    }
    if let Some(worker) = directive_worker(inner, &sig) {
        seen.remember(&sig.id, false);
        match worker.send(sig) {
            Ok(()) => return,
            Err(back) => {
                seen.forget(&back.0.id);
                let _ = inner.inbox_tx.send(back.0); // the worker is gone: the handler or receive()
                return;
            }
        }
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

/// A lifecycle signal to me as the issuer of a directive a `run_directive` waits on: the
/// directive, and the waiters' channels.
fn directive_waiters(inner: &Inner, sig: &Signal) -> Option<(Directive, Vec<mpsc::UnboundedSender<Directive>>)> {
    if !TO_ISSUER.contains(&sig.signal_type.as_str()) {
        return None;
    }
    let key = sig.payload.get("idempotency_key")?.as_str()?;
    let issuer = sig.payload.get("issuer")?.as_str()?;
    if inner.identity.lock().unwrap().as_deref() != Some(issuer) {
        return None;
    }
    let waiters = inner.directive_waits.lock().unwrap().get(key).filter(|w| !w.is_empty())?.clone();
    match serde_json::from_value::<Directive>(sig.payload.clone()) {
        Ok(d) => Some((d, waiters)),
        Err(e) => {
            tracing::error!(signal_id = %sig.id, error = %e, "a directive lifecycle signal this client cannot read");
            None
        }
    }
}

/// A `DirectiveCanceled` / `DirectiveExpired` of a type an `on_directive` worker serves, for a
/// directive this client did not issue.
fn served_ending(inner: &Inner, sig: &Signal) -> bool {
    if !matches!(sig.signal_type.as_str(), "DirectiveCanceled" | "DirectiveExpired") {
        return false;
    }
    let (Some(issuer), Some(directive_type)) =
        (sig.payload.get("issuer").and_then(|v| v.as_str()), sig.payload.get("type").and_then(|v| v.as_str()))
    else {
        return false;
    };
    if inner.identity.lock().unwrap().as_deref() == Some(issuer) {
        return false;
    }
    inner.directive_workers.lock().unwrap().iter().any(|(pattern, _)| pattern_match(pattern, directive_type).is_some())
}

/// The channel of the `on_directive` worker whose pattern matches a `DirectiveRequested`'s
/// directive type most specifically.
fn directive_worker(inner: &Inner, sig: &Signal) -> Option<mpsc::UnboundedSender<Signal>> {
    if sig.signal_type != "DirectiveRequested" {
        return None;
    }
    let directive_type = sig.payload.get("type")?.as_str()?;
    let workers = inner.directive_workers.lock().unwrap();
    let mut best: Option<(usize, &mpsc::UnboundedSender<Signal>)> = None;
    for (pattern, tx) in workers.iter() {
        if let Some(score) = pattern_match(pattern, directive_type) {
            if best.is_none_or(|(b, _)| score > b) {
                best = Some((score, tx));
            }
        }
    }
    best.map(|(_, tx)| tx.clone())
}

/// Runs the handler on each queued signal, starting them in arrival order with at most
/// `max_concurrent_handlers` running at once (1: one after the other); acks (batched) after each
/// `Ok`, forgets the id after `Err` so the redelivery runs it again. The runs are polled inside
/// this task (no task per signal), so ending it — shutdown, or the caller's last handle gone —
/// ends them too. `run_handler` is the facade's: it lends the handler a client handle per signal
/// and answers `None` once the caller's last handle is gone.
pub(crate) async fn dispatch<F>(inner: Arc<Inner>, run_handler: F)
where
    F: Fn(Signal) -> Option<HandlerRun> + Send + 'static,
{
    let mut rx = inner.inbox_rx.lock().await;
    let mut running = FuturesUnordered::new();
    let limit = inner.max_concurrent_handlers.max(1);
    loop {
        tokio::select! {
            _ = inner.shutdown.cancelled() => return,
            Some((id, outcome)) = running.next(), if !running.is_empty() => finish(&inner, id, outcome),
            s = rx.recv(), if running.len() < limit => {
                let Some(sig) = s else { return };
                let id = sig.id.clone();
                let Some(run) = run_handler(sig) else { return };
                running.push(async move { (id, run.await) });
            }
        }
    }
}

fn finish(inner: &Inner, id: String, outcome: std::result::Result<(), HandlerError>) {
    match outcome {
        Ok(()) => {
            inner.seen.lock().unwrap().remember(&id, true);
            if inner.auto_ack {
                queue_ack(inner, id);
            }
        }
        Err(e) => {
            tracing::error!(signal_id = %id, error = %e, "the signal handler failed; not acked: it comes back on the next session");
            inner.seen.lock().unwrap().forget(&id);
        }
    }
}
