//! The HTTP API (CONTRACT §8): one file per area, merged into one router here.
//!
//! Deliberately holds only the routing table (the shared body/query helpers are `extract`); each area's
//! handlers live in their own file so new areas (sessions, inbox, plugins, OpenAPI) are added
//! beside them without touching these.

pub(crate) mod admin;
pub(crate) mod agents;
pub(crate) mod directives;
pub(crate) mod extract;
pub(crate) mod groups;
pub(crate) mod guard;
pub(crate) mod inbox;
pub(crate) mod ops;
pub(crate) mod piggyback_sessions;
pub(crate) mod plugins;
pub(crate) mod signals;
pub(crate) mod tokens;

use axum::http::Method;
use axum::routing::{delete, get, post, put};
use axum::Router;

use crate::error::ApiError;
use crate::state::Gateway;

/// The authenticated API (`/v1/...`): the routes a piggyback session header applies to.
pub fn api_routes() -> Router<Gateway> {
    Router::new()
        .route("/v1/agents", post(agents::register).get(agents::list))
        .route("/v1/agents/{identity}", delete(agents::remove))
        .route("/v1/agents/{identity}/token", post(agents::rotate))
        .route("/v1/agents/{identity}/tokens", post(tokens::issue).get(tokens::list))
        .route("/v1/agents/{identity}/tokens/{token_id}", delete(tokens::revoke))
        .route("/v1/signals", post(signals::send).get(signals::list))
        .route("/v1/signals/recall", post(groups::recall_many))
        .route("/v1/signals/{id}", get(signals::show))
        .route("/v1/signals/{id}/recall", post(signals::recall))
        .route("/v1/directives", post(directives::create).get(directives::list))
        .route("/v1/directives/{id}", get(directives::show))
        .route("/v1/directives/{id}/start", post(directives::start))
        .route("/v1/directives/{id}/progress", post(directives::progress))
        .route("/v1/directives/{id}/complete", post(directives::complete))
        .route("/v1/directives/{id}/fail", post(directives::fail))
        .route("/v1/directives/{id}/reject", post(directives::reject))
        .route("/v1/directives/{id}/cancel", post(directives::cancel))
        .route("/v1/groups", get(groups::list))
        .route("/v1/groups/{name}", put(groups::upsert).delete(groups::delete).get(groups::show))
        .route("/v1/groups/{name}/members/{identity}", put(groups::add_member).delete(groups::remove_member))
        .route("/v1/groups/{name}/join", post(groups::join))
        .route("/v1/groups/{name}/leave", post(groups::leave))
        .route("/v1/inbox", get(inbox::inbox))
        .route("/v1/inbox/ack", post(inbox::ack))
        .route("/v1/sessions", post(piggyback_sessions::open))
        .route("/v1/sessions/{id}", delete(piggyback_sessions::close))
        .route("/v1/plugins/{plugin}/facts", post(plugins::record).get(plugins::facts))
        .route("/v1/plugins/{plugin}/state", get(plugins::state))
        .route("/v1/admin/rebuild", post(admin::rebuild))
        .route("/v1/admin/doctor", get(admin::doctor))
        .route("/v1/admin/signals/expire", post(admin::force_expire))
        .route("/v1/admin/tokens", post(tokens::create_admin).get(tokens::list_admin))
        .route("/v1/admin/tokens/{token_id}", delete(tokens::revoke_admin))
}

/// Operational endpoints anyone may call.
pub fn ops_routes() -> Router<Gateway> {
    Router::new().route("/healthz", get(ops::healthz)).route("/readyz", get(ops::readyz))
}

/// The answer to a method a path does not take (the router adds `Allow`). Installed as the
/// method-not-allowed fallback after every route, so it also runs outside the piggyback
/// middleware: a refused method never heartbeats or drains a session.
pub async fn method_not_allowed(method: Method) -> ApiError {
    ApiError::MethodNotAllowed(format!("method {method} is not allowed here; the Allow header lists those that are"))
}
