//! `jwt`'s tests: which tokens are accepted and why the others are refused, with keys generated
//! here (HS256 secrets, RSA 2048 and P-256 key pairs) and JWKS files in temporary directories.
//!
//! Deliberately signs with `jsonwebtoken` itself: the verifier's own crypto is not under test,
//! only which keys and algorithms it lets through.

use std::path::PathBuf;
use std::sync::OnceLock;
use std::time::Duration;

use jsonwebtoken::jwk::{Jwk, JwkSet};
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use serde_json::{json, Value};

use super::*;

const SECRET: &str = "an-hs256-secret-of-at-least-32-bytes!";

fn now() -> i64 {
    chrono::Utc::now().timestamp()
}

/// Claims valid for an hour, with `extra` merged over them (`null` removes a claim).
fn claims_with(extra: Value) -> Value {
    let mut c = json!({"sub": "alice", "tenant": "acme", "scope": "send read", "exp": now() + 3600});
    for (k, v) in extra.as_object().unwrap() {
        if v.is_null() {
            c.as_object_mut().unwrap().remove(k);
        } else {
            c[k] = v.clone();
        }
    }
    c
}

fn sign(alg: Algorithm, kid: Option<&str>, claims: &Value, key: &EncodingKey) -> String {
    let mut header = Header::new(alg);
    header.kid = kid.map(str::to_string);
    jsonwebtoken::encode(&header, claims, key).unwrap()
}

fn hs256(claims: &Value) -> String {
    sign(Algorithm::HS256, None, claims, &EncodingKey::from_secret(SECRET.as_bytes()))
}

/// Two RSA 2048 private keys (PKCS#1 DER), generated once for the whole test binary.
fn rsa_der(i: usize) -> EncodingKey {
    static KEYS: OnceLock<Vec<Vec<u8>>> = OnceLock::new();
    let keys = KEYS.get_or_init(|| {
        use rsa::pkcs1::EncodeRsaPrivateKey;
        (0..2)
            .map(|_| {
                let key = rsa::RsaPrivateKey::new(&mut rand::thread_rng(), 2048).unwrap();
                key.to_pkcs1_der().unwrap().as_bytes().to_vec()
            })
            .collect()
    });
    EncodingKey::from_rsa_der(&keys[i])
}

fn p256_key() -> EncodingKey {
    use p256::pkcs8::EncodePrivateKey;
    let key = p256::ecdsa::SigningKey::random(&mut rand::rngs::OsRng);
    EncodingKey::from_ec_der(key.to_pkcs8_der().unwrap().as_bytes())
}

/// The public JWK of `key`, named `kid`.
fn jwk(key: &EncodingKey, alg: Algorithm, kid: Option<&str>) -> Jwk {
    let mut jwk = Jwk::from_encoding_key(key, alg).unwrap();
    jwk.common.key_id = kid.map(str::to_string);
    jwk
}

fn write_jwks(dir: &tempfile::TempDir, keys: Vec<Jwk>) -> PathBuf {
    let path = dir.path().join("jwks.json");
    std::fs::write(&path, serde_json::to_string(&JwkSet { keys }).unwrap()).unwrap();
    path
}

fn hs256_verifier() -> JwtVerifier {
    JwtVerifier::new(JwtSettings { hs256_secret: Some(SECRET.into()), ..Default::default() }).unwrap()
}

fn jwks_verifier(path: PathBuf) -> JwtVerifier {
    JwtVerifier::new(JwtSettings { jwks_file: Some(path), ..Default::default() }).unwrap()
}

fn invalid(r: Result<JwtClaims, JwtRejection>) -> String {
    match r {
        Err(JwtRejection::Invalid(m)) => m,
        other => panic!("expected Invalid, got {other:?}"),
    }
}

#[test]
fn given_an_hs256_secret_when_a_token_signed_with_it_is_verified_then_its_claims_are_returned() {
    let exp = now() + 3600;
    let claims = hs256_verifier().verify(&hs256(&claims_with(json!({"exp": exp})))).unwrap();
    assert_eq!(claims, JwtClaims { sub: "alice".into(), tenant: "acme".into(), scope: Some("send read".into()), exp });
    let no_scope = hs256_verifier().verify(&hs256(&claims_with(json!({"scope": null})))).unwrap();
    assert_eq!(no_scope.scope, None, "no scope claim: every scope, the caller decides");
}

