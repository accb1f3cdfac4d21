//! The deployment config file (`--config`, TOML): `[server]` holds a key for every server flag
//! but `--config`, `[limits]` the per-identity and per-process limits, `[auth]` JWT bearer
//! tokens, `[types.Name]` per-type defaults overrides on top of the CONTRACT §3 table. `signalbus config default` prints the
//! whole file, commented (`config.default.toml`); unknown keys are errors.
//!
//! Precedence: a flag or its `SIGNALBUS_*` variable, then the file, then the flag's default —
//! `resolve` asks clap where each value came from and lets the file fill only defaults.
//!
//! Deliberately only loads and validates; `bus::catalog` owns the table, the gateway the rate
//! limiter, the listener and the JWT verifier, `serve.rs` what the values do.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use bus::catalog::{TypeDefaults, TypeTable};
use clap::parser::ValueSource;
use clap::ArgMatches;
use gateway::jwt::{JwtSettings, JwtVerifier};
use serde::Deserialize;

use crate::cli::{LogFormat, ServerArgs};

mod embedded;

/// The commented full file `signalbus config default` prints.
pub const DEFAULT_FILE: &str = include_str!("config.default.toml");

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct ConfigFile {
    #[serde(default)]
    server: Server,
    #[serde(default)]
    types: BTreeMap<String, TypeDefaults>,
    #[serde(default)]
    limits: Limits,
    #[serde(default)]
    directives: Directives,
    #[serde(default)]
    auth: Auth,
    #[serde(default)]
    embedded: embedded::Embedded,
}

/// `[auth]`: JWT bearer tokens (CONTRACT §17, `docs/jwt.md`). No key set: no JWT is accepted.
#[derive(Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct Auth {
    jwt_hs256_secret: Option<String>,
    jwt_jwks_file: Option<PathBuf>,
    jwt_leeway_seconds: Option<u64>,
    jwt_issuer: Option<String>,
    jwt_audience: Option<String>,
}

// The secret must never reach a log line.
impl std::fmt::Debug for Auth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Auth")
            .field("jwt_hs256_secret", &self.jwt_hs256_secret.as_ref().map(|_| "<redacted>"))
            .field("jwt_jwks_file", &self.jwt_jwks_file)
            .field("jwt_leeway_seconds", &self.jwt_leeway_seconds)
            .field("jwt_issuer", &self.jwt_issuer)
            .field("jwt_audience", &self.jwt_audience)
            .finish()
    }
}

impl Auth {
    /// The verifier's settings, or `None` when no `jwt_*` key is set.
    fn jwt(self) -> Option<JwtSettings> {
        let Auth { jwt_hs256_secret, jwt_jwks_file, jwt_leeway_seconds, jwt_issuer, jwt_audience } = self;
        if jwt_hs256_secret.is_none()
            && jwt_jwks_file.is_none()
            && jwt_leeway_seconds.is_none()
            && jwt_issuer.is_none()
            && jwt_audience.is_none()
        {
            return None;
        }
        Some(JwtSettings {
            hs256_secret: jwt_hs256_secret,
            jwks_file: jwt_jwks_file,
            leeway: jwt_leeway_seconds.map_or(gateway::jwt::DEFAULT_LEEWAY, Duration::from_secs),
            issuer: jwt_issuer,
            audience: jwt_audience,
        })
    }
}

/// `[directives]`: the default deadline, and `[directives.issuers]` (type pattern → who may
/// create such directives: identities and `@groups`).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct Directives {
    default_deadline: Option<String>,
    #[serde(default)]
    issuers: BTreeMap<String, Vec<String>>,
}

/// `[server]`: one key per server flag, named as the flag with `_` for `-`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct Server {
    listen: Option<String>,
    metrics_listen: Option<String>,
    data_dir: Option<PathBuf>,
    nats_url: Option<String>,
    database_url: Option<String>,
    admin_token: Option<String>,
    stale_after: Option<String>,
    sweep_interval: Option<String>,
    replicas: Option<u16>,
    stream: Option<String>,
    retention: Option<String>,
    archive_after: Option<String>,
    node: Option<String>,
    tls_cert: Option<PathBuf>,
    tls_key: Option<PathBuf>,
    log_format: Option<LogFormat>,
}

/// The keys of `[server]`, in the order of `ServerArgs` (checked against clap in the tests).
#[cfg(test)]
pub const SERVER_KEYS: &[&str] = &[
    "listen",
    "metrics_listen",
    "data_dir",
    "nats_url",
    "database_url",
    "admin_token",
    "stale_after",
    "sweep_interval",
    "replicas",
    "stream",
    "retention",
    "archive_after",
    "node",
    "tls_cert",
    "tls_key",
    "log_format",
];

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct Limits {
    sends_per_second: Option<u32>,
    send_burst: Option<u32>,
    facts_per_second: Option<u32>,
    fact_burst: Option<u32>,
    max_connections: Option<usize>,
    header_read_timeout: Option<String>,
    idle_timeout: Option<String>,
    max_fanout: Option<usize>,
}

