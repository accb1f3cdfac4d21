//! The worker side of directives: `on_directive(type_pattern, handler)` takes each
//! `DirectiveRequested` of a matching type the session pushes, starts (claims) the directive,
//! runs the handler with a [`Progress`] handle, and completes or fails it with what the handler
//! returned; the request signal is acked either way (a request whose directive ended, or that
//! another member claimed, is skipped silently).
//!
//! Deliberately one task per registration, holding only the engine's `Inner` and a weak handle
//! (a run lends the handler a `Client` through `Progress`, as `on_signal` lends one): the
//! worker never keeps the client alive. Routing the requests to it is `delivery.rs`; the calls
//! are `directives.rs`.

use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::sync::{Arc, Weak};
use std::time::Duration;

use futures::stream::{FuturesUnordered, StreamExt};
use futures::FutureExt;
use serde_json::{json, Value};
use tokio::sync::mpsc;

use crate::acks::queue_ack;
use crate::client::{Client, Life};
use crate::error::{Error, Result};
use crate::shared::{usage, HandlerError, Inner};
use crate::types::Signal;
use crate::types_directive::{Directive, DirectiveStatus, Failure};

/// The failure code of a handler error that is neither a [`Failure`] nor this crate's `Error`.
pub const HANDLER_ERROR_CODE: &str = "handler_error";
/// The failure message is cut to this many characters (the bus takes at most 1,000).
const MAX_MESSAGE_CHARS: usize = 1000;
/// The failure code is cut to this many characters.
const MAX_CODE_CHARS: usize = 64;

/// Handed to an `on_directive` handler with its directive: reports progress, and lends the
/// client (to send signals, or call the bus) for the length of the run.
#[derive(Debug, Clone)]
pub struct Progress {
    client: Client,
    directive_id: String,
}

impl Progress {
    /// Records progress on the directive (a message ≤ 1,000 chars, a percent 0–100; both
    /// optional) and answers it. `InvalidTransition` tells the handler its directive ended
    /// meanwhile (canceled, expired): it may stop, its result would be refused.
    pub async fn report(&self, message: Option<&str>, percent: Option<u8>) -> Result<Directive> {
        self.client.progress_directive(&self.directive_id, message, percent).await
    }

    /// The directive's id.
    pub fn directive_id(&self) -> &str {
        &self.directive_id
    }

    /// The client the worker runs on.
    pub fn client(&self) -> &Client {
        &self.client
    }
}

impl Client {
    /// Works on the directives of a type: each `DirectiveRequested` this client's session is
    /// pushed whose directive type matches `type_pattern` (exact, or ending in `*`: a prefix; the
    /// most specific registration wins) is started (claimed), handed to `handler` with a
    /// [`Progress`] handle, and then completed with the handler's `Ok` value (an object as it
    /// is, `Null` as `{}`, any other value wrapped `{"value": v}`) or failed with its `Err`: the
    /// code and message of a [`Failure`], the code of this crate's `Error`, else
    /// [`HANDLER_ERROR_CODE`] and the error's text (a panic: `panic`); a result the bus refuses
    /// (`PayloadTooLarge`, `InvalidRequest`) fails it with that error's code. A request whose
    /// directive ended, was claimed by another member, or that you declined is skipped; one
    /// redelivered while still started by you (a crash mid-handler) runs again. The request is
    /// acked either way — unless the bus could not take a call even after retries (0.5, 1, 2 s)
    /// or the client closed mid-handler: then it comes back on the next session. The
    /// `DirectiveCanceled` / `DirectiveExpired` signals of the types it serves (not issued by
    /// you) are acked and dropped; a handler at work learns of the end from its next report.
    ///
    /// Register before `connect()`: requests pushed before the registration (those queued while
    /// offline come at once) go to `on_signal` / `receive`. At most `max_concurrent_handlers`
    /// runs of one registration are under way at once. Needs a tokio runtime; `Closed` after
    /// `close()`; `Usage` for a pattern registered already, or with `*` elsewhere than at its end.
    pub fn on_directive<F, Fut>(&self, type_pattern: impl Into<String>, handler: F) -> Result<()>
    where
        F: Fn(Directive, Progress) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = std::result::Result<Value, HandlerError>> + Send + 'static,
    {
        let pattern = type_pattern.into();
        if pattern.is_empty() || pattern.trim_end_matches('*').contains('*') || pattern.ends_with("**") {
            return Err(usage("a directive type pattern is a type, or a prefix ending in one `*`"));
        }
        if self.inner.shutdown.is_cancelled() {
            return Err(Error::Closed);
        }
        let runtime = tokio::runtime::Handle::try_current()
            .map_err(|_| usage("on_directive needs a tokio runtime (call it from async code)"))?;
        let (tx, rx) = mpsc::unbounded_channel();
        {
            let mut workers = self.inner.directive_workers.lock().unwrap();
            if workers.iter().any(|(p, _)| *p == pattern) {
                return Err(usage(&format!("a handler for {pattern:?} is registered already")));
            }
            workers.push((pattern.clone(), tx));
        }
        let (inner, life) = (self.inner.clone(), Arc::downgrade(&self.life));
        let task = runtime.spawn(work(inner, life, rx, Arc::new(handler), pattern));
        self.inner.tasks.lock().unwrap().push(task);
        Ok(())
    }
}

