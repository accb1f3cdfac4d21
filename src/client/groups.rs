//! `signalbus group create|delete|add|remove|join|leave|list|show` (CONTRACT §15): the verbs'
//! flags, the HTTP call each makes, and a group printed as its settings and a member table.
//!
//! Deliberately no rules of its own: who may change a group (the admin; an agent only joins or
//! leaves a self-join group) is the bus's answer, printed with its code and message (exit 1). A
//! name is taken with or without its `@` and sent without it, as the paths want.

use clap::Subcommand;
use reqwest::Method;
use serde_json::{json, Value};

use super::args::Conn;
use super::http::{call, call_with_status, segment, Failure};
use super::render::{cell, pairs_text, print, table_text};

#[derive(Debug, Subcommand)]
pub enum GroupCmd {
    /// Create a group (admin), or change the settings of an existing one.
    Create {
        /// The group's name, with or without its @ (lowercase letters, digits, _ . -).
        name: String,
        /// Let agents join and leave it themselves (`group join|leave`).
        #[arg(long)]
        self_join: bool,
        /// Do not send PeerJoined / PeerLeft to the other members when a member joins or leaves.
        #[arg(long)]
        no_announce: bool,
        /// The tenant (default: the bus's default tenant).
        #[arg(long)]
        tenant: Option<String>,
        #[command(flatten)]
        conn: Conn,
    },
    /// Delete a group and its memberships (admin); signals already sent stay as they are.
    Delete {
        name: String,
        #[arg(long)]
        tenant: Option<String>,
        #[command(flatten)]
        conn: Conn,
    },
    /// Add a registered agent to a group (admin; adding a member again changes nothing).
    Add {
        name: String,
        identity: String,
        #[arg(long)]
        tenant: Option<String>,
        #[command(flatten)]
        conn: Conn,
    },
    /// Remove a member from a group (admin; removing a non-member changes nothing).
    Remove {
        name: String,
        identity: String,
        #[arg(long)]
        tenant: Option<String>,
        #[command(flatten)]
        conn: Conn,
    },
    /// Join a self-join group as the token's agent.
    Join {
        name: String,
        #[command(flatten)]
        conn: Conn,
    },
    /// Leave a self-join group as the token's agent.
    Leave {
        name: String,
        #[command(flatten)]
        conn: Conn,
    },
    /// List the tenant's groups with their members.
    List {
        /// The tenant to list (admin; an agent sees its own).
        #[arg(long)]
        tenant: Option<String>,
        #[command(flatten)]
        conn: Conn,
    },
    /// Show one group with each member's recipient state.
    Show {
        name: String,
        /// The group's tenant (admin; an agent sees its own).
        #[arg(long)]
        tenant: Option<String>,
        #[command(flatten)]
        conn: Conn,
    },
}

type Outcome = (Conn, Result<(), Failure>);

/// Runs a `group` verb.
pub async fn run(cmd: GroupCmd) -> Outcome {
    match cmd {
        GroupCmd::Create { name, self_join, no_announce, tenant, conn } => {
            let mut body = json!({"self_join": self_join, "announce": !no_announce});
            if let Some(t) = tenant {
                body["tenant"] = json!(t);
            }
            let r = call_with_status(&conn, Method::PUT, &path(&name, ""), Some(body)).await.map(|(status, g)| {
                if conn.json {
                    print(true, &g, None, &[]);
                } else {
                    let said = if status == 201 { "created" } else { "updated" };
                    print!("{}", group_text(&g, Some(said)));
                }
            });
            (conn, r)
        }
        GroupCmd::Delete { name, tenant, conn } => {
            let url = with_tenant(path(&name, ""), tenant.as_deref());
            let r = call(&conn, Method::DELETE, &url, None).await.map(|v| print(conn.json, &v, None, &[]));
            (conn, r)
        }
        GroupCmd::Add { name, identity, tenant, conn } => {
            let url = with_tenant(path(&name, &format!("/members/{}", segment(&identity))), tenant.as_deref());
            one(conn, Method::PUT, url).await
        }
        GroupCmd::Remove { name, identity, tenant, conn } => {
            let url = with_tenant(path(&name, &format!("/members/{}", segment(&identity))), tenant.as_deref());
            one(conn, Method::DELETE, url).await
        }
        GroupCmd::Join { name, conn } => one(conn, Method::POST, path(&name, "/join")).await,
        GroupCmd::Leave { name, conn } => one(conn, Method::POST, path(&name, "/leave")).await,
        GroupCmd::List { tenant, conn } => {
            let url = with_tenant("/v1/groups".to_string(), tenant.as_deref());
            let r = call(&conn, Method::GET, &url, None).await.map(|v| {
                if conn.json {
                    print(true, &v, None, &[]);
                } else {
                    print!("{}", list_text(&v));
                }
            });
            (conn, r)
        }
        GroupCmd::Show { name, tenant, conn } => {
            one(conn, Method::GET, with_tenant(path(&name, ""), tenant.as_deref())).await
        }
    }
}

