//! The registry's folds: rotation, removal, issued and revoked tokens, tenant admin tokens,
//! and the order-safety that lets a writer apply its event before the tail replays older ones.

use super::*;
use bus::event::{
    AdminTokenIssued, AdminTokenRevoked, AgentRegistered, AgentRemoved, TokenIssued, TokenRevoked, TokenRotated,
};
use bus::scope::Scope;

fn ev(tenant: &str, body: EventBody) -> Event {
    Event::new(tenant, None, Utc::now(), body)
}

fn reg(tenant: &str, identity: &str, hash: &str) -> Event {
    ev(
        tenant,
        EventBody::AgentRegistered(AgentRegistered {
            identity: identity.into(),
            kind: SessionKind::Interactive,
            token_hash: hash.into(),
        }),
    )
}

fn issued(identity: &str, id: u128, hash: &str) -> Event {
    ev(
        "t",
        EventBody::TokenIssued(TokenIssued {
            identity: identity.into(),
            token_id: Uuid::from_u128(id),
            token_hash: hash.into(),
            scopes: [Scope::Send].into_iter().collect(),
            expires_at: None,
            label: Some("ci".into()),
        }),
    )
}

#[test]
fn rotation_replaces_the_hash_and_tenants_stay_apart() {
    let r = AgentRegistry::default();
    r.apply(1, &reg("t1", "alice", "h1"));
    r.apply(2, &reg("t2", "alice", "h2"));
    assert_eq!(r.lookup("h1"), Some(("t1".into(), "alice".into())));
    let rot = ev("t1", EventBody::TokenRotated(TokenRotated { identity: "alice".into(), token_hash: "h3".into() }));
    r.apply(3, &rot);
    r.apply(3, &rot);
    assert_eq!(r.lookup("h1"), None);
    assert!(r.is_retired("h1"));
    assert_eq!(r.lookup("h3"), Some(("t1".into(), "alice".into())));
    assert_eq!(r.lookup("h2"), Some(("t2".into(), "alice".into())));
    assert_eq!(r.roster("t1").len(), 1);
}

#[test]
fn a_removal_applied_first_is_not_undone_by_the_tail_replaying_older_events() {
    let r = AgentRegistry::default();
    let removed = ev("t", EventBody::AgentRemoved(AgentRemoved { identity: "bob".into() }));
    // The writer applies the registration and the removal; then the tail replays both.
    r.apply(1, &reg("t", "bob", "h1"));
    r.apply(2, &removed);
    r.apply(1, &reg("t", "bob", "h1"));
    r.apply(2, &removed);
    assert_eq!(r.lookup("h1"), None);
    assert!(!r.is_registered("t", "bob"));
    // Registered again: a new token, the old one still refused.
    r.apply(3, &reg("t", "bob", "h2"));
    assert_eq!(r.lookup("h2"), Some(("t".into(), "bob".into())));
    assert_eq!(r.lookup("h1"), None);
}

#[test]
fn issued_tokens_carry_their_scopes_survive_rotation_and_die_with_revocation_or_removal() {
    let r = AgentRegistry::default();
    r.apply(1, &reg("t", "bob", "h1"));
    r.apply(2, &issued("bob", 7, "x7"));
    r.apply(3, &issued("bob", 8, "x8"));
    match r.credential("x7") {
        Some(Credential::Agent { token_id, scopes, .. }) => {
            assert_eq!(token_id, Some(Uuid::from_u128(7)));
            assert_eq!(scopes.names(), vec!["send"]);
        }
        other => panic!("{other:?}"),
    }
    r.apply(4, &ev("t", EventBody::TokenRotated(TokenRotated { identity: "bob".into(), token_hash: "h2".into() })));
    assert!(r.credential("x7").is_some(), "a rotation replaces only the registration token");
    let revoke =
        ev("t", EventBody::TokenRevoked(TokenRevoked { identity: "bob".into(), token_id: Uuid::from_u128(7) }));
    r.apply(5, &revoke);
    r.apply(2, &issued("bob", 7, "x7")); // the tail replaying the issue changes nothing
    assert!(r.credential("x7").is_none() && r.is_retired("x7"));
    assert_eq!(r.get("t", "bob").unwrap().tokens.len(), 1);
    r.apply(6, &ev("t", EventBody::AgentRemoved(AgentRemoved { identity: "bob".into() })));
    assert!(r.credential("x8").is_none() && r.is_retired("x8"));
}

#[test]
fn tenant_admin_tokens_are_listed_per_tenant_and_a_revocation_is_not_undone() {
    let r = AgentRegistry::default();
    let id = Uuid::from_u128(1);
    let issue = ev(
        "acme",
        EventBody::AdminTokenIssued(AdminTokenIssued { token_id: id, token_hash: "a1".into(), label: None }),
    );
    r.apply(10, &issue);
    assert_eq!(r.credential("a1"), Some(Credential::TenantAdmin { tenant: "acme".into(), token_id: id }));
    assert_eq!(r.lookup("a1"), None, "an admin token is nobody's agent token");
    assert_eq!(r.admin_tokens(Some("acme")).len(), 1);
    assert!(r.admin_tokens(Some("other")).is_empty());
    r.apply(11, &ev("acme", EventBody::AdminTokenRevoked(AdminTokenRevoked { token_id: id })));
    r.apply(10, &issue);
    assert!(r.credential("a1").is_none() && r.admin_tokens(None).is_empty());
}
