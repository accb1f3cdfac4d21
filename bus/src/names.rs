//! Validation of the names the contract constrains (tenant, identity, signal type, plugin) and
//! their encoding as NATS subject tokens.
//!
//! Deliberately does not know where a name came from: the gateway decides which error a caller sees.

use crate::error::{DomainError, DomainResult};

/// `^[a-z0-9][a-z0-9_-]{0,62}$`
pub fn validate_tenant(s: &str) -> DomainResult<()> {
    let ok = matches!(s.len(), 1..=63)
        && s.bytes()
            .enumerate()
            .all(|(i, b)| b.is_ascii_lowercase() || b.is_ascii_digit() || (i > 0 && (b == b'_' || b == b'-')));
    ok.then_some(())
        .ok_or_else(|| DomainError::invalid(format!("tenant {s:?} must match ^[a-z0-9][a-z0-9_-]{{0,62}}$")))
}

/// `^[A-Za-z0-9][A-Za-z0-9._:@-]{0,127}$`
pub fn validate_identity(s: &str) -> DomainResult<()> {
    let ok = matches!(s.len(), 1..=128)
        && s.bytes()
            .enumerate()
            .all(|(i, b)| b.is_ascii_alphanumeric() || (i > 0 && matches!(b, b'.' | b'_' | b':' | b'@' | b'-')));
    ok.then_some(()).ok_or_else(|| {
        DomainError::invalid(format!("identity {s:?} must match ^[A-Za-z0-9][A-Za-z0-9._:@-]{{0,127}}$"))
    })
}

/// The bus's own name: plugin names under `signalbus/` are the bus's (CONTRACT §8), and an agent
/// owns the plugin names under its identity, so no agent may be registered as `signalbus`.
pub const RESERVED_IDENTITY: &str = "signalbus";

/// An identity an agent may be registered under: a valid identity other than `signalbus` (in any
/// case, so no agent can pass itself off as the bus either).
pub fn validate_new_identity(s: &str) -> DomainResult<()> {
    validate_identity(s)?;
    if s.eq_ignore_ascii_case(RESERVED_IDENTITY) {
        return Err(DomainError::invalid(format!("identity {s:?} is reserved for the bus itself")));
    }
    Ok(())
}

/// `^[A-Za-z][A-Za-z0-9_.]{0,63}$`
pub fn validate_signal_type(s: &str) -> DomainResult<()> {
    let ok = matches!(s.len(), 1..=64)
        && s.bytes()
            .enumerate()
            .all(|(i, b)| b.is_ascii_alphabetic() || (i > 0 && (b.is_ascii_digit() || b == b'_' || b == b'.')));
    ok.then_some(())
        .ok_or_else(|| DomainError::invalid(format!("type {s:?} must match ^[A-Za-z][A-Za-z0-9_.]{{0,63}}$")))
}

/// `^@[a-z0-9][a-z0-9_.-]{0,62}$`: a group name, with its `@` (an identity never starts with one).
pub fn validate_group(s: &str) -> DomainResult<()> {
    let ok = s.strip_prefix('@').is_some_and(|rest| {
        matches!(rest.len(), 1..=63)
            && rest.bytes().enumerate().all(|(i, b)| {
                b.is_ascii_lowercase() || b.is_ascii_digit() || (i > 0 && matches!(b, b'_' | b'.' | b'-'))
            })
    });
    ok.then_some(())
        .ok_or_else(|| DomainError::invalid(format!("group {s:?} must match ^@[a-z0-9][a-z0-9_.-]{{0,62}}$")))
}

/// The group named in a URL path, where it goes without its `@` (`/v1/groups/reviewers`) or with it.
pub fn group_from_path(name: &str) -> DomainResult<String> {
    // `@reviewers` is accepted too: the name as clients write it elsewhere.
    let group = format!("@{}", name.strip_prefix('@').unwrap_or(name));
    validate_group(&group)
        .map_err(|_| DomainError::invalid(format!("group name {name:?} must match ^[a-z0-9][a-z0-9_.-]{{0,62}}$")))?;
    Ok(group)
}

/// Whether `to` names a group rather than an identity.
pub fn is_group(to: &str) -> bool {
    to.starts_with('@')
}

/// A plugin name is one or more `/`-separated segments, each shaped like an identity.
pub fn validate_plugin(s: &str) -> DomainResult<()> {
    let ok = s.len() <= 256 && !s.is_empty() && s.split('/').all(|seg| validate_identity(seg).is_ok());
    ok.then_some(()).ok_or_else(|| {
        DomainError::invalid(format!("plugin name {s:?} must be '/'-separated segments like identities"))
    })
}

