//! The one table of what each call needs (CONTRACT §17): every HTTP route, WebSocket op and
//! MCP tool, mapped to the scope an agent token must hold (or to the admin), and the one check
//! every surface runs against it. docs/security.md's "Scopes by route" table is this table
//! (checked by a test), so the documentation cannot drift from what is enforced.
//!
//! Deliberately decides nothing else: who the caller is comes from `auth`, what a route does
//! from its handler; a surface asks `need_*` and `check` once, before the handler runs.

use axum::http::Method;
use bus::scope::{Scope, ScopeSet};

use crate::error::ApiError;
use crate::metrics;

/// What a call needs of its caller.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Need {
    /// An agent token holding this scope (or, where the handler allows it, an admin).
    Scope(Scope),
    /// Any authenticated caller; no scope.
    Authenticated,
    /// An admin: the global one, or a tenant admin inside its tenant.
    Admin,
    /// The global admin only.
    GlobalAdmin,
}

impl Need {
    /// How the documentation's table shows it.
    pub fn label(self) -> &'static str {
        match self {
            Need::Scope(s) => s.as_str(),
            Need::Authenticated => "-",
            Need::Admin => "admin",
            Need::GlobalAdmin => "global admin",
        }
    }
}

use Need::{Admin, Authenticated, GlobalAdmin};
const SEND: Need = Need::Scope(Scope::Send);
const RECEIVE: Need = Need::Scope(Scope::Receive);
const RECALL: Need = Need::Scope(Scope::Recall);
const FACTS: Need = Need::Scope(Scope::Facts);
const DIRECTIVES: Need = Need::Scope(Scope::Directives);
const READ: Need = Need::Scope(Scope::Read);

/// Every authenticated HTTP route: method, path as routed, need.
pub const HTTP: &[(&str, &str, Need)] = &[
    ("POST", "/v1/agents", Admin),
    ("GET", "/v1/agents", READ),
    ("DELETE", "/v1/agents/{identity}", Admin),
    ("POST", "/v1/agents/{identity}/token", Admin),
    ("POST", "/v1/agents/{identity}/tokens", Admin),
    ("GET", "/v1/agents/{identity}/tokens", Admin),
    ("DELETE", "/v1/agents/{identity}/tokens/{token_id}", Admin),
    ("POST", "/v1/signals", SEND),
    ("GET", "/v1/signals", READ),
    ("POST", "/v1/signals/recall", RECALL),
    ("GET", "/v1/signals/{id}", READ),
    ("POST", "/v1/signals/{id}/recall", RECALL),
    ("POST", "/v1/directives", DIRECTIVES),
    ("GET", "/v1/directives", READ),
    ("GET", "/v1/directives/{id}", READ),
    ("POST", "/v1/directives/{id}/start", DIRECTIVES),
    ("POST", "/v1/directives/{id}/progress", DIRECTIVES),
    ("POST", "/v1/directives/{id}/complete", DIRECTIVES),
    ("POST", "/v1/directives/{id}/fail", DIRECTIVES),
    ("POST", "/v1/directives/{id}/reject", DIRECTIVES),
    ("POST", "/v1/directives/{id}/cancel", DIRECTIVES),
    ("GET", "/v1/groups", READ),
    ("GET", "/v1/groups/{name}", READ),
    ("PUT", "/v1/groups/{name}", Admin),
    ("DELETE", "/v1/groups/{name}", Admin),
    ("PUT", "/v1/groups/{name}/members/{identity}", Admin),
    ("DELETE", "/v1/groups/{name}/members/{identity}", Admin),
    ("POST", "/v1/groups/{name}/join", DIRECTIVES),
    ("POST", "/v1/groups/{name}/leave", DIRECTIVES),
    ("GET", "/v1/inbox", RECEIVE),
    ("POST", "/v1/inbox/ack", RECEIVE),
    ("POST", "/v1/sessions", RECEIVE),
    ("DELETE", "/v1/sessions/{id}", RECEIVE),
    ("POST", "/v1/plugins/{plugin}/facts", FACTS),
    ("GET", "/v1/plugins/{plugin}/facts", READ),
    ("GET", "/v1/plugins/{plugin}/state", READ),
    ("POST", "/v1/admin/rebuild", GlobalAdmin),
    ("GET", "/v1/admin/doctor", GlobalAdmin),
    ("POST", "/v1/admin/signals/expire", Admin),
    ("POST", "/v1/admin/tokens", GlobalAdmin),
    ("GET", "/v1/admin/tokens", Admin),
    ("DELETE", "/v1/admin/tokens/{token_id}", GlobalAdmin),
    ("GET", "/v1/ws", Authenticated),
    ("POST", "/mcp", Authenticated),
];