#[test]
fn given_a_jwks_file_with_an_rsa_key_when_an_rs256_token_is_verified_then_it_is_accepted_with_or_without_kid() {
    let dir = tempfile::tempdir().unwrap();
    let path = write_jwks(&dir, vec![jwk(&rsa_der(0), Algorithm::RS256, Some("k0"))]);
    let v = jwks_verifier(path);
    let c = claims_with(json!({}));
    assert_eq!(v.verify(&sign(Algorithm::RS256, Some("k0"), &c, &rsa_der(0))).unwrap().sub, "alice");
    assert_eq!(v.verify(&sign(Algorithm::RS256, None, &c, &rsa_der(0))).unwrap().tenant, "acme");
}

#[test]
fn given_two_rsa_keys_when_the_header_names_a_kid_then_that_key_is_used_and_an_unknown_kid_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = write_jwks(
        &dir,
        vec![jwk(&rsa_der(0), Algorithm::RS256, Some("k0")), jwk(&rsa_der(1), Algorithm::RS256, Some("k1"))],
    );
    let v = jwks_verifier(path);
    let c = claims_with(json!({}));
    assert!(v.verify(&sign(Algorithm::RS256, Some("k1"), &c, &rsa_der(1))).is_ok());
    assert!(v.verify(&sign(Algorithm::RS256, None, &c, &rsa_der(1))).is_ok(), "no kid: every RS256 key is tried");
    assert_eq!(invalid(v.verify(&sign(Algorithm::RS256, Some("k0"), &c, &rsa_der(1)))), "bad signature");
    assert_eq!(invalid(v.verify(&sign(Algorithm::RS256, Some("k9"), &c, &rsa_der(1)))), "unknown key id");
}

#[test]
fn given_a_jwks_file_with_a_p256_key_when_an_es256_token_is_verified_then_it_is_accepted() {
    let dir = tempfile::tempdir().unwrap();
    let key = p256_key();
    let v = jwks_verifier(write_jwks(&dir, vec![jwk(&key, Algorithm::ES256, Some("ec"))]));
    let c = claims_with(json!({}));
    assert_eq!(v.verify(&sign(Algorithm::ES256, Some("ec"), &c, &key)).unwrap().sub, "alice");
    assert_eq!(invalid(v.verify(&sign(Algorithm::ES256, None, &c, &p256_key()))), "bad signature");
    assert_eq!(invalid(v.verify(&sign(Algorithm::RS256, None, &c, &rsa_der(0)))), "no key for the algorithm");
}

#[test]
fn given_an_unsigned_alg_none_token_when_verified_then_it_is_invalid() {
    use base64::Engine;
    let b64 = |v: &Value| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(v.to_string());
    let payload = b64(&claims_with(json!({})));
    let v = hs256_verifier();
    for alg in ["none", "None", "NONE"] {
        let header = b64(&json!({"alg": alg, "typ": "JWT"}));
        let unsigned = format!("{header}.{payload}.");
        assert!(JwtVerifier::looks_like_jwt(&unsigned), "an unsigned token is still refused as a JWT");
        assert!(matches!(v.verify(&unsigned), Err(JwtRejection::Invalid(_))), "{alg}");
        // The signature of a real token pasted on does not help.
        let signed = hs256(&claims_with(json!({})));
        let sig = signed.rsplit('.').next().unwrap();
        assert!(matches!(v.verify(&format!("{header}.{payload}.{sig}")), Err(JwtRejection::Invalid(_))));
    }
}

#[test]
fn given_a_token_with_a_tampered_payload_or_another_secret_when_verified_then_it_is_a_bad_signature() {
    let v = hs256_verifier();
    let token = hs256(&claims_with(json!({})));
    let forged = claims_with(json!({"sub": "mallory"}));
    let other =
        sign(Algorithm::HS256, None, &forged, &EncodingKey::from_secret(b"another-secret-of-32-bytes-or-more!!"));
    assert_eq!(invalid(v.verify(&other)), "bad signature");
    let (head, rest) = token.split_once('.').unwrap();
    let sig = rest.split_once('.').unwrap().1;
    let forged_payload = other.split('.').nth(1).unwrap();
    assert_eq!(invalid(v.verify(&format!("{head}.{forged_payload}.{sig}"))), "bad signature");
}

