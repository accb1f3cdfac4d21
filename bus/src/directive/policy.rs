//! Who may create which directives (CONTRACT §14, FleetPrompt's "role-gated"): the
//! `[directives.issuers]` table, type patterns (exact, or ending in `*`) mapped to the identities
//! and `@groups` allowed to create them; the most specific pattern wins; no table, or no pattern
//! matching a type, lets every agent create it.
//!
//! Deliberately pure: which groups the issuer is in is the caller's read, handed in as a
//! function so it is asked only about the groups the winning pattern names.

use crate::error::{DomainError, DomainResult};
use crate::names::{validate_group, validate_identity, validate_signal_type};

/// One row of the table: a pattern and who may create the types it matches.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IssuerRule {
    pattern: String,
    principals: Vec<String>,
}

/// The deployment's issuers policy. The default allows everything.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct IssuerPolicy {
    rules: Vec<IssuerRule>,
}

impl IssuerPolicy {
    /// Builds the policy from the config table, refusing malformed patterns and principals with
    /// a message naming the entry (for `config check`).
    pub fn new<P, I>(table: impl IntoIterator<Item = (P, I)>) -> DomainResult<Self>
    where
        P: Into<String>,
        I: IntoIterator,
        I::Item: Into<String>,
    {
        let mut rules = Vec::new();
        for (pattern, principals) in table {
            let pattern = pattern.into();
            let stem = pattern.strip_suffix('*').unwrap_or(&pattern);
            if !(stem.is_empty() && pattern == "*") {
                // `package.*` is checked as the type `package.x` would be.
                let probe = if pattern.ends_with('*') { format!("{stem}x") } else { stem.to_string() };
                validate_signal_type(&probe).map_err(|_| {
                    DomainError::invalid(format!(
                        "[directives.issuers] pattern {pattern:?} must be a directive type, optionally ending in *"
                    ))
                })?;
            }
            let principals: Vec<String> = principals.into_iter().map(Into::into).collect();
            for p in &principals {
                let ok = if p.starts_with('@') { validate_group(p) } else { validate_identity(p) };
                ok.map_err(|e| DomainError::invalid(format!("[directives.issuers] {pattern:?}: {e}")))?;
            }
            rules.push(IssuerRule { pattern, principals });
        }
        Ok(IssuerPolicy { rules })
    }

    /// The rule that governs `directive_type`: an exact pattern, else the longest `*` prefix.
    fn rule_for(&self, directive_type: &str) -> Option<&IssuerRule> {
        if let Some(exact) = self.rules.iter().find(|r| r.pattern == directive_type) {
            return Some(exact);
        }
        self.rules
            .iter()
            .filter(|r| r.pattern.strip_suffix('*').is_some_and(|stem| directive_type.starts_with(stem)))
            .max_by_key(|r| r.pattern.len())
    }

    /// Whether any rule names a group (so the caller knows whether to read memberships).
    pub fn names_groups(&self, directive_type: &str) -> Vec<&str> {
        self.rule_for(directive_type)
            .map(|r| r.principals.iter().filter(|p| p.starts_with('@')).map(String::as_str).collect())
            .unwrap_or_default()
    }

    /// Refuses `issuer` creating `directive_type` unless the governing rule names it or one of
    /// its groups (`in_group(group)` answers whether the issuer is a member).
    pub fn check(&self, directive_type: &str, issuer: &str, in_group: impl Fn(&str) -> bool) -> DomainResult<()> {
        let Some(rule) = self.rule_for(directive_type) else { return Ok(()) };
        let allowed = rule.principals.iter().any(|p| if p.starts_with('@') { in_group(p) } else { p == issuer });
        if allowed {
            return Ok(());
        }
        Err(DomainError::Forbidden(format!(
            "{issuer} may not create directives of type {directive_type} (the issuers policy allows {} for {:?})",
            if rule.principals.is_empty() { "nobody".to_string() } else { rule.principals.join(", ") },
            rule.pattern
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy() -> IssuerPolicy {
        IssuerPolicy::new([
            ("package.*", vec!["alice", "@ops"]),
            ("package.install", vec!["bob"]),
            ("*", vec!["root"]),
            ("review.code", vec![]),
        ])
        .unwrap()
    }

    #[test]
    fn given_no_table_when_anyone_creates_anything_then_it_is_allowed() {
        assert!(IssuerPolicy::default().check("any.type", "zed", |_| false).is_ok());
    }

    #[test]
    fn given_an_exact_and_a_prefix_rule_when_checking_then_the_most_specific_wins() {
        let p = policy();
        assert!(p.check("package.install", "bob", |_| false).is_ok());
        assert!(p.check("package.install", "alice", |_| false).is_err(), "the exact rule names only bob");
        assert!(p.check("package.remove", "alice", |_| false).is_ok());
        assert!(p.check("package.remove", "carol", |g| g == "@ops").is_ok(), "a member of @ops");
        assert!(p.check("package.remove", "carol", |_| false).is_err());
        assert!(p.check("deploy.app", "root", |_| false).is_ok(), "the catch-all");
        let e = p.check("review.code", "root", |_| false).unwrap_err();
        assert!(matches!(&e, DomainError::Forbidden(m) if m.contains("review.code") && m.contains("nobody")), "{e}");
    }

    #[test]
    fn given_a_malformed_entry_when_building_then_it_is_refused_naming_it() {
        for (pattern, who) in [("pack age", "a"), ("*x", "a"), ("ok.type", "@Bad"), ("ok.type", "")] {
            let e = IssuerPolicy::new([(pattern, vec![who])]).unwrap_err();
            assert!(e.to_string().contains("[directives.issuers]"), "{pattern} {who}: {e}");
        }
    }

    #[test]
    fn the_groups_of_the_governing_rule_are_named() {
        assert_eq!(policy().names_groups("package.remove"), vec!["@ops"]);
        assert!(policy().names_groups("package.install").is_empty());
    }
}
