//! The wire shapes of groups (CONTRACT §15): a group and its members, the admin's options, the
//! answer of a send to a group (one entry per member, each true on its own), and recalling many
//! signals by fan-out or correlation.
//!
//! Deliberately data only, like `types.rs`: the calls are `groups.rs`.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::Error;
use crate::types::RecallOutcome;

fn yes() -> bool {
    true
}

/// One member of a group. `group(name)` gives every field (its recipient state, CONTRACT §2);
/// `groups()` lists members by identity only.
#[derive(Debug, Clone, PartialEq)]
pub struct GroupMember {
    pub identity: String,
    pub recipient_state: Option<String>,
    pub added_at: Option<DateTime<Utc>>,
    /// Who added it: the admin, or the member itself (a self-join).
    pub added_by: Option<String>,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum RawGroupMember {
    Identity(String),
    Full {
        identity: String,
        #[serde(default)]
        recipient_state: Option<String>,
        #[serde(default)]
        added_at: Option<DateTime<Utc>>,
        #[serde(default)]
        added_by: Option<String>,
    },
}

impl<'de> Deserialize<'de> for GroupMember {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Ok(match RawGroupMember::deserialize(d)? {
            RawGroupMember::Identity(identity) => {
                GroupMember { identity, recipient_state: None, added_at: None, added_by: None }
            }
            RawGroupMember::Full { identity, recipient_state, added_at, added_by } => {
                GroupMember { identity, recipient_state, added_at, added_by }
            }
        })
    }
}

/// A group (CONTRACT §15), as `group(name)`, `groups()` and every group call answer it.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct Group {
    /// The name with its `@` (`@reviewers`).
    #[serde(rename = "group")]
    pub name: String,
    #[serde(default)]
    pub self_join: bool,
    #[serde(default = "yes")]
    pub announce: bool,
    /// `None` in `groups()`'s list.
    #[serde(default)]
    pub created_at: Option<DateTime<Utc>>,
    #[serde(default)]
    pub members: Vec<GroupMember>,
}

impl Group {
    /// The members' identities, in the bus's order.
    pub fn identities(&self) -> Vec<&str> {
        self.members.iter().map(|m| m.identity.as_str()).collect()
    }
}

/// The admin's options of `create_group` (`PUT /v1/groups/{name}`); the defaults are the bus's:
/// not self-join, announcing joins and leaves.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GroupOptions {
    /// Agents may join and leave it themselves.
    pub self_join: bool,
    /// Members are told of joins and leaves (`PeerJoined` / `PeerLeft`).
    pub announce: bool,
}

impl Default for GroupOptions {
    fn default() -> Self {
        GroupOptions { self_join: false, announce: true }
    }
}

/// One member's entry of a send to a group: accepted (`error` is `None`; the §4 answer's
/// fields), or not (`error` says why, typed as a single send's would be — a bounce is
/// `Error::RecipientUnavailable` with its `recipient_state` and `signal_id`).
#[derive(Debug, Clone)]
pub struct MemberResult {
    pub to: String,
    /// The member's signal (also a bounce's, recorded for audit and never queued).
    pub signal_id: Option<String>,
    pub delivered: bool,
    pub queued: bool,
    pub recipient_state: Option<String>,
    pub delivery_class: Option<String>,
    pub publish_path: Option<String>,
    pub resolved_to_session: Option<String>,
    pub created_at: Option<DateTime<Utc>>,
    pub expires_at: Option<DateTime<Utc>>,
    pub redacted: Vec<String>,
    /// A scheduled send's delivery time (CONTRACT §16); `None` when it was not scheduled.
    pub deliver_at: Option<DateTime<Utc>>,
    pub error: Option<Error>,
}

impl MemberResult {
    /// `true` when the bus took this member's signal.
    pub fn accepted(&self) -> bool {
        self.error.is_none()
    }
}

#[derive(Debug, Deserialize)]
struct RawMember {
    to: String,
    #[serde(default)]
    signal_id: Option<String>,
    #[serde(default)]
    delivered: bool,
    #[serde(default)]
    queued: bool,
    #[serde(default)]
    recipient_state: Option<String>,
    #[serde(default)]
    delivery_class: Option<String>,
    #[serde(default)]
    publish_path: Option<String>,
    #[serde(default)]
    resolved_to_session: Option<String>,
    #[serde(default)]
    created_at: Option<DateTime<Utc>>,
    #[serde(default)]
    expires_at: Option<DateTime<Utc>>,
    #[serde(default)]
    redacted: Vec<String>,
    #[serde(default)]
    deliver_at: Option<DateTime<Utc>>,
    #[serde(default)]
    error: Option<Value>,
}