/// One registration's task: runs the requests routed to it, at most `max_concurrent_handlers`
/// at once, polled here (no task per request), until shutdown or the caller's last handle.
async fn work<F, Fut>(
    inner: Arc<Inner>,
    life: Weak<Life>,
    mut rx: mpsc::UnboundedReceiver<Signal>,
    handler: Arc<F>,
    pattern: String,
) where
    F: Fn(Directive, Progress) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = std::result::Result<Value, HandlerError>> + Send + 'static,
{
    let mut running = FuturesUnordered::new();
    let limit = inner.max_concurrent_handlers.max(1);
    loop {
        tokio::select! {
            _ = inner.shutdown.cancelled() => break,
            Some(()) = running.next(), if !running.is_empty() => {}
            s = rx.recv(), if running.len() < limit => {
                let Some(sig) = s else { break };
                let Some(client) = Client::revive(&inner, &life) else { break };
                running.push(run_one(client, sig, handler.clone()));
            }
        }
    }
    tracing::debug!(pattern, "directive worker stopped");
}

/// How a run ends for its request signal.
enum Settle {
    /// Handled (or skipped for good): ack it.
    Ack,
    /// Not taken by the bus: forget it, so its redelivery runs it again.
    Retry,
}

async fn run_one<F, Fut>(client: Client, sig: Signal, handler: Arc<F>)
where
    F: Fn(Directive, Progress) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = std::result::Result<Value, HandlerError>> + Send + 'static,
{
    let settle = match serde_json::from_value::<Directive>(sig.payload.clone()) {
        Ok(d) => run_directive_request(&client, d, handler.as_ref()).await,
        Err(e) => {
            tracing::error!(signal_id = %sig.id, error = %e, "a DirectiveRequested this client cannot read; acked");
            Settle::Ack
        }
    };
    let inner = &client.inner;
    match settle {
        Settle::Ack => {
            inner.seen.lock().unwrap().remember(&sig.id, true);
            queue_ack(inner, sig.id);
        }
        Settle::Retry => inner.seen.lock().unwrap().forget(&sig.id),
    }
}

async fn run_directive_request<F, Fut>(client: &Client, d: Directive, handler: &F) -> Settle
where
    F: Fn(Directive, Progress) -> Fut,
    Fut: Future<Output = std::result::Result<Value, HandlerError>>,
{
    let id = d.directive_id.clone();
    let started = match with_retries(client, &id, "start", || client.start_directive(&id)).await {
        Ok(started) => started,
        // Redelivered after a crash, and still ours: run it again.
        Err(Error::InvalidTransition { directive: Some(now), .. })
            if now.status == DirectiveStatus::Started && now.claimed_by == client.identity() =>
        {
            tracing::info!(directive_id = %id, "resuming a directive this identity started");
            *now
        }
        Err(e @ (Error::InvalidTransition { .. } | Error::AlreadyClaimed { .. } | Error::Forbidden { .. })) => {
            tracing::debug!(directive_id = %id, reason = %e.code(), "directive request skipped");
            return Settle::Ack;
        }
        Err(e @ Error::NotFound(_)) => {
            tracing::debug!(directive_id = %id, error = %e, "directive request skipped: no longer yours");
            return Settle::Ack;
        }
        Err(e) => {
            tracing::warn!(directive_id = %id, error = %e, "could not start the directive: its request comes back");
            return Settle::Retry;
        }
    };
    let progress = Progress { client: client.clone(), directive_id: id.clone() };
    let ran = AssertUnwindSafe(handler(started, progress)).catch_unwind().await;
    let failure = match ran {
        Ok(Ok(value)) => {
            let result = match value {
                Value::Object(_) => value,
                Value::Null => json!({}),
                v => json!({"value": v}),
            };
            match with_retries(client, &id, "complete", || client.complete_directive(&id, result.clone())).await {
                // A result the bus refuses: the directive fails with why.
                Err(e @ (Error::PayloadTooLarge(_) | Error::InvalidRequest(_))) => {
                    Failure::new(e.code(), cut(&e.to_string(), MAX_MESSAGE_CHARS))
                }
                other => return settled(&id, other),
            }
        }
        Ok(Err(e)) => failure_of(e.as_ref()),
        Err(panic) => {
            let text = panic
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "the handler panicked".into());
            Failure::new("panic", cut(&text, MAX_MESSAGE_CHARS))
        }
    };
    settled(
        &id,
        with_retries(client, &id, "fail", || client.fail_directive(&id, &failure.code, &failure.message)).await,
    )
}

