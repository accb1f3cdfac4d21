//! Placeholder of the JWT verifier (replaced by the real one): refuses every JWT.
//!
//! Deliberately does nothing else.

#[derive(Debug, Clone, PartialEq)]
pub struct JwtClaims {
    pub sub: String,
    pub tenant: String,
    pub scope: Option<String>,
    pub exp: i64,
}

#[derive(Debug, thiserror::Error)]
pub enum JwtRejection {
    #[error("token expired")]
    Expired,
    #[error("token not yet valid")]
    NotYetValid,
    #[error("{0}")]
    Invalid(String),
}

#[derive(Debug)]
pub struct JwtVerifier;

impl JwtVerifier {
    pub fn looks_like_jwt(token: &str) -> bool {
        token.split('.').count() == 3
    }

    pub fn verify(&self, _token: &str) -> Result<JwtClaims, JwtRejection> {
        Err(JwtRejection::Invalid("no key".into()))
    }
}