impl<'de> Deserialize<'de> for MemberResult {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let raw = RawMember::deserialize(d)?;
        let text = |k: &str| raw.error.as_ref().and_then(|e| e.get(k)).and_then(Value::as_str).map(str::to_string);
        Ok(MemberResult {
            signal_id: raw.signal_id.clone().or_else(|| text("signal_id")),
            recipient_state: raw.recipient_state.clone().or_else(|| text("recipient_state")),
            error: raw.error.as_ref().map(|e| Error::from_body(e, None)),
            to: raw.to,
            delivered: raw.delivered,
            queued: raw.queued,
            delivery_class: raw.delivery_class,
            publish_path: raw.publish_path,
            resolved_to_session: raw.resolved_to_session,
            created_at: raw.created_at,
            expires_at: raw.expires_at,
            redacted: raw.redacted,
            deliver_at: raw.deliver_at,
        })
    }
}

/// The answer of a send to a group: one entry per member other than the sender, sorted by
/// identity, all sharing one `fanout_id`. Repeating the send with its dedupe_key answers the
/// same signals: never a second signal to anyone.
#[derive(Debug, Clone, Deserialize)]
pub struct FanoutResult {
    pub fanout_id: String,
    /// The group, with its `@`.
    pub to: String,
    #[serde(default)]
    pub results: Vec<MemberResult>,
    /// The key the send carried (the caller's or the generated one); not a wire field.
    #[serde(skip)]
    pub dedupe_key: String,
}

impl FanoutResult {
    /// The entry of `member`, if the group had it.
    pub fn member(&self, member: &str) -> Option<&MemberResult> {
        self.results.iter().find(|r| r.to == member)
    }
}

/// What `recall_many` recalls: every signal of one fan-out, or every signal you sent with one
/// correlation_id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RecallMany {
    Fanout(String),
    Correlation(String),
}

/// One signal's outcome in `recall_many`, decided as a single recall's (CONTRACT §6).
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct RecallEntry {
    pub signal_id: String,
    #[serde(default)]
    pub to: String,
    pub outcome: RecallOutcome,
}

#[derive(Debug, Clone, Deserialize)]
pub(crate) struct RecallEntries {
    #[serde(default)]
    pub results: Vec<RecallEntry>,
}

#[derive(Debug, Clone, Deserialize)]
pub(crate) struct Groups {
    #[serde(default)]
    pub groups: Vec<Group>,
}

/// `reviewers` or `@reviewers` → (`@reviewers`, `reviewers`): the name with its `@`, and the
/// path segment without it.
pub(crate) fn group_names(name: &str) -> (String, String) {
    let bare = name.strip_prefix('@').unwrap_or(name);
    (format!("@{bare}"), bare.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_bounced_member_carries_its_state_and_signal_id() {
        let r: FanoutResult = serde_json::from_value(json!({"fanout_id": "f", "to": "@g", "results": [
            {"to": "bob", "signal_id": "s1", "delivered": true, "recipient_state": "available",
             "publish_path": "direct"},
            {"to": "carol", "error": {"code": "recipient_unavailable", "message": "offline",
             "recipient_state": "not_available_offline", "signal_id": "s2"}},
            {"to": "dave", "error": {"code": "unavailable", "message": "down"}}]}))
        .unwrap();
        assert!(r.member("bob").unwrap().accepted() && r.member("bob").unwrap().delivered);
        let carol = r.member("carol").unwrap();
        assert_eq!(
            (carol.signal_id.as_deref(), carol.recipient_state.as_deref()),
            (Some("s2"), Some("not_available_offline"))
        );
        assert!(matches!(carol.error, Some(Error::RecipientUnavailable { .. })));
        assert_eq!(r.member("dave").unwrap().error.as_ref().map(Error::code), Some("unavailable"));
        assert_eq!(group_names("reviewers"), ("@reviewers".into(), "reviewers".into()));
        assert_eq!(group_names("@reviewers").1, "reviewers");
        let listed: Group =
            serde_json::from_value(json!({"group": "@g", "members": ["bob"], "self_join": true})).unwrap();
        assert_eq!((listed.name.as_str(), listed.identities(), listed.announce), ("@g", vec!["bob"], true));
    }
}
