//! The directive calls (CONTRACT §14) of an agent: create, get (waiting for the end), list, the
//! six transitions, and `run_directive` — create, then wait for the lifecycle signal that says
//! how it ended. All over HTTP, with or without a session (the plan's choice: a directive is
//! not a hot path, and HTTP answers the create's 201/200).
//!
//! Deliberately no polling: `run_directive` waits on the signals the session pushes (routed to
//! it by `delivery.rs`, by the directive's idempotency_key) and on this client's own
//! transitions; the worker side, `on_directive`, is `directive_worker.rs`.

use std::time::Duration;

use reqwest::Method;
use serde_json::{json, Value};
use tokio::sync::mpsc;
use tokio::time::Instant;

use crate::client::Client;
use crate::error::{Error, Result};
use crate::http::segment;
use crate::shared::{usage, Inner};
use crate::types_directive::{Directive, DirectivePage, DirectiveQuery, DirectiveRequest, DirectiveStatus};

/// How long `run_directive` waits when its timeout is too long to count (`Duration::MAX`).
const CENTURY: Duration = Duration::from_secs(100 * 365 * 24 * 3600);

/// The longest `get_directive` wait the bus takes.
const MAX_WAIT: Duration = Duration::from_secs(60);

/// Removes a finished `run_directive`'s waiter, however it ended.
struct Waiter<'a> {
    inner: &'a Inner,
    key: String,
    tx: mpsc::UnboundedSender<Directive>,
}

impl Drop for Waiter<'_> {
    fn drop(&mut self) {
        let mut waits = self.inner.directive_waits.lock().unwrap();
        if let Some(list) = waits.get_mut(&self.key) {
            list.retain(|tx| !tx.same_channel(&self.tx));
            if list.is_empty() {
                waits.remove(&self.key);
            }
        }
    }
}

/// Tells the `run_directive`s waiting on `d` what this client's own call made of it (the
/// issuer's cancel sends the issuer no signal).
fn tell_waiters(inner: &Inner, d: &Directive) {
    if inner.identity.lock().unwrap().as_deref() != Some(d.issuer.as_str()) {
        return;
    }
    if let Some(list) = inner.directive_waits.lock().unwrap().get(&d.idempotency_key) {
        for tx in list {
            let _ = tx.send(d.clone());
        }
    }
}

/// What a directive's end means to `run_directive`: its result, or the error of its outcome.
fn outcome(d: Directive) -> Result<Value> {
    let directive = Box::new(d);
    match directive.status {
        DirectiveStatus::Completed => Ok(directive.result.unwrap_or_else(|| json!({}))),
        DirectiveStatus::Failed => Err(Error::DirectiveFailed { directive }),
        DirectiveStatus::Rejected => Err(Error::DirectiveRejected { directive }),
        DirectiveStatus::Canceled => Err(Error::DirectiveCanceled { directive }),
        _ => Err(Error::DirectiveExpired { directive }),
    }
}

impl Client {
    async fn directive_call(&self, method: Method, path: &str, body: Option<&Value>) -> Result<Directive> {
        let (status, answer) = self.inner.api.request_status(method.clone(), path, &[], body, &[]).await?;
        let mut d: Directive = serde_json::from_value(answer)
            .map_err(|e| Error::Protocol(format!("{method} {path}: unexpected answer: {e}")))?;
        d.created = status == 201;
        Ok(d)
    }

    async fn transition(&self, id: &str, action: &str, body: Value) -> Result<Directive> {
        let path = format!("/v1/directives/{}/{action}", segment(id));
        let d = self.directive_call(Method::POST, &path, Some(&body)).await?;
        tell_waiters(&self.inner, &d);
        Ok(d)
    }

    /// Creates a directive (CONTRACT §14) and answers it, `created: true`. It always carries an
    /// idempotency_key (the request's, or a fresh `sbd-<uuid>`): repeating the request answers
    /// the existing directive as it is now (`created: false`) and creates nothing.
    /// Errors: `IdempotencyConflict { directive_id }` (the key with another `to`, `type` or
    /// `params`), `UnknownRecipient`, `UnknownGroup`, `Forbidden` (the issuers policy),
    /// `InvalidRequest`, `PayloadTooLarge`.
    pub async fn create_directive(&self, mut req: DirectiveRequest) -> Result<Directive> {
        req.idempotency_key.get_or_insert_with(|| format!("sbd-{}", uuid::Uuid::new_v4()));
        let body = serde_json::to_value(&req).map_err(|e| Error::Protocol(format!("cannot encode: {e}")))?;
        self.directive_call(Method::POST, "/v1/directives", Some(&body)).await
    }

    /// A directive you issued or are (a member of) its assignee; `NotFound` for anyone else.
    /// With `wait` (at most 60 s), the bus answers once it has ended, or when `wait` is over.
    pub async fn get_directive(&self, directive_id: &str, wait: Option<Duration>) -> Result<Directive> {
        let path = format!("/v1/directives/{}", segment(directive_id));
        let Some(wait) = wait.filter(|w| !w.is_zero()) else {
            return self.directive_call(Method::GET, &path, None).await;
        };
        if wait > MAX_WAIT {
            return Err(usage("get_directive waits at most 60 seconds"));
        }
        let secs = wait.as_secs() + u64::from(wait.subsec_nanos() > 0);
        let api = self.inner.api.with_timeout(self.inner.request_timeout + Duration::from_secs(secs));
        api.typed(Method::GET, &path, &[("wait", Some(secs.to_string()))], None).await
    }

