//! The agent's calls: send (spooling what the bus cannot take), recall, ack, receive, inbox,
//! drain, get, list, roster, plugin facts. Calls with a WebSocket op go over the session when
//! it is open and over HTTP otherwise (and when the session drops mid-call).
//!
//! Deliberately only shapes calls: going over the session or HTTP is `rpc.rs`, spooling is
//! `replay.rs`. No retry loop: a send that fails with an unknown outcome is spooled (when there
//! is a spool) or returned with its dedupe_key, so the caller decides.

use std::time::Duration;

use reqwest::Method;
use serde_json::{json, Value};

use crate::client::Client;
use crate::error::{Error, Result};
use crate::http::{segment, with_tenant};
use crate::replay::spool_send;
use crate::rpc::{ack_ids, over_session_or_http, send_result, transmit_send};
use crate::schedule;
use crate::shared::usage;
use crate::types::{
    Agent, FactPage, ListQuery, PluginState, RecallAnswer, RecallOutcome, Roster, Signal, SignalPage, SignalRow,
    Signals,
};
use crate::types_send::{SendOutcome, SendRequest};

impl Client {
    /// Sends a signal (CONTRACT §4). It always carries a dedupe_key (the request's, or a fresh
    /// `sbc-<uuid>`), so resending it can never create a second signal. With a spool, a send the
    /// bus could not take (unreachable, timeout, 503) is spooled and answered `Spooled` — except a
    /// sync send (`delivery_class` `sync`, or a type that is sync by default): its point is an
    /// available recipient now, so it is never spooled and fails at once (`Unreachable`: nothing
    /// was sent). Errors: `RecipientUnavailable` (a bounced sync send), `UnknownRecipient`, ...;
    /// `Usage` for a group (`to` starting with `@`): that is `send_group`.
    ///
    /// Scheduled (CONTRACT §16, `deliver_after` / `deliver_at`): answered `queued`,
    /// `publish_path` `scheduled`, with `deliver_at`; invisible to the recipient until then, and
    /// recallable until delivered. Both fields, either on a sync send, or a zero delay: `Usage`, before
    /// anything is sent; a `deliver_at` in the past or over 30 days ahead: `InvalidRequest`.
    /// Spooled like any async send, keeping the instant it names (a replay once it is due
    /// sends it at once).
    pub async fn send(&self, req: SendRequest) -> Result<SendOutcome> {
        self.send_opts(req, true).await
    }

    /// `send`, choosing whether a failed attempt may be spooled (`false`: it is returned as
    /// `Transport`/`Timeout`/`Unavailable` carrying the dedupe_key).
    pub async fn send_opts(&self, mut req: SendRequest, spool: bool) -> Result<SendOutcome> {
        if req.to.starts_with('@') {
            return Err(usage("a send to a group answers one entry per member: use send_group, not send"));
        }
        schedule::check(&req)?;
        let key = req.dedupe_key.get_or_insert_with(|| format!("sbc-{}", uuid::Uuid::new_v4())).clone();
        let sync = req.effective_class() == "sync";
        match transmit_send(&self.inner, &req).await {
            Ok(v) => Ok(SendOutcome::Sent(send_result(v, &key)?)),
            Err(e) if spool && !sync && e.is_spoolable() && self.inner.spool.is_some() => {
                spool_send(&self.inner, req, &e)
            }
            Err(e) => Err(e),
        }
    }

    /// Recalls a signal you sent (CONTRACT §6). `not_found` is an answer, not an error.
    pub async fn recall(&self, signal_id: &str) -> Result<RecallOutcome> {
        let path = format!("/v1/signals/{}/recall", segment(signal_id));
        let answer = over_session_or_http(&self.inner, json!({"op": "recall", "signal_id": signal_id}), None, || {
            self.inner.api.request(Method::POST, &path, &[], None, &[404])
        })
        .await?;
        match serde_json::from_value::<RecallAnswer>(answer.clone()) {
            Ok(a) => Ok(a.outcome),
            // A 404 without an outcome is not a recall answer (e.g. a proxy's page).
            Err(_) => Err(Error::from_body(&answer, Some(404))),
        }
    }

