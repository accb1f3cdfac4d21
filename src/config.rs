//! The deployment config file (`--config`, TOML): per-type defaults overrides on top of the
//! CONTRACT §3 table.
//!
//! ```toml
//! [types.Deploy]
//! delivery_class = "sync"
//! ttl_seconds = 600
//! category = "BLOCKER"
//!
//! [types."*"]          # every type not listed
//! delivery_class = "async"
//! ttl_seconds = 86400
//! category = "INFO"
//!
//! [limits]             # per identity and gateway process; sends_per_second = 0 turns it off
//! sends_per_second = 1000
//! send_burst = 2000
//! facts_per_second = 100     # units of 64 KiB of fact state; 0 turns it off
//! fact_burst = 200
//! max_connections = 4000     # per gateway process; default: the open-files limit less 64
//! header_read_timeout = "10s"
//! idle_timeout = "60s"
//! ```
//!
//! Deliberately only loads and validates; `bus::catalog` owns the table and the gateway the
//! rate limiter.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::Context;
use bus::catalog::{TypeDefaults, TypeTable};
use serde::Deserialize;

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct ConfigFile {
    #[serde(default)]
    types: BTreeMap<String, TypeDefaults>,
    #[serde(default)]
    limits: Limits,
}

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
}

pub fn load(path: Option<&Path>) -> anyhow::Result<Config> {
    let file = match path {
        None => ConfigFile::default(),
        Some(path) => {
            let text =
                std::fs::read_to_string(path).with_context(|| format!("cannot read config {}", path.display()))?;
            toml::from_str(&text).with_context(|| format!("invalid config {}", path.display()))?
        }
    };
    let shown = path.map(|p| p.display().to_string()).unwrap_or_default();
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
    let duration = |key: &str, v: &Option<String>| -> anyhow::Result<Option<std::time::Duration>> {
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
    Ok(Config { types, send_rate, fact_rate, connections })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overrides_load_from_toml() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("c.toml");
        std::fs::write(&p, "[types.Deploy]\ndelivery_class = \"sync\"\nttl_seconds = 600\ncategory = \"BLOCKER\"\n")
            .unwrap();
        let c = load(Some(&p)).unwrap();
        assert_eq!(c.types.get("Deploy").ttl_seconds, 600);
        assert_eq!(c.send_rate, Some(gateway::SendRate::default()));
        std::fs::write(&p, "[types.Bad]\ndelivery_class = \"sometimes\"\nttl_seconds = 1\ncategory = \"INFO\"\n")
            .unwrap();
        assert!(load(Some(&p)).is_err());
        std::fs::write(&p, "[limits]\nsends_per_second = 0\n").unwrap();
        assert_eq!(load(Some(&p)).unwrap().send_rate, None);
        std::fs::write(&p, "[limits]\nsends_per_second = 10\n").unwrap();
        assert_eq!(load(Some(&p)).unwrap().send_rate, Some(gateway::SendRate { per_second: 10, burst: 20 }));
        assert!(load(None).unwrap().send_rate.is_some(), "limited by default");
        std::fs::write(&p, "[limits]\nfacts_per_second = 0\nmax_connections = 300\nidle_timeout = \"5s\"\n").unwrap();
        let c = load(Some(&p)).unwrap();
        assert_eq!(c.fact_rate, None);
        assert_eq!(c.connections.max_connections, 300);
        assert_eq!(c.connections.idle_timeout, std::time::Duration::from_secs(5));
        assert_eq!(c.connections.header_read_timeout, gateway::ConnLimits::default().header_read_timeout);
        std::fs::write(&p, "[limits]\nheader_read_timeout = \"soon\"\n").unwrap();
        assert!(load(Some(&p)).is_err());
        assert_eq!(load(None).unwrap().fact_rate, Some(gateway::FactRate::default()));
    }
}