/// Every WebSocket op (`directive` by action).
pub const WS_OPS: &[(&str, Need)] = &[
    ("send", SEND),
    ("recall", RECALL),
    ("ack", RECEIVE),
    ("fact", FACTS),
    ("directive create", DIRECTIVES),
    ("directive get", READ),
    ("directive start|progress|complete|fail|reject|cancel", DIRECTIVES),
    ("ping", Authenticated),
];

/// Every MCP tool.
pub const MCP_TOOLS: &[(&str, Need)] = &[
    ("send_signal", SEND),
    ("recall_signal", RECALL),
    ("check_inbox", RECEIVE),
    ("ack_signals", RECEIVE),
    ("get_signal", READ),
    ("list_signals", READ),
    ("list_agents", READ),
    ("record_fact", FACTS),
    ("plugin_state", READ),
    ("create_directive", DIRECTIVES),
    ("get_directive", READ),
    ("list_directives", READ),
    ("update_directive", DIRECTIVES),
    ("list_groups", READ),
];

/// What an HTTP route needs; `None` for a route the table does not know (a test keeps the
/// table and the router equal).
pub fn need_http(method: &Method, path: &str) -> Option<Need> {
    HTTP.iter().find(|(m, p, _)| *m == method.as_str() && *p == path).map(|(_, _, n)| *n)
}

pub fn need_ws(op: &str) -> Need {
    WS_OPS.iter().find(|(o, _)| *o == op).map_or(Authenticated, |(_, n)| *n)
}

pub fn need_tool(tool: &str) -> Need {
    MCP_TOOLS.iter().find(|(t, _)| *t == tool).map_or(Authenticated, |(_, n)| *n)
}

/// Whether a token's `scopes` hold `scope`; a refusal is counted and names the scope.
pub fn require(scopes: ScopeSet, scope: Scope) -> Result<(), ApiError> {
    if scopes.contains(scope) {
        return Ok(());
    }
    metrics::auth_failure(metrics::AuthFailure::Scope);
    Err(ApiError::MissingScope(scope.as_str()))
}

/// `require` for a need: only `Need::Scope` asks anything of an agent token (admin needs are
/// the admin extractors' to check, as only they know the tenant).
pub fn check(scopes: ScopeSet, need: Need) -> Result<(), ApiError> {
    match need {
        Need::Scope(scope) => require(scopes, scope),
        _ => Ok(()),
    }
}

/// The table as docs/security.md shows it: `| surface | call | scope |` rows.
pub fn markdown_table() -> String {
    let mut out = String::from("| surface | call | scope |\n|---|---|---|\n");
    for (m, p, n) in HTTP {
        out.push_str(&format!("| HTTP | `{m} {p}` | {} |\n", n.label()));
    }
    for (op, n) in WS_OPS {
        out.push_str(&format!("| WebSocket | `{op}` | {} |\n", n.label()));
    }
    for (tool, n) in MCP_TOOLS {
        out.push_str(&format!("| MCP | `{tool}` | {} |\n", n.label()));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_and_the_openapi_document_name_the_same_routes() {
        let doc = crate::openapi::document();
        let mut documented = Vec::new();
        for (path, item) in doc["paths"].as_object().unwrap() {
            for method in item.as_object().unwrap().keys() {
                if path.starts_with("/v1/") && path != "/v1/ws" {
                    documented.push((method.to_uppercase(), path.clone()));
                }
            }
        }
        for (m, p) in &documented {
            let method = Method::from_bytes(m.as_bytes()).unwrap();
            assert!(need_http(&method, p).is_some(), "{m} {p} is missing from scopes::HTTP");
        }
        for (m, p, _) in HTTP.iter().filter(|(_, p, _)| p.starts_with("/v1/") && *p != "/v1/ws") {
            assert!(documented.contains(&(m.to_string(), p.to_string())), "{m} {p} is not in the openapi document");
        }
    }

    #[test]
    fn every_mcp_tool_is_in_the_table() {
        for tool in crate::api::mcp::catalog::tools() {
            assert!(MCP_TOOLS.iter().any(|(t, _)| *t == tool.name), "{} is missing from scopes::MCP_TOOLS", tool.name);
        }
        assert_eq!(MCP_TOOLS.len(), crate::api::mcp::catalog::tools().len());
    }

    #[test]
    fn docs_security_md_shows_this_table() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/security.md");
        let doc = std::fs::read_to_string(path).expect("docs/security.md");
        assert!(
            doc.contains(&markdown_table()),
            "docs/security.md's \"Scopes by route\" table differs from scopes.rs; paste this one:\n{}",
            markdown_table()
        );
    }
}
