//! The calls of CONTRACT §16, time and waiting, besides the scheduled send (a `SendRequest`
//! field): an inbox read or drain that waits for a signal instead of polling, a conversation
//! (the signals under one correlation id, oldest first), and the admin's force-expire.
//!
//! Deliberately HTTP only, with or without a session: a waiting read is one long request whose
//! timeout is the wait plus the client's `request_timeout`, so a slow answer is still told apart
//! from a bus that does not answer.

use std::time::Duration;

use reqwest::Method;

use crate::client::Client;
use crate::error::{Error, Result};
use crate::http::AdminClient;
use crate::rpc::protocol;
use crate::types::{Signal, SignalPage, Signals};
use crate::types_time::{ExpireFilter, ExpireOutcome, InboxQuery, MAX_INBOX_WAIT};

impl Client {
    /// Your pending signals (drain order; delivers nothing), waiting up to `wait` for one when
    /// none is pending: the bus answers as soon as one is, or after `wait` with none (an empty
    /// list). `wait` is rounded up to whole seconds; over 60 s is `Error::Usage`.
    pub async fn inbox_wait(&self, wait: Duration) -> Result<Vec<Signal>> {
        self.inbox_with(&InboxQuery { wait: Some(wait), ..Default::default() }).await
    }

    /// `drain` that waits like `inbox_wait`: the signals it answers with are delivered to you
    /// (`delivered_via: inbox`). Ack them with `ack`.
    pub async fn drain_wait(&self, wait: Duration) -> Result<Vec<Signal>> {
        self.inbox_with(&InboxQuery { wait: Some(wait), drain: true, ..Default::default() }).await
    }

    /// An inbox read with every option: `limit`, `wait`, `drain`.
    pub async fn inbox_with(&self, q: &InboxQuery) -> Result<Vec<Signal>> {
        let what = if q.drain { "drain" } else { "inbox" };
        let wait = q.wait.unwrap_or_default();
        if wait > MAX_INBOX_WAIT {
            return Err(Error::Usage(format!("{what} waits at most 60 seconds, not {wait:?}")));
        }
        let secs = wait.as_secs() + u64::from(wait.subsec_nanos() > 0);
        let query = [
            ("drain", q.drain.then(|| "true".to_string())),
            ("limit", q.limit.map(|l| l.to_string())),
            ("wait", (secs > 0).then(|| secs.to_string())),
        ];
        // The bus holds the answer up to the wait: the call's timeout starts after it.
        let api = self.inner.api.with_timeout(self.inner.request_timeout + Duration::from_secs(secs));
        let page: Signals = api.typed(Method::GET, "/v1/inbox", &query, None).await?;
        Ok(page.signals)
    }

    /// A conversation's first page: the signals you sent and received with `correlation_id`,
    /// **oldest first** (the bus's default page size, 100; never anyone else's signals).
    /// `conversation_page` continues with its `next_cursor`. `Error::Usage` for an empty id.
    pub async fn conversation(&self, correlation_id: &str) -> Result<SignalPage> {
        self.conversation_page(correlation_id, None, None).await
    }

    /// One page of a conversation, oldest first: at most `limit` (1–1000) signals after
    /// `cursor` (the previous page's `next_cursor`; `None` for the first page).
    pub async fn conversation_page(
        &self,
        correlation_id: &str,
        limit: Option<u32>,
        cursor: Option<&str>,
    ) -> Result<SignalPage> {
        if correlation_id.is_empty() {
            return Err(Error::Usage("conversation takes a correlation id (1 to 64 characters)".into()));
        }
        let query = [
            ("correlation_id", Some(correlation_id.to_string())),
            ("limit", limit.map(|l| l.to_string())),
            ("cursor", cursor.map(str::to_string)),
        ];
        self.inner.api.typed(Method::GET, "/v1/signals", &query, None).await
    }
}

impl AdminClient {
    /// Expires a tenant's pending signals now (CONTRACT §16) — those matching every filter of
    /// `filter`, scheduled ones included: `ExpireOutcome::Expired` with how many it expired
    /// (their rows read `expired_reason: "forced"`) and how many it skipped (delivered, recalled
    /// or expired first). With `dry_run` nothing is expired: `ExpireOutcome::DryRun` lists what
    /// would be. A tenant alone is `Error::Usage`, before anything is sent.
    pub async fn expire_signals(&self, filter: &ExpireFilter) -> Result<ExpireOutcome> {
        let body = filter.body()?;
        let answer = self.api.request(Method::POST, "/v1/admin/signals/expire", &[], Some(&body), &[]).await?;
        if filter.dry_run {
            let preview = serde_json::from_value(answer).map_err(|e| protocol("expire_signals (dry run)", e))?;
            Ok(ExpireOutcome::DryRun(preview))
        } else {
            let result = serde_json::from_value(answer).map_err(|e| protocol("expire_signals", e))?;
            Ok(ExpireOutcome::Expired(result))
        }
    }
}
