//! Tokens (CONTRACT §17) for the admin — and for a tenant admin, inside its own tenant: issue an
//! agent another token (some scopes, an expiry, a label), list and revoke them
//! (`AdminClient::issue_token`, `tokens`, `revoke_token`); create, list and revoke tenant admin
//! tokens (`create_admin_token`, `admin_tokens`, `revoke_admin_token`).
//!
//! Deliberately nothing for the agent's `Client`: it takes any token it is given (an issued one,
//! or a JWT from an identity provider) and sends it unchanged, and never assumes it holds
//! `receive` — a session of a token without it is simply never pushed to.

use reqwest::Method;
use serde_json::json;

use crate::error::Result;
use crate::http::{segment, AdminClient};
use crate::types_token::{AdminToken, AdminTokenInfo, IssuedToken, TokenInfo, TokenRequest, Tokens};

fn tokens_path(identity: &str) -> String {
    format!("/v1/agents/{}/tokens", segment(identity))
}

fn tenant_query(tenant: Option<&str>) -> [(&'static str, Option<String>); 1] {
    [("tenant", tenant.map(str::to_string))]
}

impl AdminClient {
    /// Issues another token for `identity` in `tenant` (default `default`), as `req` asks; its
    /// `token` is shown this once. `NotFound` for no such agent, `InvalidRequest` for an empty
    /// scope list, `Forbidden` for a tenant admin of another tenant; `Usage` for a zero expiry.
    pub async fn issue_token(&self, identity: &str, req: &TokenRequest, tenant: Option<&str>) -> Result<IssuedToken> {
        let body = req.body()?;
        self.api.typed(Method::POST, &tokens_path(identity), &tenant_query(tenant), Some(&body)).await
    }

    /// `identity`'s tokens without their secrets: the registration token first
    /// (`token_id` `registration`), then the issued ones not revoked.
    pub async fn tokens(&self, identity: &str, tenant: Option<&str>) -> Result<Vec<TokenInfo>> {
        let page: Tokens<TokenInfo> =
            self.api.typed(Method::GET, &tokens_path(identity), &tenant_query(tenant), None).await?;
        Ok(page.tokens)
    }

    /// Revokes one of `identity`'s issued tokens: it stops working at once and its sessions
    /// close (1008 `token revoked`). Revoking it again answers the same; `NotFound` for an id
    /// never issued to it; `InvalidRequest` for `registration` (`rotate` replaces that one).
    pub async fn revoke_token(&self, identity: &str, token_id: &str, tenant: Option<&str>) -> Result<()> {
        let path = format!("{}/{}", tokens_path(identity), segment(token_id));
        self.api.request(Method::DELETE, &path, &tenant_query(tenant), None, &[]).await?;
        Ok(())
    }

    /// A tenant admin token (the global admin only): an admin inside `tenant` only — any call
    /// naming another tenant is `Forbidden`, as are `rebuild` and the admin-token calls but
    /// `admin_tokens`. Its `token` is shown this once.
    pub async fn create_admin_token(&self, tenant: &str, label: Option<&str>) -> Result<AdminToken> {
        let mut body = json!({ "tenant": tenant });
        if let Some(l) = label {
            body["label"] = json!(l);
        }
        self.api.typed(Method::POST, "/v1/admin/tokens", &[], Some(&body)).await
    }

    /// The tenant admin tokens (of `tenant` only, when given), without their secrets; a tenant
    /// admin lists its own tenant's.
    pub async fn admin_tokens(&self, tenant: Option<&str>) -> Result<Vec<AdminTokenInfo>> {
        let page: Tokens<AdminTokenInfo> =
            self.api.typed(Method::GET, "/v1/admin/tokens", &tenant_query(tenant), None).await?;
        Ok(page.tokens)
    }

    /// Revokes a tenant admin token (the global admin only): it stops working at once;
    /// `NotFound` for an unknown id.
    pub async fn revoke_admin_token(&self, token_id: &str) -> Result<()> {
        let path = format!("/v1/admin/tokens/{}", segment(token_id));
        self.api.request(Method::DELETE, &path, &[], None, &[]).await?;
        Ok(())
    }
}