/// What the config file sets.
#[derive(Debug, Clone)]
pub struct Config {
    pub types: TypeTable,
    /// `None`: no send rate limit.
    pub send_rate: Option<gateway::SendRate>,
    /// `None`: no plugin fact rate limit.
    pub fact_rate: Option<gateway::FactRate>,
    pub connections: gateway::ConnLimits,
    /// `[directives.issuers]`.
    pub directive_issuers: bus::directive::IssuerPolicy,
    /// `[directives] default_deadline`.
    pub directive_default_deadline: Duration,
    /// `[limits] max_fanout`.
    pub max_fanout: usize,
    /// `[auth]`: the JWT settings, `None` when no `jwt_*` key is set. `jwt_verifier` builds the
    /// verifier (reading the JWKS file), in the roles that serve the gateway only.
    pub jwt: Option<JwtSettings>,
    /// `[embedded] sync`: when the embedded log's answered appends are on the disk.
    pub embedded_durability: bus::log::embedded::Durability,
    /// The config file as named in errors (empty without one).
    shown: String,
}

impl Config {
    /// The `[auth]` JWT verifier, its JWKS file read now: a bad one is an error naming the file.
    pub fn jwt_verifier(&self) -> anyhow::Result<Option<Arc<JwtVerifier>>> {
        let Some(settings) = &self.jwt else { return Ok(None) };
        let verifier =
            JwtVerifier::new(settings.clone()).with_context(|| format!("invalid config {}: [auth]", self.shown))?;
        Ok(Some(Arc::new(verifier)))
    }
}

/// The server flags with the config file (`args.config`) filling what no flag or variable set,
/// and what the rest of the file sets.
pub fn resolve(mut args: ServerArgs, matches: &ArgMatches) -> anyhow::Result<(ServerArgs, Config)> {
    let file = read(args.config.as_deref())?;
    let shown = args.config.as_ref().map(|p| p.display().to_string()).unwrap_or_default();
    let unset =
        |id: &str| !matches!(matches.value_source(id), Some(ValueSource::CommandLine | ValueSource::EnvVariable));
    let duration = |key: &str, v: &str| -> anyhow::Result<Duration> {
        humantime::parse_duration(v).with_context(|| format!("invalid config {shown}: server.{key} = {v:?}"))
    };
    let s = file.server;
    macro_rules! fill {
        ($key:ident) => {
            if let (Some(v), true) = (s.$key.clone(), unset(stringify!($key))) {
                args.$key = v.into();
            }
        };
        ($key:ident, duration) => {
            if let (Some(v), true) = (s.$key.as_deref(), unset(stringify!($key))) {
                args.$key = duration(stringify!($key), v)?;
            }
        };
    }
    fill!(listen);
    fill!(metrics_listen);
    fill!(data_dir);
    fill!(nats_url);
    fill!(database_url);
    fill!(admin_token);
    fill!(stale_after, duration);
    fill!(sweep_interval, duration);
    fill!(stream);
    fill!(retention, duration);
    fill!(archive_after, duration);
    fill!(node);
    fill!(tls_cert);
    fill!(tls_key);
    fill!(log_format);
    if let (Some(n), true) = (s.replicas, unset("replicas")) {
        anyhow::ensure!((1..=5).contains(&n), "invalid config {shown}: server.replicas = {n} (1 to 5)");
        args.replicas = n;
    }
    anyhow::ensure!(
        args.tls_cert.is_some() == args.tls_key.is_some(),
        "TLS needs both a certificate and its key (--tls-cert and --tls-key, or tls_cert and tls_key)"
    );
    let config = build(file.types, file.limits, file.directives, file.auth, file.embedded, &shown)?;
    Ok((args, config))
}

