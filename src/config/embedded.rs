//! `[embedded]` of the config file: how the embedded mode's event log makes answered appends
//! durable (`bus::log::embedded::Durability`). Ignored when serving on NATS + PostgreSQL, whose
//! durability is the stream's own.
//!
//! Deliberately only parses: what a setting does is `bus`'s.

use std::time::Duration;

use bus::log::embedded::Durability;
use serde::Deserialize;

/// The longest `sync` interval accepted: past this a power loss could cost more than an
/// operator would expect of a setting read as "shortly".
const MAX_SYNC: Duration = Duration::from_secs(120);

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct Embedded {
    sync: Option<String>,
}

impl Embedded {
    /// `sync = "commit"`: every group commit is fsynced before it is answered; a duration
    /// (`"1s"`, the default): commits are fsynced at most that long after being answered.
    pub fn durability(&self, shown: &str) -> anyhow::Result<Durability> {
        let Some(v) = self.sync.as_deref() else { return Ok(Durability::default()) };
        if v == "commit" {
            return Ok(Durability::EveryCommit);
        }
        let bad = || anyhow::anyhow!("invalid config {shown}: embedded.sync = {v:?} (\"commit\", or 1ms to 2m)");
        let d = humantime::parse_duration(v).map_err(|_| bad())?;
        anyhow::ensure!(d >= Duration::from_millis(1) && d <= MAX_SYNC, bad());
        Ok(Durability::Within(d))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(v: Option<&str>) -> anyhow::Result<Durability> {
        Embedded { sync: v.map(str::to_string) }.durability("f.toml")
    }

    #[test]
    fn sync_is_every_commit_or_a_bounded_interval() {
        assert_eq!(parse(None).unwrap(), Durability::default());
        assert_eq!(parse(Some("commit")).unwrap(), Durability::EveryCommit);
        assert_eq!(parse(Some("250ms")).unwrap(), Durability::Within(Duration::from_millis(250)));
        for bad in ["0s", "1h", "always", ""] {
            let e = parse(Some(bad)).unwrap_err().to_string();
            assert!(e.contains("embedded.sync"), "{bad}: {e}");
        }
    }
}
