//! The per-type defaults table of CONTRACT §3 (class, TTL, category, priority), overridable per
//! deployment, and the TTL bounds.
//!
//! Deliberately does not decide anything about a particular send: `send.rs` applies the table.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::error::{DomainError, DomainResult};

/// Smallest and largest `ttl_seconds` a send may ask for (1 s … 30 days).
pub const MIN_TTL_SECONDS: u64 = 1;
pub const MAX_TTL_SECONDS: u64 = 2_592_000;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, PartialOrd, Ord)]
#[serde(rename_all = "lowercase")]
pub enum DeliveryClass {
    Sync,
    Async,
}

impl DeliveryClass {
    pub fn as_str(self) -> &'static str {
        match self {
            DeliveryClass::Sync => "sync",
            DeliveryClass::Async => "async",
        }
    }
    pub fn parse(s: &str) -> DomainResult<Self> {
        match s {
            "sync" => Ok(Self::Sync),
            "async" => Ok(Self::Async),
            _ => Err(DomainError::invalid(format!("delivery_class {s:?} must be sync or async"))),
        }
    }
}

/// Signal categories; the priority is derived from the category (SPEC-071 §7).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum Category {
    Blocker,
    Ask,
    Task,
    Info,
}

impl Category {
    pub fn priority(self) -> i16 {
        match self {
            Category::Blocker => 3,
            Category::Ask => 2,
            Category::Task => 1,
            Category::Info => 0,
        }
    }
    pub fn as_str(self) -> &'static str {
        match self {
            Category::Blocker => "BLOCKER",
            Category::Ask => "ASK",
            Category::Task => "TASK",
            Category::Info => "INFO",
        }
    }
}

/// The defaults of one signal type.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct TypeDefaults {
    pub delivery_class: DeliveryClass,
    pub ttl_seconds: u64,
    pub category: Category,
}

impl TypeDefaults {
    pub fn priority(&self) -> i16 {
        self.category.priority()
    }
}

const HOUR: u64 = 3600;

/// The defaults table. `types` holds the named rows; anything else gets `fallback`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TypeTable {
    pub types: BTreeMap<String, TypeDefaults>,
    pub fallback: TypeDefaults,
}

impl Default for TypeTable {
    fn default() -> Self {
        use Category::*;
        use DeliveryClass::*;
        let row = |c, ttl, cat| TypeDefaults { delivery_class: c, ttl_seconds: ttl, category: cat };
        let types = [
            ("Blocker", row(Sync, 4 * HOUR, Blocker)),
            ("Question", row(Sync, HOUR, Ask)),
            ("ReviewRequested", row(Async, 24 * HOUR, Ask)),
            ("TaskAssigned", row(Async, 7 * 24 * HOUR, Task)),
            ("TaskCompleted", row(Async, 24 * HOUR, Info)),
            ("StatusUpdate", row(Async, 24 * HOUR, Info)),
            ("Acknowledgment", row(Async, HOUR, Info)),
            ("MasterPreempted", row(Async, 120, Info)),
            ("PeerJoined", row(Async, 300, Info)),
            ("PeerLeft", row(Async, 300, Info)),
        ];
        TypeTable {
            types: types.into_iter().map(|(k, v)| (k.to_string(), v)).collect(),
            fallback: row(Async, 24 * HOUR, Info),
        }
    }
}

impl TypeTable {
    /// The defaults for `signal_type`.
    pub fn get(&self, signal_type: &str) -> TypeDefaults {
        self.types.get(signal_type).copied().unwrap_or(self.fallback)
    }

    /// Whether `signal_type` is a row of the table (metrics fold other types into `other`).
    pub fn is_known(&self, signal_type: &str) -> bool {
        self.types.contains_key(signal_type)
    }

    /// The label a metric uses for `signal_type`: itself when configured, else `other`, so label
    /// sets stay bounded whatever senders invent.
    pub fn metric_label<'a>(&self, signal_type: &'a str) -> &'a str {
        if self.is_known(signal_type) {
            signal_type
        } else {
            "other"
        }
    }

    /// Applies deployment overrides (from the config file) on top of this table.
    pub fn with_overrides(mut self, overrides: BTreeMap<String, TypeDefaults>) -> DomainResult<Self> {
        for (name, defaults) in overrides {
            validate_ttl(defaults.ttl_seconds)?;
            if name == "*" {
                self.fallback = defaults;
            } else {
                crate::names::validate_signal_type(&name)?;
                self.types.insert(name, defaults);
            }
        }
        Ok(self)
    }
}

pub fn validate_ttl(ttl_seconds: u64) -> DomainResult<()> {
    if (MIN_TTL_SECONDS..=MAX_TTL_SECONDS).contains(&ttl_seconds) {
        Ok(())
    } else {
        Err(DomainError::invalid(format!(
            "ttl_seconds must be between {MIN_TTL_SECONDS} and {MAX_TTL_SECONDS}, got {ttl_seconds}"
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn given_the_default_table_when_looking_up_types_then_the_contract_rows_come_back() {
        let t = TypeTable::default();
        assert_eq!(t.get("Blocker").delivery_class, DeliveryClass::Sync);
        assert_eq!(t.get("Blocker").priority(), 3);
        assert_eq!(t.get("Question").ttl_seconds, 3600);
        assert_eq!(t.get("TaskAssigned").ttl_seconds, 7 * 24 * 3600);
        assert_eq!(t.get("TaskAssigned").priority(), 1);
        assert_eq!(t.get("MasterPreempted").ttl_seconds, 120);
        assert_eq!(t.get("PeerLeft").ttl_seconds, 300);
        assert_eq!(t.get("Whatever").delivery_class, DeliveryClass::Async);
        assert_eq!(t.get("Whatever").ttl_seconds, 24 * 3600);
        assert_eq!(t.get("Whatever").priority(), 0);
        assert_eq!(t.metric_label("Whatever"), "other");
        assert_eq!(t.metric_label("Blocker"), "Blocker");
    }

    #[test]
    fn given_overrides_when_applied_then_they_replace_rows_and_are_validated() {
        let mut o = BTreeMap::new();
        o.insert(
            "Deploy".to_string(),
            TypeDefaults { delivery_class: DeliveryClass::Sync, ttl_seconds: 60, category: Category::Blocker },
        );
        let t = TypeTable::default().with_overrides(o).unwrap();
        assert_eq!(t.get("Deploy").priority(), 3);
        let mut bad = BTreeMap::new();
        bad.insert(
            "X".to_string(),
            TypeDefaults { delivery_class: DeliveryClass::Sync, ttl_seconds: 0, category: Category::Info },
        );
        assert!(TypeTable::default().with_overrides(bad).is_err());
    }

    #[test]
    fn ttl_bounds() {
        assert!(validate_ttl(0).is_err());
        assert!(validate_ttl(1).is_ok());
        assert!(validate_ttl(2_592_000).is_ok());
        assert!(validate_ttl(2_592_001).is_err());
    }
}
