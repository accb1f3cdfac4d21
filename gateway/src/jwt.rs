//! JWT bearer tokens (CONTRACT §17): checks a token's signature, algorithm and time claims and
//! hands back its `sub`, `tenant`, `scope` and `exp`. HS256 with the configured secret, RS256 and
//! ES256 with the keys of a JWKS file (re-read by `reload`, e.g. on SIGHUP); every other
//! algorithm, `none` included, is refused. The cryptography is the `jsonwebtoken` crate's.
//!
//! Deliberately knows no registry: whether `sub` is a registered agent of `tenant`, and what
//! the scopes allow, is the caller's check. Nor does it fetch keys over the network or log:
//! the binary reads the file's path from its config and logs what `reload` answers.

use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use jsonwebtoken::errors::ErrorKind;
use jsonwebtoken::jwk::{AlgorithmParameters, EllipticCurve, JwkSet, KeyAlgorithm, PublicKeyUse};
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use serde_json::{Map, Value};

/// The shortest HS256 secret accepted: 256 bits, the length of the MAC (RFC 7518 §3.2).
pub const MIN_HS256_SECRET_BYTES: usize = 32;
/// The clock skew tolerated on `exp` and `nbf` when none is configured.
pub const DEFAULT_LEEWAY: Duration = Duration::from_secs(60);
/// The largest leeway accepted: past it `exp` would mean little.
pub const MAX_LEEWAY: Duration = Duration::from_secs(3600);

/// Where the keys come from and what else a token must satisfy (`[auth]` in the config file).
#[derive(Clone)]
pub struct JwtSettings {
    /// The shared secret of HS256 tokens; `None` refuses HS256 altogether.
    pub hs256_secret: Option<String>,
    /// A JWKS file (RFC 7517) with the RS256 and ES256 public keys; `None` refuses both.
    pub jwks_file: Option<PathBuf>,
    /// Clock skew tolerated on `exp` and `nbf` (whole seconds).
    pub leeway: Duration,
    /// When set, `iss` must be this.
    pub issuer: Option<String>,
    /// When set, `aud` must be (or contain) this.
    pub audience: Option<String>,
}

impl Default for JwtSettings {
    fn default() -> Self {
        Self { hs256_secret: None, jwks_file: None, leeway: DEFAULT_LEEWAY, issuer: None, audience: None }
    }
}

// The secret must never reach a log line.
impl std::fmt::Debug for JwtSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JwtSettings")
            .field("hs256_secret", &self.hs256_secret.as_ref().map(|_| "<redacted>"))
            .field("jwks_file", &self.jwks_file)
            .field("leeway", &self.leeway)
            .field("issuer", &self.issuer)
            .field("audience", &self.audience)
            .finish()
    }
}

/// What a verified token says.
#[derive(Debug, Clone, PartialEq)]
pub struct JwtClaims {
    /// The agent's identity.
    pub sub: String,
    pub tenant: String,
    /// Space-separated scopes; `None` (no `scope` claim) grants every scope.
    pub scope: Option<String>,
    /// Expiry, Unix seconds.
    pub exp: i64,
}

/// Why a token is refused: every one is a 401 to the caller.
#[derive(Debug, thiserror::Error)]
pub enum JwtRejection {
    #[error("token expired")]
    Expired,
    #[error("token not yet valid")]
    NotYetValid,
    #[error("{0}")]
    Invalid(String),
}

/// A configuration the verifier cannot start (or reload) with.
#[derive(Debug, thiserror::Error)]
pub enum JwtError {
    #[error("jwt needs jwt_hs256_secret or jwt_jwks_file")]
    NoKeySource,
    #[error("jwt_hs256_secret must be at least {MIN_HS256_SECRET_BYTES} bytes")]
    ShortSecret,
    #[error("jwt_leeway_seconds must be at most {} seconds", MAX_LEEWAY.as_secs())]
    LeewayTooLarge,
    #[error("cannot read the jwks file {}", path.display())]
    ReadJwks { path: PathBuf, source: std::io::Error },
    #[error("the jwks file {} is not a valid JWK set", path.display())]
    ParseJwks { path: PathBuf, source: serde_json::Error },
    #[error("the jwks file {} holds no usable RS256 or ES256 signing key", path.display())]
    NoUsableKey { path: PathBuf },
}

/// One public key of the JWKS file, with the one algorithm it verifies.
struct JwksKey {
    kid: Option<String>,
    alg: Algorithm,
    key: DecodingKey,
}