/// `signalbus config check FILE`: the whole file read as `serve` would, every value checked.
pub fn check(path: &Path) -> anyhow::Result<()> {
    let file = read(Some(path))?;
    let shown = path.display().to_string();
    let s = &file.server;
    for (key, v) in [
        ("stale_after", &s.stale_after),
        ("sweep_interval", &s.sweep_interval),
        ("retention", &s.retention),
        ("archive_after", &s.archive_after),
    ] {
        if let Some(v) = v {
            humantime::parse_duration(v).with_context(|| format!("invalid config {shown}: server.{key} = {v:?}"))?;
        }
    }
    if let Some(n) = s.replicas {
        anyhow::ensure!((1..=5).contains(&n), "invalid config {shown}: server.replicas = {n} (1 to 5)");
    }
    anyhow::ensure!(
        s.tls_cert.is_some() == s.tls_key.is_some(),
        "invalid config {shown}: server.tls_cert and server.tls_key go together"
    );
    anyhow::ensure!(
        s.nats_url.is_some() == s.database_url.is_some(),
        "invalid config {shown}: server.nats_url and server.database_url go together (or neither, embedded)"
    );
    // The JWT verifier too, so a JWKS file that would fail the start fails the check.
    build(file.types, file.limits, file.directives, file.auth, file.embedded, &shown)?.jwt_verifier()?;
    Ok(())
}

fn read(path: Option<&Path>) -> anyhow::Result<ConfigFile> {
    let Some(path) = path else { return Ok(ConfigFile::default()) };
    let text = std::fs::read_to_string(path).with_context(|| format!("cannot read config {}", path.display()))?;
    toml::from_str(&text).with_context(|| format!("invalid config {}", path.display()))
}

/// Only the `[types]`, `[limits]`, `[directives]`, `[auth]` and `[embedded]` of a file (or the defaults without one).
#[cfg(test)]
pub fn load(path: Option<&Path>) -> anyhow::Result<Config> {
    let file = read(path)?;
    let shown = path.map(|p| p.display().to_string()).unwrap_or_default();
    build(file.types, file.limits, file.directives, file.auth, file.embedded, &shown)
}

fn build(
    types: BTreeMap<String, TypeDefaults>,
    limits: Limits,
    directives: Directives,
    auth: Auth,
    embedded: embedded::Embedded,
    shown: &str,
) -> anyhow::Result<Config> {
    let file = ConfigFile { types, limits, directives, ..Default::default() };
    let types = TypeTable::default().with_overrides(file.types).with_context(|| format!("invalid type in {shown}"))?;
    let default = gateway::SendRate::default();
    let send_rate = match file.limits.sends_per_second.unwrap_or(default.per_second) {
        0 => None,
        per_second => Some(gateway::SendRate {
            per_second,
            burst: file.limits.send_burst.unwrap_or(per_second.saturating_mul(2)).max(per_second),
        }),
    };
    let default = gateway::FactRate::default();
    let fact_rate = match file.limits.facts_per_second.unwrap_or(default.per_second) {
        0 => None,
        per_second => Some(gateway::FactRate {
            per_second,
            burst: file.limits.fact_burst.unwrap_or(per_second.saturating_mul(2)).max(per_second),
        }),
    };
    let mut connections = gateway::ConnLimits::default();
    if let Some(n) = file.limits.max_connections {
        anyhow::ensure!(n > 0, "invalid config {shown}: max_connections must be at least 1");
        connections.max_connections = n;
    }
    let duration = |key: &str, v: &Option<String>| -> anyhow::Result<Option<Duration>> {
        v.as_deref()
            .map(|t| humantime::parse_duration(t).with_context(|| format!("invalid config {shown}: {key} = {t:?}")))
            .transpose()
    };
    if let Some(d) = duration("header_read_timeout", &file.limits.header_read_timeout)? {
        connections.header_read_timeout = d;
    }
    if let Some(d) = duration("idle_timeout", &file.limits.idle_timeout)? {
        connections.idle_timeout = d;
    }
    let max_fanout = file.limits.max_fanout.unwrap_or(bus::group::DEFAULT_MAX_FANOUT);
    anyhow::ensure!(max_fanout > 0, "invalid config {shown}: max_fanout must be at least 1");
    let directive_issuers = bus::directive::IssuerPolicy::new(file.directives.issuers)
        .map_err(|e| anyhow::anyhow!("invalid config {shown}: {e}"))?;
    let directive_default_deadline = match &file.directives.default_deadline {
        None => Duration::from_secs(bus::directive::DEFAULT_DEADLINE_SECONDS),
        Some(t) => {
            let d = humantime::parse_duration(t)
                .with_context(|| format!("invalid config {shown}: directives.default_deadline = {t:?}"))?;
            let max = bus::directive::MAX_DEADLINE_SECONDS;
            anyhow::ensure!(
                (1..=max).contains(&d.as_secs()),
                "invalid config {shown}: directives.default_deadline = {t:?} (1s to {max}s)"
            );
            d
        }
    };
    Ok(Config {
        types,
        send_rate,
        fact_rate,
        connections,
        directive_issuers,
        directive_default_deadline,
        max_fanout,
        jwt: auth.jwt(),
        embedded_durability: embedded.durability(shown)?,
        shown: shown.to_string(),
    })
}

#[cfg(test)]
mod tests;
