//! Calls over the open session or, when there is none, over HTTP: one frame out and its
//! `result` frame back (`ws_call`), the choice between the two ways
//! (`over_session_or_http`), and the two calls the engine itself makes — a send's attempt
//! (`transmit_send`, also the spool replay's) and an ack batch (`ack_ids`).
//!
//! Deliberately no retry and no spooling: one attempt, its typed error with the dedupe_key;
//! whether to spool is the caller's decision (`calls.rs`, `replay.rs`).

use std::sync::atomic::Ordering;

use reqwest::Method;
use serde_json::{json, Value};
use tokio::sync::oneshot;
use tokio_tungstenite::tungstenite::Message;

use crate::error::{Error, Result};
use crate::shared::Inner;
use crate::types_send::{SendRequest, SendResult};

pub(crate) fn protocol(what: &str, e: serde_json::Error) -> Error {
    Error::Protocol(format!("{what}: unexpected answer: {e}"))
}

/// Over the session when one is open; over HTTP when none is, or when it dropped before the
/// answer (the retry is safe: sends carry a dedupe_key, the other ops are idempotent).
pub(crate) async fn over_session_or_http<F, Fut>(
    inner: &Inner,
    frame: Value,
    dedupe_key: Option<&str>,
    http: F,
) -> Result<Value>
where
    F: FnOnce() -> Fut,
    Fut: std::future::Future<Output = Result<Value>>,
{
    let mut went_out = false;
    if inner.out.lock().unwrap().is_some() {
        match ws_call(inner, frame, dedupe_key).await {
            Err(Error::Transport { .. }) if inner.out.lock().unwrap().is_none() => {
                tracing::debug!(dedupe_key, "the session dropped during a call; retrying it over HTTP");
                went_out = true;
            }
            other => return other,
        }
    }
    match http().await {
        // HTTP sent nothing, but the frame may have arrived before the session dropped.
        Err(Error::Unreachable { message, cause, dedupe_key }) if went_out => Err(Error::Transport {
            message: format!("{message}, after the session dropped with the call on it"),
            cause: Some(cause),
            dedupe_key,
        }),
        other => other,
    }
}

/// One attempt at a send; the answer's JSON.
pub(crate) async fn transmit_send(inner: &Inner, req: &SendRequest) -> Result<Value> {
    let body = serde_json::to_value(req).map_err(|e| Error::Protocol(format!("cannot encode the send: {e}")))?;
    let key = req.dedupe_key.as_deref();
    let mut frame = body.clone();
    frame["op"] = json!("send");
    over_session_or_http(inner, frame, key, || async {
        inner.api.request(Method::POST, "/v1/signals", &[], Some(&body), &[]).await.map_err(|e| e.with_dedupe_key(key))
    })
    .await
}

pub(crate) fn send_result(v: Value, dedupe_key: &str) -> Result<SendResult> {
    let mut r: SendResult = serde_json::from_value(v).map_err(|e| protocol("send", e))?;
    r.dedupe_key = dedupe_key.to_string();
    Ok(r)
}

pub(crate) async fn ack_ids(inner: &Inner, ids: &[String]) -> Result<u64> {
    let mut total = 0;
    // The HTTP ack takes at most 1000 ids a call; the session takes the same batches.
    for chunk in ids.chunks(1000) {
        inner.ack_calls.fetch_add(1, Ordering::Relaxed);
        let body = json!({"signal_ids": chunk});
        let mut frame = body.clone();
        frame["op"] = json!("ack");
        let answer = over_session_or_http(inner, frame, None, || {
            inner.api.request(Method::POST, "/v1/inbox/ack", &[], Some(&body), &[])
        })
        .await?;
        total += answer["acked"].as_u64().unwrap_or(0);
    }
    Ok(total)
}

/// Sends one frame on the open session and waits for its result; the typed error otherwise.
pub(crate) async fn ws_call(inner: &Inner, mut frame: Value, dedupe_key: Option<&str>) -> Result<Value> {
    let Some(tx) = inner.out.lock().unwrap().clone() else {
        return Err(Error::transport("no open session").with_dedupe_key(dedupe_key));
    };
    let r = format!("c{}", inner.refs.fetch_add(1, Ordering::Relaxed) + 1);
    frame["ref"] = json!(r);
    let op = frame["op"].as_str().unwrap_or_default().to_string();
    let (otx, orx) = oneshot::channel();
    inner.pending.lock().unwrap().insert(r.clone(), otx);
    if tx.send(Message::text(frame.to_string())).is_err() {
        inner.pending.lock().unwrap().remove(&r);
        return Err(Error::transport("the session closed while sending").with_dedupe_key(dedupe_key));
    }
    let answer = match tokio::time::timeout(inner.request_timeout, orx).await {
        Ok(Ok(a)) => a,
        Ok(Err(_)) => {
            return Err(Error::transport("the session closed before the bus answered").with_dedupe_key(dedupe_key))
        }
        Err(_) => {
            inner.pending.lock().unwrap().remove(&r);
            let message = format!("no answer to {op} within {:?}; the outcome is unknown", inner.request_timeout);
            return Err(Error::Timeout { message, dedupe_key: dedupe_key.map(str::to_string) });
        }
    };
    if answer["ok"] == json!(true) {
        return Ok(match answer.get("result") {
            Some(v @ Value::Object(_)) => v.clone(),
            _ => json!({}),
        });
    }
    Err(Error::from_body(answer.get("error").unwrap_or(&Value::Null), None).with_dedupe_key(dedupe_key))
}
