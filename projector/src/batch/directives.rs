//! Folds a batch's directive events (CONTRACT §14) into new `directives` rows and per-directive
//! patches, merged the way `bus::directive::DirectiveState::apply` folds them, so a row equals
//! the directive object whatever batches the events fell into.
//!
//! Deliberately trusts the stream: which transition may follow which was decided, with a
//! compare-and-set, before the event was stored. Only what the read model cannot hold (JSON
//! neither backend reads back, a correlation id longer than the column) is refused here.

use foldhash::HashMap;

use bus::event::{DirectiveStatus, EventBody};
use bus::log::Stored;
use bus::send::MAX_CORRELATION_ID_CHARS;
use chrono::{DateTime, SecondsFormat, Utc};
use serde_json::json;
use uuid::Uuid;

use super::Batch;
use crate::encode::{check_json, json_text, text};

/// A `directive.requested` as a new `directives` row (with its candidates).
#[derive(Debug, Clone)]
pub struct RequestedRow {
    pub id: Uuid,
    pub tenant: String,
    pub issuer: String,
    pub assignee: String,
    pub candidates: Vec<String>,
    pub directive_type: String,
    pub params: String,
    pub idempotency_key: String,
    pub correlation_id: Option<String>,
    pub created_at: DateTime<Utc>,
    pub deadline: DateTime<Utc>,
    pub seq: i64,
}

/// Everything a batch's later events did to one directive, merged in stream order.
#[derive(Debug, Clone)]
pub struct DirectivePatch {
    pub id: Uuid,
    pub status: Option<&'static str>,
    /// The first claim in the batch; a row that already has one keeps it.
    pub claimed_by: Option<String>,
    pub started_at: Option<DateTime<Utc>>,
    pub finished_at: Option<DateTime<Utc>>,
    /// The newest progress report, as the directive object's JSON.
    pub progress: Option<String>,
    pub result: Option<String>,
    pub failure: Option<String>,
    pub reason: Option<String>,
    /// Declines of this batch, in order: appended to the row's `declined_by`.
    pub declined: Vec<String>,
    pub seq: i64,
}

impl DirectivePatch {
    /// `declined` as the JSON array text appended to `declined_by` (`None`: nothing to append).
    pub fn declined_json(&self) -> Option<String> {
        (!self.declined.is_empty()).then(|| serde_json::Value::from(self.declined.clone()).to_string())
    }
}

fn rfc(t: &DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Millis, true)
}

/// Folds one directive event stored at `stored.seq` into `b`; `Err` is why it cannot be held.
pub(super) fn fold(
    b: &mut Batch,
    index: &mut HashMap<Uuid, usize>,
    stored: &Stored,
    tenant: &str,
) -> Result<(), String> {
    let seq = stored.seq as i64;
    let body = &stored.event.body;
    let Some(id) = body.directive_id() else { return Ok(()) };
    if let EventBody::DirectiveRequested(r) = body {
        let params = json_text(&r.params);
        check_json(&params).map_err(|e| format!("the params are not JSON the read models can hold: {e}"))?;
        let corr = r.correlation_id.as_deref().map_or(0, |c| c.chars().count());
        if corr > MAX_CORRELATION_ID_CHARS {
            return Err(format!(
                "the correlation_id has {corr} characters; the read models hold {MAX_CORRELATION_ID_CHARS}"
            ));
        }
        b.directives.push(RequestedRow {
            id,
            tenant: tenant.to_string(),
            issuer: text(&r.issuer),
            assignee: text(&r.assignee),
            candidates: r.candidates.iter().map(|c| text(c)).collect(),
            directive_type: text(&r.directive_type),
            params: params.into_owned(),
            idempotency_key: text(&r.idempotency_key),
            correlation_id: r.correlation_id.as_deref().map(text),
            created_at: r.created_at,
            deadline: r.deadline,
            seq,
        });
        return Ok(());
    }
    // Checked before the patch is touched, so a dead letter leaves no trace on the row.
    let result = match body {
        EventBody::DirectiveCompleted(e) => {
            let result = json_text(&e.result);
            check_json(&result).map_err(|e| format!("the result is not JSON the read models can hold: {e}"))?;
            Some(result.into_owned())
        }
        _ => None,
    };
    let i = *index.entry(id).or_insert_with(|| {
        b.directive_patches.push(DirectivePatch {
            id,
            status: None,
            claimed_by: None,
            started_at: None,
            finished_at: None,
            progress: None,
            result: None,
            failure: None,
            reason: None,
            declined: Vec::new(),
            seq,
        });
        b.directive_patches.len() - 1
    });
    let p = &mut b.directive_patches[i];
    p.seq = seq;
    let finish = |p: &mut DirectivePatch, status: DirectiveStatus, at: DateTime<Utc>| {
        p.status = Some(status.as_str());
        p.finished_at = Some(at);
    };
    match body {
        EventBody::DirectiveStarted(e) => {
            p.status = Some(DirectiveStatus::Started.as_str());
            p.claimed_by.get_or_insert_with(|| text(&e.by));
            p.started_at.get_or_insert(e.at);
        }
        EventBody::DirectiveProgressed(e) => {
            let progress = json!({"message": e.message.as_deref().map(text), "percent": e.percent, "at": rfc(&e.at)});
            p.progress = Some(progress.to_string());
        }
        EventBody::DirectiveCompleted(e) => {
            p.claimed_by.get_or_insert_with(|| text(&e.by));
            p.result = result;
            finish(p, DirectiveStatus::Completed, e.at);
        }
        EventBody::DirectiveFailed(e) => {
            p.claimed_by.get_or_insert_with(|| text(&e.by));
            p.failure = Some(json!({"code": text(&e.code), "message": text(&e.message)}).to_string());
            finish(p, DirectiveStatus::Failed, e.at);
        }
        EventBody::DirectiveDeclined(e) => {
            let by = text(&e.by);
            if !p.declined.contains(&by) {
                p.declined.push(by);
            }
            if e.rejects {
                p.reason = e.reason.as_deref().map(text);
                finish(p, DirectiveStatus::Rejected, e.at);
            }
        }
        EventBody::DirectiveCanceled(e) => {
            p.reason = e.reason.as_deref().map(text);
            finish(p, DirectiveStatus::Canceled, e.at);
        }
        EventBody::DirectiveExpired(e) => finish(p, DirectiveStatus::Expired, e.at),
        _ => {}
    }
    Ok(())
}
