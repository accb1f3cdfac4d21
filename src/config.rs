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
//! ```
//!
//! Deliberately only loads and validates; `bus::catalog` owns the table.

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
}

pub fn load_types(path: Option<&Path>) -> anyhow::Result<TypeTable> {
    let Some(path) = path else { return Ok(TypeTable::default()) };
    let text = std::fs::read_to_string(path).with_context(|| format!("cannot read config {}", path.display()))?;
    let file: ConfigFile = toml::from_str(&text).with_context(|| format!("invalid config {}", path.display()))?;
    TypeTable::default().with_overrides(file.types).with_context(|| format!("invalid type in {}", path.display()))
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
        let t = load_types(Some(&p)).unwrap();
        assert_eq!(t.get("Deploy").ttl_seconds, 600);
        std::fs::write(&p, "[types.Bad]\ndelivery_class = \"sometimes\"\nttl_seconds = 1\ncategory = \"INFO\"\n")
            .unwrap();
        assert!(load_types(Some(&p)).is_err());
    }
}
