//! `ConnLimits`: how many connections one process serves, how long each may stay silent, and
//! the certificate to serve them with.
//!
//! Deliberately only the numbers and their defaults: the listener enforces them, and
//! `GatewayConfig` and the binary's config file carry them.

use std::time::Duration;

use super::tls::Tls;

/// Limits on the connections one gateway process serves (`listener.rs`): part of `GatewayConfig`, owned here so the
/// listener needs nothing above it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConnLimits {
    /// Open connections at once, WebSocket sessions included; one more is answered 503 and
    /// closed. Default: the open-files limit less what the process needs for itself.
    pub max_connections: usize,
    /// A request head must arrive complete within this long: of connecting for the first
    /// request, of its first byte for later ones.
    pub header_read_timeout: Duration,
    /// A keep-alive connection that starts no new request for this long is closed.
    pub idle_timeout: Duration,
    /// Serve HTTPS and `wss://` with this certificate; `None`: plain HTTP.
    pub tls: Option<Tls>,
}

/// Descriptors kept for the process itself (stream, database pool, files, the runtime).
const RESERVED_FDS: u64 = 64;

impl Default for ConnLimits {
    fn default() -> Self {
        let soft = rlimit::getrlimit(rlimit::Resource::NOFILE).map_or(1024, |(soft, _)| soft);
        let max_connections = usize::try_from(soft.saturating_sub(RESERVED_FDS).max(16)).unwrap_or(usize::MAX);
        ConnLimits {
            max_connections,
            header_read_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(60),
            tls: None,
        }
    }
}
