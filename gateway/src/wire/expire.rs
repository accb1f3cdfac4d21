//! The JSON of `POST /v1/admin/signals/expire` (CONTRACT §16): the request into a
//! `bus::force_expire::ExpireFilter` and a dry-run flag, and the answers back out.
//!
//! Deliberately strict: a field, when present, has its type (null is refused like any other
//! wrong type), so "at least one filter" cannot be met by a `null`; which filters may combine is
//! `ExpireFilter::check`'s to say.

use bus::force_expire::{ExpireFilter, MAX_OLDER_THAN_SECONDS, MAX_SIGNAL_IDS};
use projector::queries::PendingSignal;
use serde_json::{json, Map, Value};

use super::{canonical_uuid, ts};
use crate::error::ApiError;

/// The fields a force-expire takes.
pub const FIELDS: [&str; 7] = ["tenant", "to", "from", "signal_type", "older_than_seconds", "signal_ids", "dry_run"];

/// A parsed force-expire: what it matches, and whether it only lists what would expire.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ForceExpire {
    pub filter: ExpireFilter,
    pub dry_run: bool,
}

fn text(map: &Map<String, Value>, key: &str) -> Result<Option<String>, ApiError> {
    match map.get(key) {
        None => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(_) => Err(ApiError::invalid(format!("{key} must be a string"))),
    }
}

/// Parses the request body; `ExpireFilter::check` has been applied.
pub fn parse_force_expire(map: &Map<String, Value>) -> Result<ForceExpire, ApiError> {
    if let Some(k) = map.keys().find(|k| !FIELDS.contains(&k.as_str())) {
        return Err(ApiError::invalid(format!("unknown field {k:?}")));
    }
    let tenant = text(map, "tenant")?.ok_or_else(|| ApiError::invalid("tenant is required"))?;
    let older_than_seconds = match map.get("older_than_seconds") {
        None => None,
        // `60.0` is a whole number too (JSON Schema counts it as an integer, and so do clients).
        Some(v) => Some(
            v.as_u64()
                .or_else(|| v.as_f64().filter(|f| f.fract() == 0.0 && (0.0..=1e15).contains(f)).map(|f| f as u64))
                .filter(|s| (1..=MAX_OLDER_THAN_SECONDS).contains(s))
                .ok_or_else(|| {
                    ApiError::invalid(format!(
                        "older_than_seconds must be a whole number between 1 and {MAX_OLDER_THAN_SECONDS}"
                    ))
                })?,
        ),
    };
    let signal_ids = match map.get("signal_ids") {
        None => Vec::new(),
        Some(Value::Array(ids)) if (1..=MAX_SIGNAL_IDS).contains(&ids.len()) => ids
            .iter()
            .map(|v| {
                v.as_str().and_then(canonical_uuid).ok_or_else(|| {
                    ApiError::invalid("each of signal_ids must be a uuid written as 8-4-4-4-12 hex digits with hyphens")
                })
            })
            .collect::<Result<_, _>>()?,
        Some(_) => {
            return Err(ApiError::invalid(format!("signal_ids must be an array of 1 to {MAX_SIGNAL_IDS} signal ids")))
        }
    };
    let dry_run = match map.get("dry_run") {
        None => false,
        Some(Value::Bool(b)) => *b,
        Some(_) => return Err(ApiError::invalid("dry_run must be true or false")),
    };
    let filter = ExpireFilter {
        tenant,
        to: text(map, "to")?,
        from: text(map, "from")?,
        signal_type: text(map, "signal_type")?,
        older_than_seconds,
        signal_ids,
    };
    filter.check()?;
    Ok(ForceExpire { filter, dry_run })
}

/// The answer of a force-expire.
pub fn expired_json(expired: u64, skipped: u64) -> Value {
    json!({"expired": expired, "skipped": skipped})
}

/// The answer of a dry run: what would expire (at most the first `listed.len()`, in the order
/// the sweeper would expire them), and how many in all.
pub fn dry_run_json(listed: &[PendingSignal], count: u64) -> Value {
    let rows: Vec<Value> = listed
        .iter()
        .map(|s| {
            json!({
                "signal_id": s.id,
                "to": s.to_identity,
                "from": s.from_identity,
                "type": s.signal_type,
                "created_at": ts(s.created_at),
            })
        })
        .collect();
    json!({"would_expire": rows, "count": count})
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(v: Value) -> Result<ForceExpire, ApiError> {
        parse_force_expire(v.as_object().unwrap())
    }

    fn refused(v: Value, word: &str) {
        match parse(v.clone()) {
            Err(ApiError::InvalidRequest(m)) => assert!(m.contains(word), "{v}: {m:?} should say {word:?}"),
            other => panic!("{v}: {other:?}"),
        }
    }

    #[test]
    fn a_request_becomes_a_filter() {
        let id = "00000000-0000-0000-0000-0000000000aa";
        let got = parse(json!({"tenant": "default", "to": "bob", "from": "alice", "signal_type": "Question",
            "older_than_seconds": 3600, "signal_ids": [id], "dry_run": true}))
        .unwrap();
        assert!(got.dry_run);
        assert_eq!(got.filter.to.as_deref(), Some("bob"));
        assert_eq!(got.filter.older_than_seconds, Some(3600));
        assert_eq!(got.filter.signal_ids, vec![canonical_uuid(id).unwrap()]);
        assert!(!parse(json!({"tenant": "default", "to": "bob"})).unwrap().dry_run);
        let whole = parse(json!({"tenant": "default", "older_than_seconds": 60.0})).unwrap();
        assert_eq!(whole.filter.older_than_seconds, Some(60), "a whole number written with a fraction");
    }

    #[test]
    fn bad_requests_are_refused_naming_the_field() {
        refused(json!({"tenant": "default"}), "would expire everything");
        refused(json!({"to": "bob"}), "tenant is required");
        refused(json!({"tenant": "default", "to": null}), "to must be a string");
        refused(json!({"tenant": "default", "to": "bob", "ttl": 1}), "unknown field");
        refused(json!({"tenant": "default", "older_than_seconds": 0}), "older_than_seconds");
        refused(json!({"tenant": "default", "older_than_seconds": 1.5}), "older_than_seconds");
        refused(json!({"tenant": "default", "signal_ids": []}), "signal_ids");
        refused(json!({"tenant": "default", "signal_ids": ["nope"]}), "signal_ids");
        refused(json!({"tenant": "default", "to": "bob", "dry_run": "yes"}), "dry_run");
        refused(json!({"tenant": "Default", "to": "bob"}), "tenant");
    }
}