    /// Acks delivered signals by id; answers how many the bus took (ids not yours, not
    /// delivered or already acked are skipped).
    pub async fn ack<I, S>(&self, ids: I) -> Result<u64>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        let ids: Vec<String> = ids.into_iter().map(|s| s.as_ref().to_string()).collect();
        {
            let mut seen = self.inner.seen.lock().unwrap();
            for id in &ids {
                if seen.get(id).is_some() {
                    seen.remember(id, true);
                }
            }
        }
        if ids.is_empty() {
            return Ok(0);
        }
        ack_ids(&self.inner, &ids).await
    }

    /// The next pushed signal, for a client without a handler; ack it with `ack`.
    pub async fn receive(&self, timeout: Duration) -> Result<Signal> {
        if self.life.handler.is_some() {
            return Err(usage("this client has an on_signal handler: signals go there, not to receive()"));
        }
        let mut rx = self.inner.inbox_rx.lock().await;
        tokio::select! {
            _ = self.inner.shutdown.cancelled() => Err(Error::Closed),
            s = tokio::time::timeout(timeout, rx.recv()) => match s {
                Ok(Some(sig)) => Ok(sig),
                Ok(None) => Err(Error::Closed),
                Err(_) => Err(Error::Timeout { message: format!("no signal within {timeout:?}"), dedupe_key: None }),
            },
        }
    }

    /// Every pushed signal, as they come, as a `Stream` (for a client without a handler; ack
    /// each with `ack`, as after `receive`). It ends when the client closes; it holds a handle of
    /// the client, so dropping the caller's other handles does not close it — `close()` does.
    /// `Error::Usage` on a client with a handler.
    ///
    /// ```no_run
    /// # async fn f(client: signalbus_client::Client) -> signalbus_client::Result<()> {
    /// use futures::StreamExt;
    /// let mut signals = Box::pin(client.signals()?);
    /// while let Some(sig) = signals.next().await {
    ///     client.ack([sig.id.as_str()]).await?;
    /// }
    /// # Ok(()) }
    /// ```
    pub fn signals(&self) -> Result<impl futures::Stream<Item = Signal> + Send + 'static> {
        if self.life.handler.is_some() {
            return Err(usage("this client has an on_signal handler: signals go there, not to signals()"));
        }
        Ok(futures::stream::unfold(self.clone(), |client| async move {
            let sig = {
                let mut rx = client.inner.inbox_rx.lock().await;
                tokio::select! {
                    _ = client.inner.shutdown.cancelled() => None,
                    s = rx.recv() => s,
                }
            };
            sig.map(|s| (s, client))
        }))
    }

    /// Pending signals for you in drain order (priority first); delivers nothing.
    pub async fn inbox(&self, limit: Option<u32>) -> Result<Vec<Signal>> {
        let page: Signals =
            self.inner.api.typed(Method::GET, "/v1/inbox", &[("limit", limit.map(|l| l.to_string()))], None).await?;
        Ok(page.signals)
    }

    /// Takes pending signals: they are delivered to you (`delivered_via: inbox`) and never
    /// pushed to a session later. Ack them with `ack`.
    pub async fn drain(&self, limit: Option<u32>) -> Result<Vec<Signal>> {
        let query = [("drain", Some("true".to_string())), ("limit", limit.map(|l| l.to_string()))];
        let page: Signals = self.inner.api.typed(Method::GET, "/v1/inbox", &query, None).await?;
        Ok(page.signals)
    }

    /// A signal's row (you sent or received it); `NotFound` otherwise.
    pub async fn get(&self, signal_id: &str) -> Result<SignalRow> {
        self.inner.api.typed(Method::GET, &format!("/v1/signals/{}", segment(signal_id)), &[], None).await
    }

    /// Your signals, newest first, one page.
    pub async fn list(&self, q: &ListQuery) -> Result<SignalPage> {
        let query = [
            ("role", q.role.clone()),
            ("status", q.status.clone()),
            ("limit", q.limit.map(|l| l.to_string())),
            ("cursor", q.cursor.clone()),
        ];
        self.inner.api.typed(Method::GET, "/v1/signals", &query, None).await
    }

    /// Your tenant's roster with each agent's recipient state.
    pub async fn agents(&self) -> Result<Vec<Agent>> {
        let roster: Roster = self.inner.api.typed(Method::GET, "/v1/agents", &[], None).await?;
        Ok(with_tenant(roster))
    }

    /// Appends a plugin fact; answers its `seq`.
    pub async fn record_fact(&self, plugin: &str, fact_type: &str, state: Value) -> Result<i64> {
        let body = json!({"fact_type": fact_type, "state": state});
        let frame = json!({"op": "fact", "plugin": plugin, "fact_type": fact_type, "state": body["state"]});
        let path = format!("/v1/plugins/{}/facts", segment(plugin));
        let answer = over_session_or_http(&self.inner, frame, None, || {
            self.inner.api.request(Method::POST, &path, &[], Some(&body), &[])
        })
        .await?;
        answer["seq"].as_i64().ok_or_else(|| Error::Protocol(format!("a fact answer without seq: {answer}")))
    }

    /// A plugin's current state (its newest fact's `state`).
    pub async fn state(&self, plugin: &str) -> Result<PluginState> {
        self.inner.api.typed(Method::GET, &format!("/v1/plugins/{}/state", segment(plugin)), &[], None).await
    }

    /// A plugin's facts, newest first, one page (`next_before_seq` continues).
    pub async fn facts(
        &self,
        plugin: &str,
        fact_type: Option<&str>,
        limit: Option<u32>,
        before_seq: Option<i64>,
    ) -> Result<FactPage> {
        let query = [
            ("fact_type", fact_type.map(str::to_string)),
            ("limit", limit.map(|l| l.to_string())),
            ("before_seq", before_seq.map(|s| s.to_string())),
        ];
        self.inner.api.typed(Method::GET, &format!("/v1/plugins/{}/facts", segment(plugin)), &query, None).await
    }
}
