//! The rules of a plugin fact (CONTRACT §8, from the Ductile design): who may record one for
//! which plugin, what a fact may hold, and the redaction guard over its state — as one pure
//! `decide`, whose answer the store appends with the next per-plugin `seq`.
//!
//! Deliberately no I/O: the `seq` is assigned by `SignalStore::record_fact` under a
//! compare-and-set, and quotas and JSON nesting limits are the gateway's (they bound work before
//! a rule is even asked).

use serde_json::Value;

use crate::error::{DomainError, DomainResult};
use crate::event::PluginFactRecorded;
use crate::names::{plugin_owned_by, validate_plugin};

/// Largest plugin fact state, encoded.
pub const MAX_FACT_STATE_BYTES: usize = 1024 * 1024;

/// `recorded_by` of facts the admin records.
pub const ADMIN_RECORDER: &str = "admin";

/// Who records a plugin fact: an agent, for the plugins it owns, or the admin, for any.
#[derive(Debug, Clone, Copy)]
pub enum FactAuthor<'a> {
    Agent(&'a str),
    Admin,
}

/// A fact ready to record (its `seq` still 0), and the paths of its state the redaction guard
/// replaced (dotted, keys as written).
#[derive(Debug, Clone, PartialEq)]
pub struct FactDecided {
    pub fact: PluginFactRecorded,
    pub redacted: Vec<String>,
}

/// Decides a fact of `fact_type` with `state` for `plugin` by `author`.
pub fn decide(author: FactAuthor<'_>, plugin: &str, fact_type: &str, mut state: Value) -> DomainResult<FactDecided> {
    let by = match author {
        FactAuthor::Agent(identity) => identity,
        FactAuthor::Admin => ADMIN_RECORDER,
    };
    validate_plugin(plugin)?;
    if matches!(author, FactAuthor::Agent(_)) && !plugin_owned_by(plugin, by) {
        return Err(DomainError::Forbidden(format!(
            "{by} may only record facts for the plugins {by:?} and \"{by}/...\""
        )));
    }
    crate::nul::refuse_in_str("fact_type", fact_type)?;
    crate::nul::refuse_in_json("state", &state)?;
    if fact_type.is_empty() || fact_type.chars().count() > 128 {
        return Err(DomainError::invalid("fact_type must be 1 to 128 characters"));
    }
    if !state.is_object() {
        return Err(DomainError::invalid("state must be a JSON object"));
    }
    let redacted = crate::redact::redact(&mut state);
    let encoded = crate::json::to_text(&state);
    if encoded.len() > MAX_FACT_STATE_BYTES {
        return Err(DomainError::PayloadTooLarge(format!(
            "state is {} bytes encoded, the limit is {MAX_FACT_STATE_BYTES}",
            encoded.len()
        )));
    }
    let fact = PluginFactRecorded {
        plugin: plugin.to_string(),
        seq: 0,
        fact_type: fact_type.to_string(),
        state: encoded,
        recorded_by: by.to_string(),
    };
    Ok(FactDecided { fact, redacted })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn given_an_agent_then_it_records_for_its_own_plugins_only() {
        let ok = decide(FactAuthor::Agent("alice"), "alice/watcher", "snapshot", json!({"n": 1})).unwrap();
        assert_eq!((ok.fact.recorded_by.as_str(), ok.fact.seq), ("alice", 0));
        assert!(decide(FactAuthor::Agent("alice"), "alice", "snapshot", json!({})).is_ok());
        let other = decide(FactAuthor::Agent("alice"), "bob/watcher", "snapshot", json!({}));
        assert!(matches!(other, Err(DomainError::Forbidden(_))));
        let reserved = decide(FactAuthor::Agent("signalbus"), "signalbus/x", "t", json!({}));
        assert!(matches!(reserved, Err(DomainError::Forbidden(_))), "names under signalbus/ are the bus's");
    }

    #[test]
    fn given_the_admin_then_any_plugin_recorded_as_admin() {
        let ok = decide(FactAuthor::Admin, "bob/watcher", "snapshot", json!({})).unwrap();
        assert_eq!(ok.fact.recorded_by, ADMIN_RECORDER);
    }

    #[test]
    fn given_bad_input_then_refused_with_a_specific_reason() {
        let bad = |t: &str, s: Value| decide(FactAuthor::Admin, "p", t, s).unwrap_err().to_string();
        assert!(bad("", json!({})).contains("fact_type"));
        assert!(bad(&"x".repeat(129), json!({})).contains("fact_type"));
        assert!(bad("t", json!([1])).contains("object"));
        assert!(bad("t\u{0}", json!({})).contains("fact_type"));
        let big = json!({"x": "y".repeat(MAX_FACT_STATE_BYTES)});
        assert!(matches!(decide(FactAuthor::Admin, "p", "t", big), Err(DomainError::PayloadTooLarge(_))));
    }

    #[test]
    fn given_secrets_in_state_then_redacted_before_anything_is_recorded() {
        let ok = decide(FactAuthor::Admin, "p", "t", json!({"db": {"password": "hunter2"}})).unwrap();
        assert_eq!(ok.redacted, vec!["db.password".to_string()]);
        assert!(!ok.fact.state.contains("hunter2"));
    }
}