#[test]
fn given_a_jwks_only_verifier_when_an_hs256_token_arrives_then_it_is_refused_as_algorithm_confusion() {
    let dir = tempfile::tempdir().unwrap();
    let path = write_jwks(&dir, vec![jwk(&rsa_der(0), Algorithm::RS256, None)]);
    let public = std::fs::read(&path).unwrap();
    let v = jwks_verifier(path);
    // Signed with the public key file itself as the HMAC secret: the classic confusion.
    let token = sign(Algorithm::HS256, None, &claims_with(json!({})), &EncodingKey::from_secret(&public));
    assert_eq!(invalid(v.verify(&token)), "algorithm HS256 is not accepted");
    let hs512 = sign(Algorithm::HS512, None, &claims_with(json!({})), &EncodingKey::from_secret(SECRET.as_bytes()));
    assert_eq!(invalid(hs256_verifier().verify(&hs512)), "algorithm is not accepted");
}

#[test]
fn given_missing_claims_when_verified_then_each_is_invalid_naming_the_claim() {
    let v = hs256_verifier();
    for claim in ["exp", "sub", "tenant"] {
        let m = invalid(v.verify(&hs256(&claims_with(json!({claim: null})))));
        assert_eq!(m, format!("missing claim {claim}"));
    }
    assert_eq!(invalid(v.verify(&hs256(&claims_with(json!({"tenant": 7}))))), "malformed claim tenant");
    assert_eq!(invalid(v.verify(&hs256(&claims_with(json!({"sub": ""}))))), "missing claim sub");
}

#[test]
fn given_an_expired_token_when_verified_then_it_is_expired() {
    let r = hs256_verifier().verify(&hs256(&claims_with(json!({"exp": now() - 3600}))));
    assert!(matches!(r, Err(JwtRejection::Expired)), "{r:?}");
    assert_eq!(JwtRejection::Expired.to_string(), "token expired");
}

#[test]
fn given_an_nbf_in_the_future_when_verified_then_it_is_not_yet_valid() {
    let r = hs256_verifier().verify(&hs256(&claims_with(json!({"nbf": now() + 600}))));
    assert!(matches!(r, Err(JwtRejection::NotYetValid)), "{r:?}");
    assert!(hs256_verifier().verify(&hs256(&claims_with(json!({"nbf": now() - 10})))).is_ok());
}

#[test]
fn given_a_leeway_when_exp_or_nbf_are_within_it_then_the_token_is_accepted_and_past_it_refused() {
    let with_leeway = |secs| {
        let settings =
            JwtSettings { hs256_secret: Some(SECRET.into()), leeway: Duration::from_secs(secs), ..Default::default() };
        JwtVerifier::new(settings).unwrap()
    };
    let just_expired = hs256(&claims_with(json!({"exp": now() - 20})));
    let nearly_valid = hs256(&claims_with(json!({"nbf": now() + 20})));
    let default = hs256_verifier();
    assert!(default.verify(&just_expired).is_ok(), "within the default 60 s");
    assert!(default.verify(&nearly_valid).is_ok(), "within the default 60 s");
    assert!(matches!(with_leeway(5).verify(&just_expired), Err(JwtRejection::Expired)));
    assert!(matches!(with_leeway(5).verify(&nearly_valid), Err(JwtRejection::NotYetValid)));
    let too_long =
        JwtSettings { hs256_secret: Some(SECRET.into()), leeway: Duration::from_secs(86_400), ..Default::default() };
    assert!(matches!(JwtVerifier::new(too_long), Err(JwtError::LeewayTooLarge)));
}

#[test]
fn given_an_issuer_and_audience_when_configured_then_they_must_match_and_otherwise_are_ignored() {
    let settings = JwtSettings {
        hs256_secret: Some(SECRET.into()),
        issuer: Some("https://idp.example".into()),
        audience: Some("signalbus".into()),
        ..Default::default()
    };
    let v = JwtVerifier::new(settings).unwrap();
    let good = json!({"iss": "https://idp.example", "aud": "signalbus"});
    assert!(v.verify(&hs256(&claims_with(good))).is_ok());
    assert!(v.verify(&hs256(&claims_with(json!({"iss": "https://idp.example", "aud": ["x", "signalbus"]})))).is_ok());
    let wrong_aud = json!({"iss": "https://idp.example", "aud": "someone-else"});
    assert_eq!(invalid(v.verify(&hs256(&claims_with(wrong_aud)))), "wrong audience");
    let wrong_iss = json!({"iss": "https://evil.example", "aud": "signalbus"});
    assert_eq!(invalid(v.verify(&hs256(&claims_with(wrong_iss)))), "wrong issuer");
    assert_eq!(invalid(v.verify(&hs256(&claims_with(json!({"aud": "signalbus"}))))), "missing claim iss");
    assert_eq!(invalid(v.verify(&hs256(&claims_with(json!({"iss": "https://idp.example"}))))), "missing claim aud");
    // Not configured: whatever `iss` and `aud` say.
    let any = json!({"iss": "https://anyone.example", "aud": "anything"});
    assert!(hs256_verifier().verify(&hs256(&claims_with(any))).is_ok());
}

