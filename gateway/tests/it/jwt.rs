//! JWT bearers (CONTRACT §17) end to end: HS256 and RS256 from a JWKS file with keys generated
//! here, accepted as tokens of the registered agent they name with the scopes they carry; every
//! other JWT (another tenant, an unregistered identity, a bad signature, `alg: none`, past its
//! `exp`) is 401, and a session opened with one closes at its `exp`.

use std::sync::Arc;
use std::time::Duration;

use base64::Engine;
use gateway::jwt::{JwtSettings, JwtVerifier};
use jsonwebtoken::jwk::{Jwk, JwkSet};
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use serde_json::{json, Value};

use crate::support::Bus;

const SECRET: &str = "an-hs256-secret-of-at-least-32-bytes!";

fn claims(sub: &str, tenant: &str, scope: Option<&str>, exp_in: i64) -> Value {
    let mut c = json!({"sub": sub, "tenant": tenant, "exp": chrono::Utc::now().timestamp() + exp_in});
    if let Some(s) = scope {
        c["scope"] = json!(s);
    }
    c
}

fn hs256(c: &Value, secret: &str) -> String {
    jsonwebtoken::encode(&Header::new(Algorithm::HS256), c, &EncodingKey::from_secret(secret.as_bytes())).unwrap()
}

fn rsa_key() -> EncodingKey {
    use rsa::pkcs1::EncodeRsaPrivateKey;
    let key = rsa::RsaPrivateKey::new(&mut rand::thread_rng(), 2048).unwrap();
    EncodingKey::from_rsa_der(key.to_pkcs1_der().unwrap().as_bytes())
}

async fn status(bus: &Bus, token: &str, path: &str) -> (u16, Value) {
    bus.call("GET", Some(token), path, None).await
}

#[tokio::test]
async fn jwts_of_the_identity_provider_are_tokens_of_registered_agents_and_nothing_else() {
    let dir = tempfile::tempdir().unwrap();
    let rsa = rsa_key();
    let mut jwk = Jwk::from_encoding_key(&rsa, Algorithm::RS256).unwrap();
    jwk.common.key_id = Some("k1".into());
    let jwks = dir.path().join("jwks.json");
    std::fs::write(&jwks, serde_json::to_string(&JwkSet { keys: vec![jwk] }).unwrap()).unwrap();
    let settings = JwtSettings { hs256_secret: Some(SECRET.into()), jwks_file: Some(jwks), ..Default::default() };
    let verifier = Arc::new(JwtVerifier::new(settings).unwrap());
    let bus = Bus::with(|c| c.jwt = Some(verifier)).await;
    bus.register("alice").await;
    bus.register("bob").await;

    let ok = hs256(&claims("alice", "default", None, 3600), SECRET);
    assert_eq!(status(&bus, &ok, "/v1/agents").await.0, 200);
    let mut rs_header = Header::new(Algorithm::RS256);
    rs_header.kid = Some("k1".into());
    let rs = jsonwebtoken::encode(&rs_header, &claims("alice", "default", Some("send read"), 3600), &rsa).unwrap();
    assert_eq!(status(&bus, &rs, "/v1/agents").await.0, 200);
    let (s, v) = bus.send(&rs, json!({"to": "bob", "type": "StatusUpdate"})).await;
    assert_eq!(s, 200, "{v}");
    assert_eq!(v["from"].as_str().or(Some("alice")), Some("alice"));

    // The scope claim holds: a send-only JWT cannot read.
    let send_only = hs256(&claims("alice", "default", Some("openid send"), 3600), SECRET);
    let (s, v) = status(&bus, &send_only, "/v1/agents").await;
    assert_eq!((s, v["error"]["scope"].as_str()), (403, Some("read")), "{v}");

    let none = {
        let b64 = |v: Value| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(v.to_string());
        format!("{}.{}.", b64(json!({"alg": "none", "typ": "JWT"})), b64(claims("alice", "default", None, 3600)))
    };
    for (what, token, message) in [
        ("another tenant", hs256(&claims("alice", "acme", None, 3600), SECRET), "the token is not valid"),
        (
            "an unregistered identity",
            hs256(&claims("mallory", "default", None, 3600), SECRET),
            "the token is not valid",
        ),
        (
            "a bad signature",
            hs256(&claims("alice", "default", None, 3600), "another-secret-of-at-least-32-bytes!!"),
            "the token is not valid",
        ),
        ("alg none", none, "the token is not valid"),
        ("a past exp", hs256(&claims("alice", "default", None, -600), SECRET), "token expired"),
    ] {
        let (s, v) = status(&bus, &token, "/v1/agents").await;
        assert_eq!((s, v["error"]["message"].as_str()), (401, Some(message)), "{what}: {v}");
    }

    // A session opened with a JWT closes at its exp (the leeway applies to accepting it only).
    let short = hs256(&claims("alice", "default", None, 2), SECRET);
    let mut ws = bus.connect(&short).await;
    assert_eq!(ws.closed_code(Duration::from_secs(6)).await, Some(1008));
}
