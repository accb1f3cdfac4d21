//! Groups (CONTRACT §15) for an agent — send to a group (`send_group`), list and show groups,
//! join and leave self-join groups, recall many signals at once — and for the admin
//! (`AdminClient::create_group`, `delete_group`, `add_member`, `remove_member`, `groups`,
//! `group`).
//!
//! Deliberately a call of its own for a group send, not `send("@name")`: its answer is one entry
//! per member (a [`FanoutResult`]), not one signal, and it is never spooled — a send the bus may
//! not have taken fails with its dedupe_key, and repeating it with that key never sends anyone
//! a second signal. `send` refuses a `to` starting with `@` (`Usage`) and points here.

use reqwest::Method;
use serde_json::json;

use crate::client::Client;
use crate::error::{Error, Result};
use crate::http::{segment, AdminClient};
use crate::rpc::{over_session_or_http, protocol, transmit_send};
use crate::schedule;
use crate::types_group::{
    group_names, FanoutResult, Group, GroupOptions, Groups, RecallEntries, RecallEntry, RecallMany,
};
use crate::types_send::SendRequest;

impl Client {
    /// Sends one signal to each member of a group other than you (`req.to`: `@reviewers`, or
    /// `reviewers`), all with one `fanout_id`, over the session when it is open, else HTTP.
    /// Each member's entry is true on its own: delivered, queued, or its own error (a bounced
    /// sync send is that member's `RecipientUnavailable`). It always carries a dedupe_key (the
    /// request's, or a fresh `sbc-<uuid>`): repeating it answers the members already accepted
    /// with their original signals and sends only to the others. Never spooled: a failure with an
    /// unknown outcome (`Transport`, `Timeout`, `Unavailable`) carries the dedupe_key to retry
    /// with. Errors: `UnknownGroup`, `InvalidRequest` (over `max_fanout` members), ...
    pub async fn send_group(&self, mut req: SendRequest) -> Result<FanoutResult> {
        schedule::check(&req)?;
        req.to = group_names(&req.to).0;
        let key = req.dedupe_key.get_or_insert_with(|| format!("sbc-{}", uuid::Uuid::new_v4())).clone();
        let answer = transmit_send(&self.inner, &req).await?;
        let mut fanout: FanoutResult = serde_json::from_value(answer).map_err(|e| protocol("send to a group", e))?;
        fanout.dedupe_key = key;
        Ok(fanout)
    }

    /// The groups of your tenant (sorted by name) with their members (by identity only).
    pub async fn groups(&self) -> Result<Vec<Group>> {
        let page: Groups = self.inner.api.typed(Method::GET, "/v1/groups", &[], None).await?;
        Ok(page.groups)
    }

    /// One group (`@name` or `name`) with each member's recipient state; `UnknownGroup`.
    pub async fn group(&self, name: &str) -> Result<Group> {
        let path = format!("/v1/groups/{}", segment(&group_names(name).1));
        self.inner.api.typed(Method::GET, &path, &[], None).await
    }

    /// Joins a self-join group (`Forbidden` for any other); its members are told (`PeerJoined`)
    /// when it announces. Answers the group.
    pub async fn join_group(&self, name: &str) -> Result<Group> {
        let path = format!("/v1/groups/{}/join", segment(&group_names(name).1));
        self.inner.api.typed(Method::POST, &path, &[], None).await
    }

    /// Leaves a self-join group (`Forbidden` for any other). Answers the group.
    pub async fn leave_group(&self, name: &str) -> Result<Group> {
        let path = format!("/v1/groups/{}/leave", segment(&group_names(name).1));
        self.inner.api.typed(Method::POST, &path, &[], None).await
    }

    /// Recalls every signal you sent in one fan-out, or with one correlation_id: one outcome per
    /// signal, each decided as a single recall's (`Recalled`, `AlreadyDelivered`, ...). Someone
    /// else's or unknown: no results.
    pub async fn recall_many(&self, by: RecallMany) -> Result<Vec<RecallEntry>> {
        let body = match &by {
            RecallMany::Fanout(id) => json!({"fanout_id": id}),
            RecallMany::Correlation(id) => json!({"correlation_id": id}),
        };
        let mut frame = body.clone();
        frame["op"] = json!("recall");
        let answer = over_session_or_http(&self.inner, frame, None, || {
            self.inner.api.request(Method::POST, "/v1/signals/recall", &[], Some(&body), &[])
        })
        .await?;
        let results: RecallEntries = serde_json::from_value(answer).map_err(|e| protocol("recall_many", e))?;
        Ok(results.results)
    }
}

impl AdminClient {
    /// Creates a group (`@name` or `name`) in `tenant` (default `default`), or updates its
    /// options when it exists; answers it.
    pub async fn create_group(&self, name: &str, options: &GroupOptions, tenant: Option<&str>) -> Result<Group> {
        let path = format!("/v1/groups/{}", segment(&group_names(name).1));
        let mut body = serde_json::to_value(options).map_err(|e| Error::Protocol(format!("cannot encode: {e}")))?;
        if let Some(t) = tenant {
            body["tenant"] = json!(t);
        }
        self.api.typed(Method::PUT, &path, &[], Some(&body)).await
    }

    /// Deletes a group; `UnknownGroup` when there is none.
    pub async fn delete_group(&self, name: &str, tenant: Option<&str>) -> Result<()> {
        let path = format!("/v1/groups/{}", segment(&group_names(name).1));
        self.api.request(Method::DELETE, &path, &[("tenant", tenant.map(str::to_string))], None, &[]).await?;
        Ok(())
    }

    /// Adds a registered identity to a group (idempotent; `UnknownRecipient` for one that is
    /// not registered). Answers the group.
    pub async fn add_member(&self, name: &str, identity: &str, tenant: Option<&str>) -> Result<Group> {
        let path = format!("/v1/groups/{}/members/{}", segment(&group_names(name).1), segment(identity));
        self.api.typed(Method::PUT, &path, &[("tenant", tenant.map(str::to_string))], None).await
    }

    /// Removes an identity from a group (idempotent). Answers the group.
    pub async fn remove_member(&self, name: &str, identity: &str, tenant: Option<&str>) -> Result<Group> {
        let path = format!("/v1/groups/{}/members/{}", segment(&group_names(name).1), segment(identity));
        self.api.typed(Method::DELETE, &path, &[("tenant", tenant.map(str::to_string))], None).await
    }

    /// The groups of `tenant` (default `default`) with their members (by identity only).
    pub async fn groups(&self, tenant: Option<&str>) -> Result<Vec<Group>> {
        let page: Groups =
            self.api.typed(Method::GET, "/v1/groups", &[("tenant", tenant.map(str::to_string))], None).await?;
        Ok(page.groups)
    }

    /// One group of `tenant` with each member's recipient state.
    pub async fn group(&self, name: &str, tenant: Option<&str>) -> Result<Group> {
        let path = format!("/v1/groups/{}", segment(&group_names(name).1));
        self.api.typed(Method::GET, &path, &[("tenant", tenant.map(str::to_string))], None).await
    }
}
