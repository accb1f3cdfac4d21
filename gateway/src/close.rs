//! Why a session ended (`CloseReason`): the WebSocket close code and text it sends, and the
//! `reason` label it is counted and recorded under.
//!
//! Deliberately a leaf: every layer that ends a session names a reason, so this imports nothing
//! of the crate and decides no close itself.

/// Why a session ended: the WS close code sent and the `reason` label of
/// `signalbus_disconnects_total` (also written into `session.closed`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CloseReason {
    ClientClosed,
    Timeout,
    SlowConsumer,
    FrameTooLarge,
    /// A text frame that is not UTF-8 (RFC 6455 §8.1: close 1007).
    InvalidUtf8,
    /// Any other violation of RFC 6455 by the client (bad opcode, unmasked frame...: 1002).
    ProtocolError,
    TokenRotated,
    /// The agent was removed (`DELETE /v1/agents/{identity}`): 1008, like a rotated token.
    AgentRemoved,
    /// The session's token was revoked (CONTRACT §17): 1008.
    TokenRevoked,
    /// The session's token reached its expiry: 1008.
    TokenExpired,
    Shutdown,
    Error,
}

impl CloseReason {
    /// Every reason, for registering each `reason` label at start.
    pub const ALL: [CloseReason; 12] = [
        CloseReason::ClientClosed,
        CloseReason::Timeout,
        CloseReason::SlowConsumer,
        CloseReason::FrameTooLarge,
        CloseReason::InvalidUtf8,
        CloseReason::ProtocolError,
        CloseReason::TokenRotated,
        CloseReason::AgentRemoved,
        CloseReason::TokenRevoked,
        CloseReason::TokenExpired,
        CloseReason::Shutdown,
        CloseReason::Error,
    ];

    pub fn label(self) -> &'static str {
        match self {
            CloseReason::ClientClosed => "client_closed",
            CloseReason::Timeout => "timeout",
            CloseReason::SlowConsumer => "slow_consumer",
            CloseReason::FrameTooLarge => "frame_too_large",
            // One label for both: the close code tells them apart, and labels stay few.
            CloseReason::InvalidUtf8 | CloseReason::ProtocolError => "protocol_error",
            CloseReason::TokenRotated => "token_rotated",
            CloseReason::AgentRemoved => "agent_removed",
            CloseReason::TokenRevoked => "token_revoked",
            CloseReason::TokenExpired => "token_expired",
            CloseReason::Shutdown => "shutdown",
            CloseReason::Error => "error",
        }
    }

    pub fn code(self) -> u16 {
        match self {
            CloseReason::ClientClosed | CloseReason::Timeout => 1000,
            CloseReason::Shutdown => 1001,
            CloseReason::ProtocolError => 1002,
            CloseReason::InvalidUtf8 => 1007,
            CloseReason::TokenRotated
            | CloseReason::AgentRemoved
            | CloseReason::TokenRevoked
            | CloseReason::TokenExpired => 1008,
            CloseReason::FrameTooLarge => 1009,
            CloseReason::Error => 1011,
            CloseReason::SlowConsumer => 1013,
        }
    }

    /// The close frame's reason text (lowercase, for humans).
    pub fn text(self) -> &'static str {
        match self {
            CloseReason::ClientClosed => "closed",
            CloseReason::Timeout => "no heartbeat within twice the stale threshold",
            CloseReason::SlowConsumer => "slow consumer: outbound buffer full",
            CloseReason::FrameTooLarge => "frame exceeds the size limit",
            CloseReason::InvalidUtf8 => "text frame is not valid utf-8",
            CloseReason::ProtocolError => "websocket protocol error",
            CloseReason::TokenRotated => "token rotated",
            CloseReason::AgentRemoved => "agent removed",
            CloseReason::TokenRevoked => "token revoked",
            CloseReason::TokenExpired => "token expired",
            CloseReason::Shutdown => "server shutting down",
            CloseReason::Error => "internal error",
        }
    }
}