/// `/v1/groups/{name}` (the name without its `@`) followed by `tail`.
fn path(name: &str, tail: &str) -> String {
    format!("/v1/groups/{}{tail}", segment(name.strip_prefix('@').unwrap_or(name)))
}

fn with_tenant(url: String, tenant: Option<&str>) -> String {
    match tenant {
        Some(t) => format!("{url}?tenant={}", segment(t)),
        None => url,
    }
}

/// One call whose answer is a group, printed as one.
async fn one(conn: Conn, method: Method, url: String) -> Outcome {
    let r = call(&conn, method, &url, None).await.map(|g| {
        if conn.json {
            print(true, &g, None, &[]);
        } else {
            print!("{}", group_text(&g, None));
        }
    });
    (conn, r)
}

/// A group: its settings (and, after a create, whether it was `created` or `updated`), then
/// one row per member.
pub fn group_text(g: &Value, said: Option<&str>) -> String {
    let mut pairs = vec![("group", cell(g.get("group")))];
    if let Some(s) = said {
        pairs.push((s, "true".to_string()));
    }
    for key in ["self_join", "announce", "created_at"] {
        pairs.push((key, cell(g.get(key))));
    }
    let members = g.get("members").and_then(Value::as_array).cloned().unwrap_or_default();
    pairs_text(&pairs) + &table_text(&members, &["identity", "recipient_state", "added_at", "added_by"])
}

/// The tenant's groups, one row each, members joined by commas.
pub fn list_text(v: &Value) -> String {
    let rows: Vec<Value> = v
        .get("groups")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|g| {
            let members: Vec<&str> =
                g.get("members").and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str).collect();
            let mut row = g.clone();
            row["members"] = json!(if members.is_empty() { "-".to_string() } else { members.join(",") });
            row
        })
        .collect();
    table_text(&rows, &["group", "members", "self_join", "announce"])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_name_goes_into_the_path_without_its_at() {
        assert_eq!(path("@reviewers", "/join"), "/v1/groups/reviewers/join");
        assert_eq!(path("reviewers", ""), "/v1/groups/reviewers");
        assert_eq!(with_tenant(path("r", "/members/bob"), Some("acme")), "/v1/groups/r/members/bob?tenant=acme");
    }

    #[test]
    fn a_group_prints_its_settings_then_its_members() {
        let g = json!({"group":"@reviewers","self_join":true,"announce":true,"created_at":"t0","members":[
            {"identity":"bob","recipient_state":"available","added_at":"t1","added_by":"admin"}]});
        let text = group_text(&g, Some("created"));
        assert!(text.starts_with("group       @reviewers\ncreated     true\nself_join   true\n"), "{text}");
        assert!(
            text.contains("IDENTITY  RECIPIENT_STATE  ADDED_AT  ADDED_BY\nbob       available        t1"),
            "{text}"
        );
        let list = list_text(&json!({"groups":[
            {"group":"@a","members":["bob","carol"],"self_join":false,"announce":true},
            {"group":"@b","members":[],"self_join":true,"announce":false}]}));
        assert_eq!(
            list,
            "GROUP  MEMBERS    SELF_JOIN  ANNOUNCE\n@a     bob,carol  false      true\n@b     -          true       false\n"
        );
    }
}
