//! Request/reply on top of send: `ask` sends with a fresh correlation_id and waits for the
//! first signal back carrying it; `reply` answers a signal with its correlation_id.
//!
//! Deliberately no separate channel: the reply is an ordinary signal on the session, picked
//! out by the session's push routing before it reaches the handler.

use std::time::Duration;

use serde_json::Value;
use tokio::sync::oneshot;
use tokio::time::Instant;

use crate::client::Client;
use crate::error::{Error, Result};
use crate::types::Signal;
use crate::types_send::{SendOutcome, SendRequest};

/// Removes a finished ask's waiter, however the ask ended.
struct Waiter<'a> {
    client: &'a Client,
    cid: String,
}

impl Drop for Waiter<'_> {
    fn drop(&mut self) {
        self.client.inner.asks.lock().unwrap().remove(&self.cid);
    }
}

impl Client {
    /// Sends `signal_type` to `to` and returns the reply (acked with `auto_ack`). Needs an open
    /// session, for the reply: without one (never connected, or lost) it fails at once with
    /// `Unreachable` and sends nothing. Never spooled: the send's typed error comes back at
    /// once (`RecipientUnavailable`, `Unreachable`, ...). `AskTimeout` (with the question's
    /// signal_id) when no reply comes within `timeout`.
    pub async fn ask(&self, to: &str, signal_type: &str, payload: Value, timeout: Duration) -> Result<Signal> {
        self.ask_with(SendRequest::new(to, signal_type).payload(payload), timeout).await
    }

    /// `ask` with every send field; the request's correlation_id is replaced by a fresh one.
    pub async fn ask_with(&self, req: SendRequest, timeout: Duration) -> Result<Signal> {
        if timeout.is_zero() {
            return Err(crate::shared::usage("ask's timeout must be longer than zero"));
        }
        if !self.connected() {
            let message = format!(
                "ask {} to {}: no open session with {}, and the reply could only come over one \
                 (call connect() first; a lost session comes back by itself: wait_connected())",
                req.signal_type,
                req.to,
                self.inner.api.base()
            );
            return Err(Error::Unreachable { message, cause: "no open session".into(), dedupe_key: None });
        }
        let started = Instant::now();
        let cid = uuid::Uuid::new_v4().simple().to_string();
        let (tx, rx) = oneshot::channel();
        self.inner.asks.lock().unwrap().insert(cid.clone(), tx);
        let _waiter = Waiter { client: self, cid: cid.clone() };
        let sent = self.send_opts(req.correlation_id(cid.clone()), false).await?;
        match tokio::time::timeout_at(started + timeout, rx).await {
            Ok(Ok(sig)) => Ok(sig),
            Ok(Err(_)) => Err(Error::Closed),
            Err(_) => Err(Error::AskTimeout {
                signal_id: sent.sent().map(|r| r.signal_id.clone()),
                correlation_id: cid,
                timeout,
            }),
        }
    }

    /// Answers `to`: sends to its sender with its correlation_id (an `ask` waiting there gets it).
    pub async fn reply(&self, to: &Signal, signal_type: &str, payload: Value) -> Result<SendOutcome> {
        let mut req = SendRequest::new(&to.from, signal_type).payload(payload);
        req.correlation_id = to.correlation_id.clone();
        self.send(req).await
    }
}