#[test]
fn given_a_jwks_file_when_reloaded_then_a_new_key_is_picked_up_and_a_broken_file_keeps_the_old_keys() {
    let dir = tempfile::tempdir().unwrap();
    let path = write_jwks(&dir, vec![jwk(&rsa_der(0), Algorithm::RS256, Some("old"))]);
    let v = jwks_verifier(path.clone());
    let c = claims_with(json!({}));
    let old = sign(Algorithm::RS256, Some("old"), &c, &rsa_der(0));
    let new = sign(Algorithm::RS256, Some("new"), &c, &rsa_der(1));
    assert!(v.verify(&old).is_ok());
    assert_eq!(invalid(v.verify(&new)), "unknown key id");

    write_jwks(
        &dir,
        vec![jwk(&rsa_der(0), Algorithm::RS256, Some("old")), jwk(&rsa_der(1), Algorithm::RS256, Some("new"))],
    );
    assert_eq!(v.reload().unwrap(), 2);
    assert!(v.verify(&new).is_ok() && v.verify(&old).is_ok());

    std::fs::write(&path, "{\"keys\": [").unwrap();
    assert!(matches!(v.reload(), Err(JwtError::ParseJwks { .. })));
    assert!(v.verify(&new).is_ok(), "a broken file keeps the old keys");
    std::fs::remove_file(&path).unwrap();
    assert!(matches!(v.reload(), Err(JwtError::ReadJwks { .. })));
    assert!(v.verify(&old).is_ok());
    assert_eq!(hs256_verifier().reload().unwrap(), 0, "no JWKS file: nothing to reload");
}

#[test]
fn given_bad_settings_when_the_verifier_is_built_then_each_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let err = |s: JwtSettings| JwtVerifier::new(s).unwrap_err().to_string();
    assert_eq!(err(JwtSettings::default()), "jwt needs jwt_hs256_secret or jwt_jwks_file");
    let short = JwtSettings { hs256_secret: Some("short".into()), ..Default::default() };
    assert_eq!(err(short), "jwt_hs256_secret must be at least 32 bytes");
    let missing = dir.path().join("absent.json");
    assert!(
        err(JwtSettings { jwks_file: Some(missing), ..Default::default() }).starts_with("cannot read the jwks file")
    );
    let path = dir.path().join("jwks.json");
    std::fs::write(&path, "not json").unwrap();
    assert!(err(JwtSettings { jwks_file: Some(path.clone()), ..Default::default() }).contains("not a valid JWK set"));
    // Only keys we may not use: a symmetric key, an RSA key for RS512, an encryption key.
    let mut enc = jwk(&rsa_der(0), Algorithm::RS256, None);
    enc.common.public_key_use = Some(jsonwebtoken::jwk::PublicKeyUse::Encryption);
    let oct = jwk(&EncodingKey::from_secret(SECRET.as_bytes()), Algorithm::HS256, None);
    let rs512 = jwk(&rsa_der(0), Algorithm::RS512, None);
    let path = write_jwks(&dir, vec![enc, oct, rs512]);
    let msg = err(JwtSettings { jwks_file: Some(path), ..Default::default() });
    assert!(msg.contains("no usable RS256 or ES256"), "{msg}");
    let dbg = format!("{:?}", hs256_verifier());
    assert!(!dbg.contains(SECRET), "the secret never shows: {dbg}");
}

#[test]
fn given_tokens_of_both_kinds_when_asked_whether_they_look_like_a_jwt_then_only_jwts_do() {
    assert!(JwtVerifier::looks_like_jwt(&hs256(&claims_with(json!({})))));
    assert!(!JwtVerifier::looks_like_jwt(&format!("sb_{}", "ab".repeat(32))));
    for not in ["", "a.b", "a.b.c.d", ".b.c", "a..c", "a+/.b.c", "a.b.c=", "a b.c.d"] {
        assert!(!JwtVerifier::looks_like_jwt(not), "{not:?}");
    }
}
