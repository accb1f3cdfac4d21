//! The group commands (CONTRACT §15), shared by HTTP, MCP and the removal of an agent: the
//! admin's create/update/delete and member changes, an agent's join and leave, the roster
//! signals (`PeerJoined`/`PeerLeft`) a change causes, and the reads (`list`, `show`).
//!
//! Deliberately thin: `bus::group::decide` rules and `SignalStore::execute_group` appends with its
//! compare-and-set; the roster signals are planned by `bus::fanout::plan_roster` and keyed by the
//! group event's sequence, so carrying them out again records nothing twice.

use bus::event::RecipientState;
use bus::fanout::{plan_roster, FanoutLimits};
use bus::group::GroupCommand;
use bus::group_store::GroupExecuted;
use bus::names::group_from_path;
use chrono::Utc;
use serde_json::{json, Value};

use crate::error::ApiError;
use crate::state::Gateway;
use crate::{metrics, reads, wire};

/// The actor of group changes the admin makes.
pub const ADMIN_ACTOR: &str = "admin";

/// A group change's answer: whether it created the group (201 for `PUT`), and the group.
#[derive(Debug)]
pub struct Changed {
    pub created: bool,
    pub group: Value,
}

/// Runs `command` on the group named `name` (as in a path: without `@`, or with it) as `actor`.
pub async fn execute(gw: &Gateway, tenant: &str, command: GroupCommand, actor: &str) -> Result<Changed, ApiError> {
    if let GroupCommand::AddMember { identity, .. } = &command {
        bus::names::validate_identity(identity)?;
        if !gw.registry().is_registered(tenant, identity) {
            return Err(ApiError::UnknownRecipient);
        }
    }
    let group = command.group().to_string();
    let executed = gw.store().execute_group(tenant, &group, &command, actor, Utc::now()).await?;
    announce(gw, tenant, &group, &executed).await;
    let created = !executed.before.exists && executed.after.exists;
    if !executed.after.exists {
        return Ok(Changed { created, group: json!({ "group": group, "deleted": true }) });
    }
    // Answered as `GET /v1/groups/{name}` would, once the read models hold the change.
    if let Some((seq, _)) = executed.appended.last() {
        if let Err(e) = gw.queries().wait_for(*seq, gw.config().drain_wait).await {
            tracing::warn!(error = %e, group, "read models lag behind a group change");
        }
    }
    Ok(Changed { created, group: show(gw, tenant, &group).await? })
}

/// The group's name with its `@`, from a path segment (`reviewers` or `@reviewers`).
pub fn name(path: &str) -> Result<String, ApiError> {
    Ok(group_from_path(path)?)
}

/// Records the roster signals of what `executed` appended (a failure is logged: the change is
/// on the stream, and the signals are keyed by its sequence, so they are never sent twice).
async fn announce(gw: &Gateway, tenant: &str, group: &str, executed: &GroupExecuted) {
    let cfg = gw.config();
    for (seq, signals) in &executed.roster {
        let limits = FanoutLimits {
            types: &cfg.types,
            send: bus::send::SendLimits::payload(cfg.max_payload_bytes),
            max_fanout: usize::MAX,
            now: Utc::now(),
        };
        let view = |to: &str| reads::recipient_view(gw, tenant, to, limits.now);
        match plan_roster(limits, tenant, group, *seq, signals, view) {
            Ok(Some(plan)) => {
                let recorded = gw.store().record_roster(tenant, plan).await;
                for m in &recorded.results {
                    match &m.outcome {
                        Ok(r) if r.created => {
                            if let Some(s) = r.state.sent.as_deref() {
                                metrics::sent(
                                    &cfg.types,
                                    &s.signal_type,
                                    s.delivery_class,
                                    s.recipient_state,
                                    s.publish_path,
                                );
                            }
                        }
                        Ok(_) => {}
                        Err(e) => tracing::warn!(group, to = %m.to, error = %e, "roster signal not recorded"),
                    }
                }
            }
            Ok(None) => {}
            Err(e) => tracing::warn!(group, error = %e, "roster signals not planned"),
        }
    }
}

/// Takes a removed agent out of every group it is in (CONTRACT §15), announcing its leaving.
/// Returns how many groups it left.
pub async fn leave_all(gw: &Gateway, tenant: &str, identity: &str) -> Result<usize, ApiError> {
    reads::consistent(gw).await;
    let groups = gw.queries().groups_of(tenant, identity).await?;
    let mut left = 0;
    for (group, outcome) in gw.store().remove_from_groups(tenant, identity, &groups, Utc::now()).await {
        match outcome {
            Ok(executed) => {
                left += usize::from(!executed.appended.is_empty());
                announce(gw, tenant, &group, &executed).await;
            }
            Err(bus::Error::Domain(_)) => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(left)
}

/// `{"groups":[{"group","members","self_join","announce"}]}` of `tenant`, sorted by name.
pub async fn list(gw: &Gateway, tenant: &str) -> Result<Value, ApiError> {
    reads::consistent(gw).await;
    let groups = gw.queries().groups(tenant).await?;
    let groups: Vec<Value> = groups
        .iter()
        .map(|g| {
            let members: Vec<&str> = g.members.iter().map(|m| m.identity.as_str()).collect();
            json!({ "group": g.group, "members": members, "self_join": g.self_join, "announce": g.announce })
        })
        .collect();
    Ok(json!({ "groups": groups }))
}

/// One group with each member's recipient state now; `unknown_group` when there is none.
pub async fn show(gw: &Gateway, tenant: &str, group: &str) -> Result<Value, ApiError> {
    reads::consistent(gw).await;
    let Some(g) = gw.queries().group(tenant, group).await? else {
        return Err(ApiError::UnknownGroup(group.to_string()));
    };
    let now = Utc::now();
    let members: Vec<Value> = g
        .members
        .iter()
        .map(|m| {
            let state = match gw.registry().is_registered(tenant, &m.identity) {
                true => gw.presence().resolve(tenant, &m.identity, now, gw.config().stale_after).state,
                false => RecipientState::NotAvailableOffline,
            };
            json!({
                "identity": m.identity,
                "recipient_state": state.as_str(),
                "added_at": wire::ts(m.added_at),
                "added_by": m.added_by,
            })
        })
        .collect();
    Ok(json!({
        "group": g.group,
        "self_join": g.self_join,
        "announce": g.announce,
        "created_at": wire::ts(g.created_at),
        "members": members,
    }))
}