/// Verifies JWT bearer tokens; shared by every request (`Arc`), its JWKS keys swapped whole by
/// `reload` so a request sees the old set or the new one, never a mix.
pub struct JwtVerifier {
    settings: JwtSettings,
    hs256: Option<DecodingKey>,
    jwks: RwLock<Arc<Vec<JwksKey>>>,
}

impl std::fmt::Debug for JwtVerifier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JwtVerifier")
            .field("settings", &self.settings)
            .field("jwks_keys", &self.keys().len())
            .finish_non_exhaustive()
    }
}

impl JwtVerifier {
    /// Checks the settings and loads the JWKS file now.
    pub fn new(settings: JwtSettings) -> Result<Self, JwtError> {
        if settings.hs256_secret.is_none() && settings.jwks_file.is_none() {
            return Err(JwtError::NoKeySource);
        }
        if settings.hs256_secret.as_ref().is_some_and(|s| s.len() < MIN_HS256_SECRET_BYTES) {
            return Err(JwtError::ShortSecret);
        }
        if settings.leeway > MAX_LEEWAY {
            return Err(JwtError::LeewayTooLarge);
        }
        let jwks = match &settings.jwks_file {
            Some(path) => load_jwks(path)?,
            None => Vec::new(),
        };
        let hs256 = settings.hs256_secret.as_deref().map(|s| DecodingKey::from_secret(s.as_bytes()));
        Ok(Self { settings, hs256, jwks: RwLock::new(Arc::new(jwks)) })
    }

    /// The JWKS file `reload` re-reads, if one is configured.
    pub fn jwks_file(&self) -> Option<&Path> {
        self.settings.jwks_file.as_deref()
    }

    /// Re-reads the JWKS file and swaps its keys in; on an error the old keys stay. Answers how
    /// many keys are loaded (0 without a JWKS file: nothing to re-read).
    pub fn reload(&self) -> Result<usize, JwtError> {
        let Some(path) = &self.settings.jwks_file else { return Ok(0) };
        let keys = load_jwks(path)?;
        let n = keys.len();
        *self.jwks.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(keys);
        Ok(n)
    }

    /// Whether `token` has the shape of a JWT: base64url header and payload and a base64url
    /// (possibly empty, as an unsigned token's) signature, separated by dots. Our own `sb_`
    /// tokens never do.
    pub fn looks_like_jwt(token: &str) -> bool {
        let b64url = |s: &str| s.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
        let mut parts = token.split('.');
        match (parts.next(), parts.next(), parts.next(), parts.next()) {
            (Some(h), Some(p), Some(s), None) => !h.is_empty() && !p.is_empty() && b64url(h) && b64url(p) && b64url(s),
            _ => false,
        }
    }

    /// The claims of `token` when its signature, algorithm and claims hold.
    pub fn verify(&self, token: &str) -> Result<JwtClaims, JwtRejection> {
        let invalid = |m: &str| JwtRejection::Invalid(m.to_string());
        // Only the header's `alg` and `kid` are read before the signature is checked: they
        // choose the key, never whether one is needed.
        let header = jsonwebtoken::decode_header(token).map_err(|_| invalid("malformed token or unknown algorithm"))?;
        let keys = self.keys();
        let candidates: Vec<&DecodingKey> = match header.alg {
            Algorithm::HS256 => match &self.hs256 {
                Some(key) => vec![key],
                None => return Err(invalid("algorithm HS256 is not accepted")),
            },
            alg @ (Algorithm::RS256 | Algorithm::ES256) => {
                let of_alg = keys.iter().filter(|k| k.alg == alg);
                let found: Vec<&DecodingKey> = match &header.kid {
                    Some(kid) => of_alg.filter(|k| k.kid.as_deref() == Some(kid.as_str())).map(|k| &k.key).collect(),
                    None => of_alg.map(|k| &k.key).collect(),
                };
                if found.is_empty() {
                    return Err(invalid(if header.kid.is_some() {
                        "unknown key id"
                    } else {
                        "no key for the algorithm"
                    }));
                }
                found
            }
            _ => return Err(invalid("algorithm is not accepted")),
        };
        let validation = self.validation(header.alg);
        for key in candidates {
            match jsonwebtoken::decode::<Map<String, Value>>(token, key, &validation) {
                Ok(data) => return claims(data.claims),
                // The next key of the algorithm may be the one that signed it.
                Err(e) if is_key_mismatch(e.kind()) => continue,
                Err(e) => return Err(rejection(e.kind())),
            }
        }
        Err(invalid("bad signature"))
    }

