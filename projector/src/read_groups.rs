//! The group answers of `Queries`, in either dialect: groups with their members, an identity's
//! groups, and the signals one sender sent as one group send or under one correlation id (the
//! ids a bulk recall decides on, each on the stream).
//!
//! Deliberately read-only and lock-free, like `read.rs`; a recall's outcome is never read here.

use std::collections::BTreeMap;

use uuid::Uuid;

use crate::backend::Backend;
use crate::error::Result;
use crate::queries::{GroupMemberRow, GroupRow, SignalRow};
use crate::read::{signal_row, SIGNAL_COLS};

/// Which of a sender's signals to find.
#[derive(Debug, Clone, Copy)]
pub(crate) enum SentAs<'a> {
    Fanout(Uuid),
    Correlation(&'a str),
}

impl Backend {
    /// The groups of `tenant` (only `name`, when given) with their members.
    pub async fn groups(&self, tenant: &str, name: Option<&str>) -> Result<Vec<GroupRow>> {
        let name = name.map(str::to_string);
        let mut c = self.acquire().await?;
        let mut conn = c.conn();
        let cond = "tenant = $1 AND ($2 IS NULL OR group_name = $2)";
        let sql =
            format!("SELECT group_name, self_join, announce, created_at FROM groups WHERE {cond} ORDER BY group_name");
        let args = conn.args().bind(tenant).bind(&name);
        let mut groups = BTreeMap::new();
        for r in conn.fetch_all(&sql, args).await? {
            let group: String = r.get("group_name")?;
            let row = GroupRow {
                tenant: tenant.to_string(),
                group: group.clone(),
                self_join: r.get("self_join")?,
                announce: r.get("announce")?,
                created_at: r.ts("created_at")?,
                members: Vec::new(),
            };
            groups.insert(group, row);
        }
        let sql = format!(
            "SELECT group_name, identity, added_at, added_by FROM group_members WHERE {cond} \
             ORDER BY group_name, identity"
        );
        let args = conn.args().bind(tenant).bind(&name);
        for r in conn.fetch_all(&sql, args).await? {
            let group: String = r.get("group_name")?;
            if let Some(g) = groups.get_mut(&group) {
                let member = GroupMemberRow {
                    identity: r.get("identity")?,
                    added_at: r.ts("added_at")?,
                    added_by: r.get("added_by")?,
                };
                g.members.push(member);
            }
        }
        Ok(groups.into_values().collect())
    }

    pub async fn groups_of(&self, tenant: &str, identity: &str) -> Result<Vec<String>> {
        let mut c = self.acquire().await?;
        let mut conn = c.conn();
        let sql = "SELECT group_name FROM group_members WHERE tenant = $1 AND identity = $2 ORDER BY group_name";
        let args = conn.args().bind(tenant).bind(identity);
        conn.fetch_all(sql, args).await?.iter().map(|r| r.get("group_name")).collect()
    }

    pub(crate) async fn signals_by(&self, tenant: &str, sender: &str, by: SentAs<'_>) -> Result<Vec<SignalRow>> {
        let mut c = self.acquire().await?;
        let mut conn = c.conn();
        let args = conn.args().bind(tenant).bind(sender);
        let (column, args) = match by {
            SentAs::Fanout(id) => ("fanout_id", args.bind(id)),
            SentAs::Correlation(corr) => ("correlation_id", args.bind(corr)),
        };
        let cond = format!("tenant = $1 AND from_identity = $2 AND {column} = $3");
        let sql = format!(
            "SELECT {SIGNAL_COLS} FROM ( \
               SELECT {SIGNAL_COLS} FROM signal_queue WHERE {cond} \
               UNION ALL SELECT {SIGNAL_COLS} FROM signal_history WHERE {cond} \
             ) s ORDER BY to_identity, id"
        );
        conn.fetch_all(&sql, args).await?.iter().map(signal_row).collect()
    }
}