    /// Your directives, newest first, one page (`next_before` continues).
    pub async fn list_directives(&self, q: &DirectiveQuery) -> Result<DirectivePage> {
        let query = [
            ("role", q.role.clone()),
            ("status", q.status.clone()),
            ("type", q.directive_type.clone()),
            ("limit", q.limit.map(|l| l.to_string())),
            ("before", q.before.clone()),
        ];
        self.inner.api.typed(Method::GET, "/v1/directives", &query, None).await
    }

    /// Starts a directive assigned to you (for a group's, claims it). `AlreadyClaimed
    /// { claimed_by }` when another member has it; `InvalidTransition { directive }` when it is
    /// not `requested`; `Forbidden` when you are not its assignee (or declined it).
    pub async fn start_directive(&self, directive_id: &str) -> Result<Directive> {
        self.transition(directive_id, "start", json!({})).await
    }

    /// Reports progress on a directive you started: a message (≤ 1,000 chars) and a percent
    /// (0–100), both optional. Sends no signal.
    pub async fn progress_directive(
        &self,
        directive_id: &str,
        message: Option<&str>,
        percent: Option<u8>,
    ) -> Result<Directive> {
        let mut body = json!({});
        if let Some(m) = message {
            body["message"] = json!(m);
        }
        if let Some(p) = percent {
            body["percent"] = json!(p);
        }
        self.transition(directive_id, "progress", body).await
    }

    /// Completes a directive with its result (a JSON object, ≤ 64 KiB); from `requested` it
    /// claims and completes at once. The issuer is sent `DirectiveCompleted`.
    pub async fn complete_directive(&self, directive_id: &str, result: Value) -> Result<Directive> {
        self.transition(directive_id, "complete", json!({"result": result})).await
    }

    /// Fails a directive with a code and a message; the issuer is sent `DirectiveFailed`.
    pub async fn fail_directive(&self, directive_id: &str, code: &str, message: &str) -> Result<Directive> {
        self.transition(directive_id, "fail", json!({"failure": {"code": code, "message": message}})).await
    }

    /// Declines a directive assigned to you. For a group's, you decline for yourself only; it is
    /// `rejected` once every member has declined.
    pub async fn reject_directive(&self, directive_id: &str, reason: Option<&str>) -> Result<Directive> {
        self.transition(directive_id, "reject", reason.map_or_else(|| json!({}), |r| json!({"reason": r}))).await
    }

    /// Cancels a directive you issued (while open); a `run_directive` waiting on it on this
    /// client ends with `DirectiveCanceled`.
    pub async fn cancel_directive(&self, directive_id: &str, reason: Option<&str>) -> Result<Directive> {
        self.transition(directive_id, "cancel", reason.map_or_else(|| json!({}), |r| json!({"reason": r}))).await
    }

    /// Creates a directive and waits for its end: the result object when completed, else
    /// `DirectiveFailed`, `DirectiveRejected`, `DirectiveExpired` or `DirectiveCanceled` carrying
    /// the directive, or `DirectiveTimeout` when it has not ended within `timeout` (it is left as
    /// it is). Waits on the lifecycle signals the session pushes — acking them — not by polling,
    /// so it needs an open session: without one it fails at once with `Unreachable` and creates
    /// nothing. `Usage` for a zero timeout; `Duration::MAX` waits until it ends (at the latest,
    /// its deadline's expiry); `close()` ends the wait with `Closed`.
    pub async fn run_directive(
        &self,
        to: &str,
        directive_type: &str,
        params: Value,
        timeout: Duration,
    ) -> Result<Value> {
        self.run_directive_with(DirectiveRequest::new(to, directive_type).params(params), timeout).await
    }

    /// `run_directive` with every create field (a repeated idempotency_key waits on the
    /// existing directive, and answers at once if it has ended).
    pub async fn run_directive_with(&self, mut req: DirectiveRequest, timeout: Duration) -> Result<Value> {
        if timeout.is_zero() {
            return Err(usage("run_directive's timeout must be longer than zero"));
        }
        if !self.connected() {
            let message = format!(
                "run_directive {} for {}: no open session with {}, and its end could only come over one \
                 (call connect() first)",
                req.directive_type,
                req.to,
                self.inner.api.base()
            );
            return Err(Error::Unreachable { message, cause: "no open session".into(), dedupe_key: None });
        }
        // A timeout too long to add (Duration::MAX: "as long as it takes") waits a century.
        let until = Instant::now().checked_add(timeout).unwrap_or_else(|| Instant::now() + CENTURY);
        let key = req.idempotency_key.get_or_insert_with(|| format!("sbd-{}", uuid::Uuid::new_v4())).clone();
        let (tx, mut rx) = mpsc::unbounded_channel();
        self.inner.directive_waits.lock().unwrap().entry(key.clone()).or_default().push(tx.clone());
        let _waiter = Waiter { inner: &self.inner, key, tx };
        let mut d = self.create_directive(req).await?;
        loop {
            if d.status.is_terminal() {
                return outcome(d);
            }
            tokio::select! {
                _ = self.inner.shutdown.cancelled() => return Err(Error::Closed),
                next = tokio::time::timeout_at(until, rx.recv()) => match next {
                    Ok(Some(next)) if next.directive_id == d.directive_id => d = next,
                    Ok(_) => {}
                    Err(_) => {
                        // One last look (a cancel by another client of yours sends you no signal).
                        if let Ok(now) = self.get_directive(&d.directive_id, None).await {
                            d = now;
                        }
                        if d.status.is_terminal() {
                            return outcome(d);
                        }
                        return Err(Error::DirectiveTimeout { directive: Box::new(d), timeout });
                    }
                },
            }
        }
    }
}
