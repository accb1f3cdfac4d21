//! Scenarios S36–S40 of clients/SCENARIOS.md (least-privilege tokens, CONTRACT §17): a token
//! with only send and read, revoking a token, a tenant admin, an expiring token and a JWT bearer,
//! each against its own real `signalbus serve`.
//!
//! Deliberately through the public API only: the agent's `Client` is handed the issued token (or
//! the JWT) as it would be any token, and must connect and send without assuming `receive`.

mod support;

use std::time::{Duration, Instant};

use chrono::Utc;
use serde_json::json;
use signalbus_client::{
    AdminClient, Client, DirectiveRequest, Error, Scope, SendRequest, TokenRequest, REGISTRATION_TOKEN_ID,
};
use support::{Bus, ADMIN_TOKEN};

const WAIT: Duration = Duration::from_secs(5);

/// The scope a call's 403 `forbidden` names (panics on any other outcome).
fn lacks<T: std::fmt::Debug>(r: signalbus_client::Result<T>) -> String {
    match r {
        Err(e @ Error::Forbidden { .. }) => {
            assert_eq!((e.status(), e.code()), (Some(403), "forbidden"), "{e}");
            e.scope().unwrap_or("(none)").to_string()
        }
        other => panic!("expected forbidden, got {other:?}"),
    }
}