    fn keys(&self) -> Arc<Vec<JwksKey>> {
        self.jwks.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    fn validation(&self, alg: Algorithm) -> Validation {
        let mut v = Validation::new(alg);
        v.leeway = self.settings.leeway.as_secs();
        v.validate_exp = true;
        v.validate_nbf = true;
        v.set_required_spec_claims(&["exp", "sub"]);
        if let Some(iss) = &self.settings.issuer {
            v.set_issuer(&[iss]);
        }
        match &self.settings.audience {
            Some(aud) => {
                v.set_audience(&[aud]);
                v.required_spec_claims.insert("aud".to_string());
            }
            None => v.validate_aud = false,
        }
        if self.settings.issuer.is_some() {
            v.required_spec_claims.insert("iss".to_string());
        }
        v
    }
}

/// Errors that mean "not this key": the signature does not verify with it.
fn is_key_mismatch(kind: &ErrorKind) -> bool {
    matches!(
        kind,
        ErrorKind::InvalidSignature
            | ErrorKind::InvalidRsaKey(_)
            | ErrorKind::InvalidEcdsaKey
            | ErrorKind::InvalidKeyFormat
    )
}

/// A verified-signature failure, worded for the caller (never naming key material).
fn rejection(kind: &ErrorKind) -> JwtRejection {
    JwtRejection::Invalid(match kind {
        ErrorKind::ExpiredSignature => return JwtRejection::Expired,
        ErrorKind::ImmatureSignature => return JwtRejection::NotYetValid,
        ErrorKind::MissingRequiredClaim(c) => format!("missing claim {c}"),
        ErrorKind::InvalidClaimFormat(c) => format!("malformed claim {c}"),
        ErrorKind::InvalidIssuer => "wrong issuer".to_string(),
        ErrorKind::InvalidAudience => "wrong audience".to_string(),
        ErrorKind::InvalidAlgorithm => "algorithm is not accepted".to_string(),
        _ => "malformed token".to_string(),
    })
}

/// `sub`, `tenant`, `scope` and `exp` out of verified claims.
fn claims(mut map: Map<String, Value>) -> Result<JwtClaims, JwtRejection> {
    let mut text = |name: &str| match map.remove(name) {
        Some(Value::String(s)) => Ok((!s.is_empty()).then_some(s)),
        None | Some(Value::Null) => Ok(None),
        Some(_) => Err(JwtRejection::Invalid(format!("malformed claim {name}"))),
    };
    let missing = |name: &str| JwtRejection::Invalid(format!("missing claim {name}"));
    let sub = text("sub")?.ok_or_else(|| missing("sub"))?;
    let tenant = text("tenant")?.ok_or_else(|| missing("tenant"))?;
    let scope = match map.remove("scope") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(s),
        Some(_) => return Err(JwtRejection::Invalid("malformed claim scope".to_string())),
    };
    // `jsonwebtoken` has checked `exp` is present and numeric (an integer, or a float it truncates).
    let exp = match map.get("exp") {
        Some(Value::Number(n)) => n.as_i64().or_else(|| n.as_f64().map(|f| f as i64)),
        _ => None,
    }
    .ok_or_else(|| JwtRejection::Invalid("malformed claim exp".to_string()))?;
    Ok(JwtClaims { sub, tenant, scope, exp })
}

/// The RS256 and ES256 (P-256) signing keys of a JWKS file; other keys are skipped.
fn load_jwks(path: &Path) -> Result<Vec<JwksKey>, JwtError> {
    let text = std::fs::read_to_string(path).map_err(|source| JwtError::ReadJwks { path: path.into(), source })?;
    let set: JwkSet =
        serde_json::from_str(&text).map_err(|source| JwtError::ParseJwks { path: path.into(), source })?;
    let keys: Vec<JwksKey> = set
        .keys
        .iter()
        .filter(|jwk| !matches!(jwk.common.public_key_use, Some(ref u) if *u != PublicKeyUse::Signature))
        .filter_map(|jwk| {
            let alg = match &jwk.algorithm {
                AlgorithmParameters::RSA(_) => Algorithm::RS256,
                AlgorithmParameters::EllipticCurve(p) if p.curve == EllipticCurve::P256 => Algorithm::ES256,
                _ => return None,
            };
            // A key that names an algorithm is used for that one only.
            if jwk.common.key_algorithm.is_some_and(|a| a != KeyAlgorithm::from(alg)) {
                return None;
            }
            let key = DecodingKey::from_jwk(jwk).ok()?;
            Some(JwksKey { kid: jwk.common.key_id.clone(), alg, key })
        })
        .collect();
    if keys.is_empty() {
        return Err(JwtError::NoUsableKey { path: path.into() });
    }
    Ok(keys)
}

#[cfg(test)]
#[path = "jwt_tests.rs"]
mod tests;
