//! Draining what waits for a recipient, in `priority DESC, created_at ASC` order: the startup
//! drain of a WebSocket session that opens (frames queued to it), and the HTTP drain of a
//! piggyback session or `GET /v1/inbox?drain=true` (typed deliveries returned to the caller).
//!
//! Deliberately reads only after the read models and this node's presence caught up with the
//! stream's end, so a drain never misses a signal sent before it began.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use bus::event::DeliveredVia;
use chrono::Utc;
use uuid::Uuid;

use crate::agent::Agent;
use crate::delivery::{Deliverer, Recipient};
use crate::error::ApiError;
use crate::sessions::hub::SessionHandle;
use crate::wire::PushSignal;

impl Deliverer {
    /// The startup drain of a session that just opened: waits until the read models have applied
    /// the stream up to its `session.opened` (so a signal sent just before the session opened is
    /// not missed), then delivers what is drainable in drain order. Anything sent after that
    /// position reaches the session through the push instead.
    pub async fn startup_drain(self: Arc<Self>, session: Arc<SessionHandle>) {
        // Fixed when the session's `session.opened` was stored, before its welcome went out.
        let opened_at = *session.drain_target.borrow();
        let result = self.drain_session(&session, opened_at).await;
        // A drain that failed before knowing its position covers nothing: pushes go ahead.
        session.drain_target.send_if_modified(|t| {
            let unset = t.is_none();
            t.get_or_insert(0);
            unset
        });
        if let Err(e) = result {
            tracing::warn!(error = %e, session_id = %session.id, "startup drain failed; pending signals wait for the next session");
        }
    }

    /// A session of `identity` was recorded closed at stream sequence `seq`. What it was handed
    /// and did not ack goes to the identity's next session — but a session that opened here
    /// before that close was on the stream drained while the closed one still counted as open,
    /// and so could not take those signals back. Drain the freshest such session again: the
    /// close is known by then, so its unacked deliveries are redelivered (each through the
    /// per-signal compare-and-set, so never twice).
    pub fn on_closed(self: &Arc<Self>, tenant: &str, identity: &str, seq: u64) {
        let drained_before = |s: &Arc<SessionHandle>| s.drain_target.borrow().is_some_and(|t| t < seq);
        let Some(session) = self.hub.of_identity(tenant, identity).into_iter().find(drained_before) else { return };
        let this = self.clone();
        self.tasks.spawn(async move {
            if let Err(e) = this.drain_session(&session, None).await {
                tracing::warn!(error = %e, session_id = %session.id, "redelivery drain failed; the next session gets them");
            }
        });
    }

    /// Drains `session` from the stream position `from` (its first round's target; `None`: the
    /// stream's current end).
    async fn drain_session(&self, session: &Arc<SessionHandle>, from: Option<u64>) -> Result<(), ApiError> {
        let batch = self.config.drain_batch.max(1);
        let mut seen: HashSet<Uuid> = HashSet::new();
        // Each round re-reads after the read models caught up with what the previous one appended,
        // so rows already handed out are not offered again, and a full page means "ask again".
        for round in 0..64 {
            let target = match from {
                Some(seq) if round == 0 => seq,
                _ => self.store.log().last_seq().await?,
            };
            if round == 0 {
                session.drain_target.send_replace(Some(target));
            }
            self.wait_for(target).await;
            if session.is_closing() {
                return Ok(());
            }
            let rows = self.queries.drainable(&session.tenant, &session.identity, Utc::now(), batch).await?;
            let full = rows.len() as u32 >= batch;
            let mut fresh_rows = 0;
            for row in rows {
                if !seen.insert(row.id) {
                    continue;
                }
                fresh_rows += 1;
                if session.is_closing() {
                    return Ok(());
                }
                let redeliver = row.delivered_at.is_some();
                self.deliver_to(session, row.id, None, DeliveredVia::StartupDrain, redeliver).await?;
            }
            if !full || fresh_rows == 0 {
                return Ok(());
            }
        }
        Ok(())
    }

    /// Waits until the read models and this node's presence have applied the stream up to
    /// `target`: whether a row may be redelivered depends on whether its delivering session is
    /// known to be closed.
    async fn wait_for(&self, target: u64) {
        if let Err(e) = self.queries.wait_for(target, self.config.drain_wait).await {
            tracing::warn!(error = %e, target, "read models lag; draining what they have");
        }
        self.applied.wait(target, self.config.drain_wait).await;
    }

    /// Waits for the stream's current end (see `wait_for`), so an HTTP drain sees every signal
    /// sent before the call, as the startup drain does.
    async fn catch_up(&self) -> Result<(), ApiError> {
        let target = self.store.log().last_seq().await?;
        self.wait_for(target).await;
        Ok(())
    }

    /// Pending signals of `agent`, drain order, without delivering them.
    pub async fn pending(&self, agent: &Agent, limit: u32) -> Result<Vec<PushSignal>, ApiError> {
        self.catch_up().await?;
        let rows = self.queries.drainable(&agent.tenant, &agent.identity, Utc::now(), limit).await?;
        Ok(rows.into_iter().map(PushSignal::pending).collect())
    }

    /// Whether anything is drainable for `agent`, once the read models reached the stream's
    /// current end — waited for at most `catch_up` (an inbox waiter looks no longer than it has
    /// left to wait). Lists and delivers nothing: one row is read.
    pub async fn any_pending(&self, agent: &Agent, catch_up: Duration) -> Result<bool, ApiError> {
        let target = self.store.log().last_seq().await?;
        if let Err(e) = self.queries.wait_for(target, catch_up).await {
            tracing::debug!(error = %e, target, "read models lag; looking at what they have");
        }
        let rows = self.queries.drainable(&agent.tenant, &agent.identity, Utc::now(), 1).await?;
        Ok(!rows.is_empty())
    }

    /// Delivers up to `limit` pending signals of `agent`, drain order, each through the
    /// per-signal compare-and-set, and returns the ones this call won, exactly as recorded: every
    /// delivery recorded here is in the answer. `session` names the piggyback session they go to
    /// (`None`: the inbox drain).
    pub async fn drain(
        &self,
        agent: &Agent,
        session: Option<Uuid>,
        via: DeliveredVia,
        limit: u32,
    ) -> Result<Vec<PushSignal>, ApiError> {
        self.catch_up().await?;
        let rows = self.queries.drainable(&agent.tenant, &agent.identity, Utc::now(), limit).await?;
        let to = Recipient { tenant: &agent.tenant, identity: &agent.identity, session_id: session };
        let mut out = Vec::with_capacity(rows.len());
        for row in &rows {
            let redeliver = row.delivered_at.is_some();
            match self.record(to, row.id, None, via, redeliver).await {
                Ok(Some(d)) => out.push(PushSignal::delivered(d.sent, d.redelivered)),
                Ok(None) => {}
                // What was recorded as delivered must reach the caller, so a partial drain still answers.
                Err(e) if out.is_empty() => return Err(e.into()),
                Err(e) => {
                    tracing::warn!(error = %e, delivered = out.len(), "http drain stopped early; the rest stays pending");
                    break;
                }
            }
        }
        Ok(out)
    }
}
