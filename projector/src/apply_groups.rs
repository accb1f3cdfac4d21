//! One batch's group changes into `groups` and `group_members`, in either dialect: groups that
//! start over are cleared, settings inserted or updated, touched memberships deleted and their
//! final rows inserted — one multi-row statement per step.
//!
//! Deliberately only the net effect `batch_groups.rs` folded, and never the transaction or the
//! checkpoint (`apply.rs` owns both).

use crate::batch::Batch;
use crate::batch_groups::{GroupSettings, MemberRow};
use crate::error::Result;
use crate::sql::{Conn, RowSet};

/// Booleans travel as 0/1 (the row sets have no boolean column) and are compared back.
fn flag(b: bool) -> i16 {
    i16::from(b)
}

pub(crate) async fn groups(conn: &mut Conn<'_>, b: &Batch) -> Result<()> {
    let g = &b.groups;
    if g.is_empty() {
        return Ok(());
    }
    if !g.reset.is_empty() {
        for table in ["groups", "group_members"] {
            let rows = RowSet::new()
                .col("tenant", g.reset.iter().map(|k| k.0.as_str()))
                .col("g", g.reset.iter().map(|k| k.1.as_str()));
            let mut args = conn.args();
            let sql = format!(
                "DELETE FROM {table} WHERE (tenant, group_name) IN (SELECT tenant, g FROM {})",
                args.rows(rows)
            );
            conn.execute(&sql, args).await?;
        }
    }
    let (created, updated): (Vec<&GroupSettings>, Vec<&GroupSettings>) =
        g.settings.iter().partition(|s| s.created_at.is_some());
    if !created.is_empty() {
        let rows = RowSet::new()
            .col("tenant", created.iter().map(|s| s.tenant.as_str()))
            .col("g", created.iter().map(|s| s.group.as_str()))
            .col("sj", created.iter().map(|s| flag(s.self_join)))
            .col("an", created.iter().map(|s| flag(s.announce)))
            .col("at", created.iter().map(|s| s.created_at));
        let mut args = conn.args();
        let sql = format!(
            "INSERT INTO groups (tenant, group_name, self_join, announce, created_at) \
             SELECT tenant, g, sj <> 0, an <> 0, at FROM {} WHERE true \
             ON CONFLICT (tenant, group_name) DO NOTHING",
            args.rows(rows)
        );
        conn.execute(&sql, args).await?;
    }
    if !updated.is_empty() {
        let rows = RowSet::new()
            .col("tenant", updated.iter().map(|s| s.tenant.as_str()))
            .col("g", updated.iter().map(|s| s.group.as_str()))
            .col("sj", updated.iter().map(|s| flag(s.self_join)))
            .col("an", updated.iter().map(|s| flag(s.announce)));
        let mut args = conn.args();
        let sql = format!(
            "UPDATE groups AS x SET self_join = u.sj <> 0, announce = u.an <> 0 \
             FROM {} WHERE x.tenant = u.tenant AND x.group_name = u.g",
            args.rows(rows)
        );
        conn.execute(&sql, args).await?;
    }
    if !g.members.is_empty() {
        let keys = &g.members;
        let rows = RowSet::new()
            .col("tenant", keys.iter().map(|k| k.0 .0.as_str()))
            .col("g", keys.iter().map(|k| k.0 .1.as_str()))
            .col("identity", keys.iter().map(|k| k.0 .2.as_str()));
        let mut args = conn.args();
        let sql = format!(
            "DELETE FROM group_members WHERE (tenant, group_name, identity) IN \
             (SELECT tenant, g, identity FROM {})",
            args.rows(rows)
        );
        conn.execute(&sql, args).await?;
    }
    let added: Vec<&MemberRow> = g.members.iter().filter_map(|(_, row)| row.as_ref()).collect();
    if !added.is_empty() {
        let rows = RowSet::new()
            .col("tenant", added.iter().map(|r| r.tenant.as_str()))
            .col("g", added.iter().map(|r| r.group.as_str()))
            .col("identity", added.iter().map(|r| r.identity.as_str()))
            .col("at", added.iter().map(|r| r.added_at))
            .col("ab", added.iter().map(|r| r.added_by.as_str()));
        let mut args = conn.args();
        let sql = format!(
            "INSERT INTO group_members (tenant, group_name, identity, added_at, added_by) \
             SELECT tenant, g, identity, at, ab FROM {} WHERE true \
             ON CONFLICT (tenant, group_name, identity) DO NOTHING",
            args.rows(rows)
        );
        conn.execute(&sql, args).await?;
    }
    Ok(())
}