/// What recording the end means for the request: acked, unless the bus still could not take it.
fn settled(id: &str, finished: Result<Directive>) -> Settle {
    match finished {
        Ok(_) => Settle::Ack,
        Err(e @ Error::InvalidTransition { .. }) => {
            tracing::info!(directive_id = %id, error = %e, "the directive ended while its handler ran");
            Settle::Ack
        }
        Err(e) if retryable(&e) => {
            tracing::warn!(directive_id = %id, error = %e, "could not record the directive's end: its request comes back");
            Settle::Retry
        }
        Err(e) => {
            tracing::warn!(directive_id = %id, error = %e, "could not record the directive's end");
            Settle::Ack
        }
    }
}

/// The failure a handler's error stands for.
fn failure_of(e: &(dyn std::error::Error + Send + Sync + 'static)) -> Failure {
    let (code, message) = if let Some(f) = e.downcast_ref::<Failure>() {
        (f.code.as_str(), f.message.clone())
    } else if let Some(err) = e.downcast_ref::<Error>() {
        (err.code(), err.to_string())
    } else {
        (HANDLER_ERROR_CODE, e.to_string())
    };
    Failure::new(cut(code, MAX_CODE_CHARS), cut(&message, MAX_MESSAGE_CHARS))
}

fn cut(text: &str, max: usize) -> String {
    text.chars().take(max).collect()
}

/// One call of the worker's, repeated after 0.5, 1 and 2 s while the bus could not take it
/// (unreachable, 503, 500, 429): a blip should neither drop a request nor lose a result.
async fn with_retries<C, Fut>(client: &Client, id: &str, action: &str, call: C) -> Result<Directive>
where
    C: Fn() -> Fut,
    Fut: Future<Output = Result<Directive>>,
{
    let (mut pause, mut attempt) = (Duration::from_millis(500), 1);
    loop {
        match call().await {
            Err(e) if attempt < 4 && retryable(&e) && !client.inner.shutdown.is_cancelled() => {
                tracing::debug!(directive_id = id, action, attempt, error = %e, "retrying a directive call");
                tokio::time::sleep(pause).await;
                pause *= 2;
                attempt += 1;
            }
            other => return other,
        }
    }
}

fn retryable(e: &Error) -> bool {
    e.is_spoolable() || matches!(e, Error::Internal(_) | Error::RateLimited { .. })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_handler_error_becomes_a_failure() {
        let f: HandlerError = Failure::new("NoSuchPackage", "jq is nowhere").into();
        assert_eq!(failure_of(f.as_ref()), Failure::new("NoSuchPackage", "jq is nowhere"));
        let e: HandlerError = Error::Closed.into();
        assert_eq!(failure_of(e.as_ref()).code, "closed");
        let io: HandlerError = std::io::Error::other("disk full").into();
        assert_eq!(failure_of(io.as_ref()), Failure::new(HANDLER_ERROR_CODE, "disk full"));
        let long: HandlerError = "x".repeat(5000).into();
        assert_eq!(failure_of(long.as_ref()).message.len(), MAX_MESSAGE_CHARS);
        let coded: HandlerError = Failure::new("C".repeat(100), "m").into();
        assert_eq!(failure_of(coded.as_ref()).code.len(), MAX_CODE_CHARS);
    }
}
