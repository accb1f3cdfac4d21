//! The gateway's settings, with the contract's defaults.
//!
//! Deliberately does not read files or flags: the binary builds a `GatewayConfig`.

use std::sync::Arc;
use std::time::Duration;

use bus::catalog::TypeTable;
use bus::directive::IssuerPolicy;
use bus::send::SendLimits;

use crate::admin::AdminOps;
use crate::listener::ConnLimits;
use crate::ratelimit::{FactRate, SendRate};

/// Everything a gateway process is told at start.
#[derive(Clone)]
pub struct GatewayConfig {
    /// This process's name, written into `session.opened` so every node knows who holds what.
    pub node: String,
    /// Bearer token of the operator. Empty disables admin access altogether.
    pub admin_token: String,
    /// A session whose newest heartbeat is older than this is stale (CONTRACT §2).
    pub stale_after: Duration,
    /// Largest encoded signal payload (CONTRACT §4: 64 KiB).
    pub max_payload_bytes: usize,
    /// Per-type defaults (CONTRACT §3, with deployment overrides).
    pub types: TypeTable,
    /// The tenant used when an admin call names none.
    pub tenant_default: String,
    /// Frames a session may have queued for writing before it is closed as a slow consumer.
    pub outbound_buffer: usize,
    /// Largest inbound WebSocket message (CONTRACT §7: 1 MiB, close 1009 above).
    pub max_frame_bytes: usize,
    /// How long the ack batcher (`acks.rs`) holds a batch open after its first session's acks
    /// arrived, for other sessions' to join (what arrived during the previous append joins
    /// anyway). Zero: a pure group commit.
    pub ack_gather: Duration,
    /// How long a startup drain waits for the read models to reach the stream position.
    pub drain_wait: Duration,
    /// Rows asked of the read models per drain query.
    pub drain_batch: u32,
    /// How long a node that does not hold the preferred session waits before pushing anyway,
    /// so that a node whose presence view lags still delivers.
    pub push_grace: Duration,
    /// How long a send that resolved to a live WebSocket session waits for its push to be
    /// recorded. Past it, a sync send is answered `recipient_unavailable` (and can never be
    /// delivered later); an async one is answered `queued`.
    pub push_confirm_timeout: Duration,
    /// How long `run` waits for sessions to close at shutdown.
    pub shutdown_grace: Duration,
    /// Rebuild and doctor, when this process can reach the read models' owner (the binary
    /// wires `admin::ProjectorAdmin::shared`); without it the admin endpoints answer `unavailable`.
    pub admin_ops: Option<Arc<dyn AdminOps>>,
    /// Per-identity send quota of this process; `None` turns it off.
    pub send_rate: Option<SendRate>,
    /// Per-identity plugin fact quota of this process; `None` turns it off.
    pub fact_rate: Option<FactRate>,
    /// Encoded fact state one `GET /v1/plugins/{plugin}/facts` page stops at (past its first
    /// fact): what one read can make this process hold is bounded in bytes, not only rows.
    pub fact_page_bytes: usize,
    /// How many connections this process holds and how long they may stay silent.
    pub connections: ConnLimits,
    /// How far the read models may trail the stream: sends are paced from 3/5 of it, read as the
    /// oldest event not yet applied having waited that long, or what waits taking the projector
    /// that long to apply, and held past it (`backpressure.rs`); `None` never slows a send.
    pub max_projector_lag: Option<Duration>,
    /// Who may create which directives (`[directives.issuers]`); the default allows everyone.
    pub directive_issuers: IssuerPolicy,
    /// A directive's deadline when its create names none (`[directives] default_deadline`).
    pub directive_default_deadline: Duration,
    /// Most members a send to a group fans out to (`[limits] max_fanout`).
    pub max_fanout: usize,
    /// How long the stream keeps events (`--retention`): a scheduled signal whose `deliver_at +
    /// ttl` lies further out is refused (CONTRACT §16). `None` checks no bound.
    pub retention: Option<Duration>,
    /// JWT bearer tokens (`[auth]`, CONTRACT §17): checks their signature and claims; the
    /// binary calls its `reload` on SIGHUP. `None` accepts no JWT, only `sb_` tokens.
    pub jwt: Option<Arc<crate::jwt::JwtVerifier>>,
}

impl Default for GatewayConfig {
    fn default() -> Self {
        Self {
            node: "gateway".to_string(),
            admin_token: String::new(),
            stale_after: Duration::from_secs(60),
            max_payload_bytes: bus::send::DEFAULT_MAX_PAYLOAD_BYTES,
            types: TypeTable::default(),
            tenant_default: "default".to_string(),
            outbound_buffer: 1024,
            max_frame_bytes: 1024 * 1024,
            ack_gather: Duration::ZERO,
            drain_wait: Duration::from_secs(10),
            drain_batch: 500,
            push_grace: Duration::from_millis(250),
            push_confirm_timeout: Duration::from_secs(2),
            shutdown_grace: Duration::from_secs(5),
            admin_ops: None,
            send_rate: Some(SendRate::default()),
            fact_rate: Some(FactRate::default()),
            fact_page_bytes: 4 * 1024 * 1024,
            connections: ConnLimits::default(),
            max_projector_lag: Some(Duration::from_millis(100)),
            directive_issuers: IssuerPolicy::default(),
            directive_default_deadline: Duration::from_secs(bus::directive::DEFAULT_DEADLINE_SECONDS),
            max_fanout: bus::group::DEFAULT_MAX_FANOUT,
            retention: Some(Duration::from_secs(30 * 24 * 3600)),
            jwt: None,
        }
    }
}

impl GatewayConfig {
    /// How often the gateway pings a WebSocket and at most how often it records a heartbeat.
    pub fn heartbeat_interval(&self) -> Duration {
        (self.stale_after / 4).max(Duration::from_millis(10))
    }

    /// What every send is checked against: the payload limit and the stream's retention.
    pub fn send_limits(&self) -> SendLimits {
        SendLimits { max_payload_bytes: self.max_payload_bytes, retention: self.retention }
    }
}

// The admin token must never reach a log line.
impl std::fmt::Debug for GatewayConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GatewayConfig")
            .field("node", &self.node)
            .field("admin_token", &"<redacted>")
            .field("stale_after", &self.stale_after)
            .field("max_payload_bytes", &self.max_payload_bytes)
            .field("tenant_default", &self.tenant_default)
            .field("outbound_buffer", &self.outbound_buffer)
            .field("max_frame_bytes", &self.max_frame_bytes)
            .field("admin_ops", &self.admin_ops.is_some())
            .field("send_rate", &self.send_rate)
            .field("fact_rate", &self.fact_rate)
            .field("fact_page_bytes", &self.fact_page_bytes)
            .field("connections", &self.connections)
            .field("directive_issuers", &self.directive_issuers)
            .field("directive_default_deadline", &self.directive_default_deadline)
            .field("max_fanout", &self.max_fanout)
            .field("retention", &self.retention)
            .field("jwt", &self.jwt)
            .finish_non_exhaustive()
    }
}