/// Whether `identity` may record facts for `plugin`: it owns `<identity>` and `<identity>/...`;
/// names under `signalbus/` belong to the bus itself, even to an agent registered as
/// `signalbus` before the name was reserved.
pub fn plugin_owned_by(plugin: &str, identity: &str) -> bool {
    let owned = plugin == identity || plugin.strip_prefix(identity).is_some_and(|rest| rest.starts_with('/'));
    owned && plugin.split('/').next() != Some(RESERVED_IDENTITY)
}

/// Encodes a name as one NATS subject token. Names may contain `.`, `:`, `@` and `/`, which
/// subjects reserve or which would be ambiguous, so every byte outside `[A-Za-z0-9_-]` becomes
/// `~XX` (hex). The encoding is injective, so distinct names never share a subject.
pub fn subject_token(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b == b'_' || b == b'-' {
            out.push(b as char);
        } else {
            out.push_str(&format!("~{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_the_contract_patterns() {
        assert!(validate_tenant("default").is_ok());
        assert!(validate_tenant("a-b_c9").is_ok());
        assert!(validate_tenant("-a").is_err());
        assert!(validate_tenant("Abc").is_err());
        assert!(validate_tenant(&"a".repeat(64)).is_err());
        assert!(validate_identity("alice@host:1.x-y").is_ok());
        assert!(validate_identity(".alice").is_err());
        assert!(validate_identity("al ice").is_err());
        assert!(validate_identity(&"a".repeat(129)).is_err());
        assert!(validate_signal_type("Task.Done_2").is_ok());
        assert!(validate_signal_type("2Task").is_err());
        assert!(validate_plugin("alice/watcher").is_ok());
        assert!(validate_plugin("alice//x").is_err());
    }

    #[test]
    fn group_names_follow_the_contract_pattern_and_go_with_or_without_their_at_in_paths() {
        for ok in ["@reviewers", "@a", "@build.ci-2_x", &format!("@{}", "a".repeat(63))] {
            assert!(validate_group(ok).is_ok(), "{ok}");
        }
        for bad in ["reviewers", "@", "@-x", "@.x", "@Reviewers", "@a b", "@@a", &format!("@{}", "a".repeat(64))] {
            assert!(validate_group(bad).is_err(), "{bad}");
        }
        assert_eq!(group_from_path("reviewers"), Ok("@reviewers".to_string()));
        // The `@` may also be written in a path (as clients write the name elsewhere), once.
        assert_eq!(group_from_path("@reviewers"), Ok("@reviewers".to_string()));
        assert!(group_from_path("@@reviewers").is_err());
        assert!(is_group("@reviewers") && !is_group("bob"));
        assert!(validate_identity("@reviewers").is_err(), "no identity can pass for a group");
    }

    #[test]
    fn plugin_ownership() {
        assert!(plugin_owned_by("alice", "alice"));
        assert!(plugin_owned_by("alice/watcher", "alice"));
        assert!(!plugin_owned_by("alicex", "alice"));
        assert!(!plugin_owned_by("signalbus/sweeper", "alice"));
        assert!(!plugin_owned_by("signalbus/sweeper", "signalbus"));
        assert!(!plugin_owned_by("signalbus", "signalbus"));
        assert!(plugin_owned_by("signalbusy/x", "signalbusy"));
    }

    #[test]
    fn the_bus_identity_is_reserved_in_any_case() {
        for reserved in ["signalbus", "SignalBus", "SIGNALBUS"] {
            assert!(validate_identity(reserved).is_ok(), "still a valid name to send to or look up");
            assert!(validate_new_identity(reserved).is_err(), "{reserved}");
        }
        for ok in ["signalbus2", "my-signalbus", "signalbus.bot", "alice"] {
            assert!(validate_new_identity(ok).is_ok(), "{ok}");
        }
        assert!(validate_new_identity(".bad").is_err());
    }

    #[test]
    fn subject_tokens_are_injective_and_safe() {
        assert_eq!(subject_token("alice"), "alice");
        assert_eq!(subject_token("a.b/c"), "a~2Eb~2Fc");
        assert_ne!(subject_token("a.b"), subject_token("a~2Eb"));
        assert!(!subject_token("x.y*>z w").contains(['.', '*', '>', ' ']));
    }
}
