//! Folds the `group.*` events of one batch into their net effect on `groups` and
//! `group_members`: which groups start over (deleted, or created again), the settings rows to
//! insert or update, and each touched membership's final row (or none).
//!
//! Deliberately no I/O and no rules: the stream already obeyed `bus::group`, so an event here
//! only records what happened; the net effect is what makes one statement per row set enough,
//! whatever the batch split (a rebuild applies the same events in larger batches).

use std::collections::BTreeMap;

use bus::event::EventBody;
use chrono::{DateTime, Utc};

use crate::encode::text;

/// (tenant, group name with its `@`)
pub type GroupKey = (String, String);

/// A group's settings as the batch leaves them.
#[derive(Debug, Clone, PartialEq)]
pub struct GroupSettings {
    pub tenant: String,
    pub group: String,
    pub self_join: bool,
    pub announce: bool,
    /// When it was created in this batch; `None` for an update of a group created before.
    pub created_at: Option<DateTime<Utc>>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct MemberRow {
    pub tenant: String,
    pub group: String,
    pub identity: String,
    pub added_at: DateTime<Utc>,
    pub added_by: String,
}

/// The net effect of one batch's group events.
#[derive(Debug, Clone, Default)]
pub struct GroupChanges {
    /// Groups whose settings and members are deleted first (deleted or created in the batch).
    pub reset: Vec<GroupKey>,
    /// Settings written after the reset: inserted when created here, else updated.
    pub settings: Vec<GroupSettings>,
    /// Memberships the batch touched: deleted, then inserted again when `Some`.
    pub members: Vec<((String, String, String), Option<MemberRow>)>,
}

/// The accumulator `Batch::fold` feeds, in stream order.
#[derive(Debug, Default)]
pub(crate) struct GroupFold {
    reset: BTreeMap<GroupKey, ()>,
    settings: BTreeMap<GroupKey, Option<GroupSettings>>,
    members: BTreeMap<(String, String, String), Option<MemberRow>>,
}

impl GroupFold {
    /// Folds `body` in if it is a group event (recorded at `at` in `tenant`); false otherwise.
    pub fn fold(&mut self, tenant: &str, at: DateTime<Utc>, body: &EventBody) -> bool {
        let Some(group) = body.group() else { return false };
        let key = (tenant.to_string(), text(group));
        match body {
            EventBody::GroupCreated(e) => {
                self.start_over(&key);
                let row = GroupSettings {
                    tenant: key.0.clone(),
                    group: key.1.clone(),
                    self_join: e.self_join,
                    announce: e.announce,
                    created_at: Some(at),
                };
                self.settings.insert(key, Some(row));
            }
            EventBody::GroupUpdated(e) => {
                let row = self.settings.entry(key.clone()).or_insert_with(|| {
                    Some(GroupSettings {
                        tenant: key.0.clone(),
                        group: key.1.clone(),
                        self_join: e.self_join,
                        announce: e.announce,
                        created_at: None,
                    })
                });
                if let Some(row) = row {
                    (row.self_join, row.announce) = (e.self_join, e.announce);
                }
            }
            EventBody::GroupDeleted(_) => {
                self.start_over(&key);
                self.settings.insert(key, None);
            }
            EventBody::GroupMemberAdded(e) => {
                let identity = text(&e.identity);
                let row = MemberRow {
                    tenant: key.0.clone(),
                    group: key.1.clone(),
                    identity: identity.clone(),
                    added_at: at,
                    added_by: text(&e.added_by),
                };
                self.members.insert((key.0, key.1, identity), Some(row));
            }
            EventBody::GroupMemberRemoved(e) => {
                self.members.insert((key.0, key.1, text(&e.identity)), None);
            }
            _ => return false,
        }
        true
    }

    /// The group's rows go before what follows in the batch: memberships folded so far are
    /// moot (the reset deletes them all).
    fn start_over(&mut self, key: &GroupKey) {
        self.reset.insert(key.clone(), ());
        self.members.retain(|(t, g, _), _| (t, g) != (&key.0, &key.1));
    }

    pub fn finish(self) -> GroupChanges {
        GroupChanges {
            reset: self.reset.into_keys().collect(),
            settings: self.settings.into_values().flatten().collect(),
            members: self.members.into_iter().collect(),
        }
    }
}

impl GroupChanges {
    pub fn is_empty(&self) -> bool {
        self.reset.is_empty() && self.settings.is_empty() && self.members.is_empty()
    }
}
