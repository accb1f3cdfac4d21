//! Where a directive stands (CONTRACT §14): the status of the directive object, its read model
//! and its transitions' refusals.
//!
//! Deliberately a leaf: the event catalog, the rules and the errors all name it, so it names
//! none of them.

use serde::{Deserialize, Serialize};

/// Where a directive stands; also the `status` of the directive object and of its read model.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DirectiveStatus {
    /// Nothing recorded: for every command but a create, the directive does not exist.
    #[default]
    Absent,
    Requested,
    Started,
    Completed,
    Failed,
    Rejected,
    Canceled,
    Expired,
}

impl DirectiveStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            DirectiveStatus::Absent => "absent",
            DirectiveStatus::Requested => "requested",
            DirectiveStatus::Started => "started",
            DirectiveStatus::Completed => "completed",
            DirectiveStatus::Failed => "failed",
            DirectiveStatus::Rejected => "rejected",
            DirectiveStatus::Canceled => "canceled",
            DirectiveStatus::Expired => "expired",
        }
    }

    /// A status as a filter names it (`?status=started`); `absent` is no status anyone asks for.
    pub fn parse(s: &str) -> Option<Self> {
        use DirectiveStatus::*;
        [Requested, Started, Completed, Failed, Rejected, Canceled, Expired].into_iter().find(|st| st.as_str() == s)
    }

    /// Requested or started: it may still end.
    pub fn is_open(self) -> bool {
        matches!(self, DirectiveStatus::Requested | DirectiveStatus::Started)
    }

    /// One of the five final, mutually exclusive outcomes.
    pub fn is_terminal(self) -> bool {
        !self.is_open() && self != DirectiveStatus::Absent
    }
}