fn forbidden<T: std::fmt::Debug>(r: signalbus_client::Result<T>) {
    assert!(matches!(&r, Err(Error::Forbidden { .. })), "expected forbidden, got {r:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s36_a_token_with_only_send_and_read() {
    let bus = Bus::start_new().await;
    let admin = bus.admin();
    admin.register("alice", None, Some("daemon")).await.unwrap();
    let bt = bus.token("bob").await;
    let req = TokenRequest::scopes([Scope::Read, Scope::Send]).label("ci");
    let issued = admin.issue_token("alice", &req, None).await.unwrap();
    assert!(issued.token.starts_with("sb_") && issued.token.len() == 67, "sb_ + 64 hex");
    assert_eq!(
        (issued.scopes.as_slice(), issued.expires_at, issued.label.as_deref()),
        (&[Scope::Send, Scope::Read][..], None, Some("ci"))
    );
    let every = admin.issue_token("alice", &TokenRequest::default(), None).await.unwrap();
    assert_eq!(every.scopes, Scope::ALL, "scopes omitted = every scope");
    let listed = admin.tokens("alice", None).await.unwrap();
    let ids: Vec<&str> = listed.iter().map(|t| t.token_id.as_str()).collect();
    assert_eq!(ids, vec![REGISTRATION_TOKEN_ID, issued.token_id.as_str(), every.token_id.as_str()]);
    assert!(listed[0].is_registration() && listed[0].scopes == Scope::ALL && listed[0].expires_at.is_none());
    assert_eq!((listed[1].label.as_deref(), listed[1].expired), (Some("ci"), false));
    assert!(listed[1].issued_at.is_some());
    let none = admin.issue_token("alice", &TokenRequest::scopes([]), None).await;
    assert!(matches!(none, Err(Error::InvalidRequest(_))), "{none:?}");
    let nobody = admin.issue_token("nobody", &TokenRequest::default(), None).await;
    assert!(matches!(nobody, Err(Error::NotFound(_))), "{nobody:?}");

    let bob = bus.connected(&bt).await;
    // A token without `receive` opens a session (the client never assumes it is pushed to)...
    let alice = Client::new(&bus.url, &issued.token).unwrap();
    assert_eq!(alice.connect().await.unwrap().identity, "alice");
    let out = alice.send(SendRequest::new("bob", "Question").payload(json!({"q": "ship it?"}))).await.unwrap();
    let sent = out.sent().expect("sent, not spooled").clone();
    assert!(sent.delivered, "{sent:?}");
    let got = bob.receive(WAIT).await.unwrap();
    assert_eq!((got.from.as_str(), &got.payload), ("alice", &json!({"q": "ship it?"})));
    // ...and everything outside send and read is 403 naming the scope it lacks.
    let inbox = alice.inbox(None).await;
    assert!(matches!(&inbox, Err(e) if e.to_string().contains("\"receive\"")), "{inbox:?}");
    assert_eq!(lacks(inbox), "receive");
    assert_eq!(lacks(alice.drain(None).await), "receive");
    assert_eq!(lacks(alice.recall(&sent.signal_id).await), "recall"); // over the session
    assert_eq!(lacks(alice.record_fact("alice", "seen", json!({})).await), "facts");
    assert_eq!(lacks(alice.create_directive(DirectiveRequest::new("bob", "package.install")).await), "directives");
    // `read` is held; and the session is not a presence session: alice is not available.
    let roster = alice.agents().await.unwrap();
    let me = roster.iter().find(|a| a.identity == "alice").expect("alice listed");
    assert_eq!(me.state, "not_available_offline", "{me:?}");
    let bounced = bob.send(SendRequest::new("alice", "Question")).await;
    assert!(matches!(bounced, Err(Error::RecipientUnavailable { .. })), "{bounced:?}");
    alice.close().await;
    bob.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s37_revoking_a_token_closes_its_session() {
    let bus = Bus::start_new().await;
    let admin = bus.admin();
    let registration = bus.token("carol").await;
    let issued = admin.issue_token("carol", &TokenRequest::default().label("laptop"), None).await.unwrap();
    let carol = Client::builder(&bus.url, &issued.token)
        .reconnect(Duration::from_millis(200), Duration::from_millis(500))
        .build()
        .unwrap();
    carol.connect().await.unwrap();
    let started = Instant::now();
    admin.revoke_token("carol", &issued.token_id, None).await.unwrap();
    carol.wait_disconnected(WAIT).await.unwrap();
    assert!(started.elapsed() < Duration::from_millis(1500), "closed at once (every gateway within 1 s)");
    let closed = carol.wait_connected(WAIT).await; // 1008 is fatal: the client does not reconnect
    assert!(matches!(&closed, Err(Error::Unauthorized(e)) if e.message.contains("token revoked")), "{closed:?}");
    carol.close().await;
    let again = Client::new(&bus.url, &issued.token).unwrap().agents().await;
    assert!(matches!(&again, Err(e @ Error::Unauthorized(_)) if e.status() == Some(401)), "{again:?}");
    admin.revoke_token("carol", &issued.token_id, None).await.unwrap(); // again: the same answer
    let ids: Vec<String> = admin.tokens("carol", None).await.unwrap().into_iter().map(|t| t.token_id).collect();
    assert_eq!(ids, vec![REGISTRATION_TOKEN_ID], "revoked ones are not listed");
    let registration_revoked = admin.revoke_token("carol", REGISTRATION_TOKEN_ID, None).await;
    assert!(matches!(registration_revoked, Err(Error::InvalidRequest(_))), "rotate replaces it");
    let unknown = admin.revoke_token("carol", &uuid::Uuid::new_v4().to_string(), None).await;
    assert!(matches!(unknown, Err(Error::NotFound(_))), "{unknown:?}");
    let still = bus.connected(&registration).await; // the agent's other tokens keep working
    still.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s38_a_tenant_admin_manages_its_own_tenant_only() {
    let bus = Bus::start_new().await;
    let admin = bus.admin();
    admin.register("alice", None, None).await.unwrap();
    let acme = admin.create_admin_token("acme", Some("acme ops")).await.unwrap();
    assert_eq!((acme.tenant.as_str(), acme.label.as_deref()), ("acme", Some("acme ops")));
    assert!(acme.token.starts_with("sb_") && !format!("{acme:?}").contains(&acme.token));
    let ops = AdminClient::new(&bus.url, &acme.token).unwrap();
    let robot = ops.register("robot", Some("acme"), Some("daemon")).await.unwrap();
    assert_eq!(robot.tenant, "acme");
    let roster: Vec<String> = ops.agents(Some("acme")).await.unwrap().into_iter().map(|a| a.identity).collect();
    assert_eq!(roster, vec!["robot"]);
    let scoped = ops.issue_token("robot", &TokenRequest::scopes([Scope::Send]), Some("acme")).await.unwrap();
    assert_eq!(scoped.scopes, vec![Scope::Send]);
    let ids: Vec<String> = ops.tokens("robot", Some("acme")).await.unwrap().into_iter().map(|t| t.token_id).collect();
    assert_eq!(ids, vec![REGISTRATION_TOKEN_ID.to_string(), scoped.token_id]);
    let mine: Vec<String> = ops.admin_tokens(Some("acme")).await.unwrap().into_iter().map(|t| t.token_id).collect();
    assert_eq!(mine, vec![acme.token_id.clone()]);
    forbidden(ops.register("intruder", Some("default"), None).await);
    forbidden(ops.agents(Some("default")).await);
    forbidden(ops.issue_token("alice", &TokenRequest::default(), Some("default")).await);
    forbidden(ops.remove("alice", Some("default")).await);
    forbidden(ops.admin_tokens(Some("default")).await);
    forbidden(ops.rebuild().await); // global admin only
    forbidden(ops.create_admin_token("acme", None).await);
    forbidden(ops.revoke_admin_token(&acme.token_id).await);
    let default: Vec<String> = admin.agents(None).await.unwrap().into_iter().map(|a| a.identity).collect();
    assert_eq!(default, vec!["alice"], "nothing reached tenant default");
    let listed = admin.admin_tokens(None).await.unwrap();
    let entry = listed.iter().find(|t| t.token_id == acme.token_id).expect("listed");
    assert_eq!((entry.tenant.as_str(), entry.label.as_deref()), ("acme", Some("acme ops")));
    assert!(entry.issued_at.is_some());
    admin.revoke_admin_token(&acme.token_id).await.unwrap();
    assert!(matches!(ops.agents(Some("acme")).await, Err(Error::Unauthorized(_))));
    let unknown = admin.revoke_admin_token(&uuid::Uuid::new_v4().to_string()).await;
    assert!(matches!(unknown, Err(Error::NotFound(_))), "{unknown:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s39_an_expiring_token_stops_at_its_expiry() {
    let bus = Bus::start_new().await;
    let admin = bus.admin();
    admin.register("dave", None, None).await.unwrap();
    let before = Utc::now();
    let req = TokenRequest::default().expires_in(Duration::from_secs(2));
    let issued = admin.issue_token("dave", &req, None).await.unwrap();
    let expires_at = issued.expires_at.expect("an expiry");
    let span = (expires_at - before).num_milliseconds();
    assert!((1000..=4000).contains(&span), "{expires_at} is {span} ms after {before}");
    let dave = Client::builder(&bus.url, &issued.token)
        .reconnect(Duration::from_millis(200), Duration::from_millis(500))
        .build()
        .unwrap();
    dave.connect().await.unwrap();
    assert_eq!(dave.agents().await.unwrap().len(), 1, "it works until then");
    dave.wait_disconnected(Duration::from_secs(8)).await.unwrap(); // at expiry the bus closes it
    assert!(Utc::now() >= expires_at - chrono::Duration::milliseconds(500));
    let closed = dave.wait_connected(WAIT).await;
    assert!(matches!(&closed, Err(Error::Unauthorized(e)) if e.message.contains("token expired")), "{closed:?}");
    dave.close().await;
    let late = Client::new(&bus.url, &issued.token).unwrap().agents().await;
    match late {
        Err(Error::Unauthorized(e)) => assert_eq!((e.status, e.message.as_str()), (Some(401), "token expired")),
        other => panic!("expected unauthorized, got {other:?}"),
    }
    let listed = admin.tokens("dave", None).await.unwrap();
    assert!(listed.iter().any(|t| t.token_id == issued.token_id && t.expired), "listed until revoked: {listed:?}");
    let zero = admin.issue_token("dave", &TokenRequest::default().expires_in(Duration::ZERO), None).await;
    assert!(matches!(zero, Err(Error::Usage(_))), "{zero:?}");
}

const JWT_SECRET: &str = "sbtest-jwt-secret-0123456789abcdef";

fn b64url(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let n = chunk.iter().enumerate().fold(0u32, |n, (i, b)| n | (u32::from(*b) << (16 - 8 * i)));
        for i in 0..=chunk.len() {
            out.push(ALPHABET[((n >> (18 - 6 * i)) & 63) as usize] as char);
        }
    }
    out
}

fn hmac_sha256(key: &[u8], message: &[u8]) -> Vec<u8> {
    use sha2::{Digest, Sha256};
    let mut block = [0u8; 64];
    if key.len() > 64 {
        block[..32].copy_from_slice(&Sha256::digest(key));
    } else {
        block[..key.len()].copy_from_slice(key);
    }
    let inner = Sha256::new().chain_update(block.map(|b| b ^ 0x36)).chain_update(message).finalize();
    Sha256::new().chain_update(block.map(|b| b ^ 0x5c)).chain_update(inner).finalize().to_vec()
}

/// A JWT signed with HS256, as an identity provider would issue it.
fn hs256(claims: serde_json::Value, secret: &str) -> String {
    let head = format!("{}.{}", b64url(br#"{"alg":"HS256","typ":"JWT"}"#), b64url(claims.to_string().as_bytes()));
    let mac = hmac_sha256(secret.as_bytes(), head.as_bytes());
    format!("{head}.{}", b64url(&mac))
}

#[test]
fn hs256_signs_as_rfc_4231_says() {
    // RFC 4231, test case 2.
    let mac = hmac_sha256(b"Jefe", b"what do ya want for nothing?");
    let hex: String = mac.iter().map(|b| format!("{b:02x}")).collect();
    assert_eq!(hex, "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
    assert_eq!(b64url(b"any carnal pleas"), "YW55IGNhcm5hbCBwbGVhcw");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s40_a_jwt_bearer_passes_through_unchanged() {
    let bus = Bus::start_configured(Some(&format!("[auth]\njwt_hs256_secret = \"{JWT_SECRET}\"\n"))).await;
    let admin = AdminClient::new(&bus.url, ADMIN_TOKEN).unwrap();
    admin.register("erin", None, None).await.unwrap();
    let bt = bus.token("bob").await;
    let now = Utc::now().timestamp();
    let jwt = hs256(json!({"sub": "erin", "tenant": "default", "scope": "send read", "exp": now + 120}), JWT_SECRET);
    let bob = bus.connected(&bt).await;
    let erin = Client::new(&bus.url, &jwt).unwrap();
    assert_eq!(erin.connect().await.unwrap().identity, "erin");
    let out = erin.send(SendRequest::new("bob", "StatusUpdate").payload(json!({"via": "jwt"}))).await.unwrap();
    assert!(out.sent().is_some_and(|s| s.delivered), "{out:?}");
    assert_eq!(bob.receive(WAIT).await.unwrap().from, "erin");
    assert_eq!(lacks(erin.inbox(None).await), "receive", "the scope claim limits it");
    erin.close().await;
    bob.close().await;
    let refused = [
        hs256(json!({"sub": "erin", "tenant": "default", "exp": now + 120}), "another-secret"),
        hs256(json!({"sub": "erin", "tenant": "default", "exp": now - 3600}), JWT_SECRET),
        hs256(json!({"sub": "nobody", "tenant": "default", "exp": now + 120}), JWT_SECRET),
    ];
    for token in refused {
        let c = Client::new(&bus.url, &token).unwrap();
        let connected = c.connect().await;
        assert!(matches!(connected, Err(Error::Unauthorized(_))), "{connected:?}");
        assert!(matches!(c.agents().await, Err(Error::Unauthorized(_))));
        c.close().await;
    }
}
