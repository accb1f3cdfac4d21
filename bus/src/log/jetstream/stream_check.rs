//! What the bus demands of an existing stream, and of the server, before it uses them: a stream
//! created by someone else (or by an older configuration) is reported, never silently adopted
//! or rewritten (CONTRACT §13).
//!
//! Deliberately talks to no server: `connect` hands it what the server said.

use async_nats::jetstream::stream::{Config, RetentionPolicy};

use crate::error::{Error, Result};

/// The oldest nats-server whose per-subject compare-and-set holds on a replicated stream.
const REPLICATED_CAS_SINCE: (u64, u64, u64) = (2, 10, 19);

/// Refuses `replicas > 1` against a server too old to compare-and-set correctly on it.
pub fn check_server(version: &str, replicas: usize) -> Result<()> {
    if replicas <= 1 {
        return Ok(());
    }
    let parsed = parse_version(version);
    if parsed.is_some_and(|v| v >= REPLICATED_CAS_SINCE) {
        return Ok(());
    }
    Err(Error::Config(format!(
        "--replicas {replicas} needs nats-server >= 2.10.19 (per-subject compare-and-set on a replicated \
         stream); this server is {version}: upgrade it, or run with --replicas 1"
    )))
}

fn parse_version(v: &str) -> Option<(u64, u64, u64)> {
    let core = v.trim_start_matches('v').split(['-', '+']).next()?;
    let mut parts = core.split('.').map(|p| p.parse::<u64>().ok());
    Some((parts.next()??, parts.next()??, parts.next().flatten().unwrap_or(0)))
}

/// Every way `current` differs from `wanted` that the bus will not adopt, as one message that
/// says how to fix it. `max_age`, direct gets and an absent per-subject limit are the bus's own
/// to update, so not compared.
pub fn check_stream(current: &Config, wanted: &Config) -> Result<()> {
    let mut diffs = Vec::new();
    if current.num_replicas.max(1) != wanted.num_replicas.max(1) {
        diffs.push(format!(
            "replicas: the stream has {}, --replicas asks for {}",
            current.num_replicas, wanted.num_replicas
        ));
    }
    if current.subjects != wanted.subjects {
        diffs.push(format!("subjects: the stream has {:?}, the bus needs {:?}", current.subjects, wanted.subjects));
    }
    if current.retention != RetentionPolicy::Limits {
        diffs.push(format!("retention: the stream has {:?}, the bus needs Limits", current.retention));
    }
    let per_subject = current.max_messages_per_subject;
    if per_subject > 0 && per_subject != super::PER_SUBJECT_LIMIT {
        diffs.push(format!(
            "per-subject limit: the stream keeps {per_subject} messages a subject and drops the older ones, the bus \
             needs every event of a signal or directive (no limit)"
        ));
    }
    let needed = super::append::ACCEPT_WINDOW * 2;
    if current.duplicate_window < needed {
        diffs.push(format!(
            "duplicate window: the stream has {:?}, the bus needs at least {needed:?} (a re-published append must be \
             recognised as the same event)",
            current.duplicate_window
        ));
    }
    if diffs.is_empty() {
        return Ok(());
    }
    Err(Error::Config(format!(
        "stream {} exists with another configuration ({}); the bus never rewrites it: change it with \
         `nats stream edit {}` (replicas, duplicate window, per-subject limit) or recreate it, or start with the matching --replicas",
        wanted.name,
        diffs.join("; "),
        wanted.name
    )))
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn config(replicas: usize) -> Config {
        Config {
            name: "SIGNALBUS".into(),
            subjects: vec!["signalbus.>".into()],
            num_replicas: replicas,
            duplicate_window: Duration::from_secs(120),
            ..Default::default()
        }
    }

    #[test]
    fn a_stream_with_another_replica_count_is_reported_not_adopted() {
        assert!(check_stream(&config(1), &config(1)).is_ok());
        let err = check_stream(&config(1), &config(3)).unwrap_err().to_string();
        assert!(err.contains("replicas: the stream has 1, --replicas asks for 3"), "{err}");
        assert!(err.contains("nats stream edit SIGNALBUS"), "{err}");
    }

    #[test]
    fn other_subjects_retention_or_a_short_duplicate_window_are_reported() {
        let mut other = config(1);
        other.subjects = vec!["elsewhere.>".into()];
        other.retention = RetentionPolicy::WorkQueue;
        other.duplicate_window = Duration::from_secs(1);
        let err = check_stream(&other, &config(1)).unwrap_err().to_string();
        assert!(err.contains("subjects") && err.contains("retention") && err.contains("duplicate window"), "{err}");
    }

    #[test]
    fn a_per_subject_limit_that_drops_events_is_reported_and_none_or_the_bus_own_is_not() {
        let mut limited = config(1);
        limited.max_messages_per_subject = 3;
        let err = check_stream(&limited, &config(1)).unwrap_err().to_string();
        assert!(err.contains("per-subject limit: the stream keeps 3 messages a subject"), "{err}");
        for fine in [-1, 0, crate::log::jetstream::PER_SUBJECT_LIMIT] {
            limited.max_messages_per_subject = fine;
            assert!(check_stream(&limited, &config(1)).is_ok(), "{fine}");
        }
    }

    #[test]
    fn replicas_need_a_server_with_a_correct_replicated_compare_and_set() {
        assert!(check_server("2.9.10", 1).is_ok());
        assert!(check_server("2.9.10", 3).unwrap_err().to_string().contains("2.10.19"));
        assert!(check_server("2.10.18", 3).is_err());
        assert!(check_server("2.10.19", 3).is_ok());
        assert!(check_server("2.15.1", 3).is_ok());
    }
}
