//! The WebSocket frames of CONTRACT §7 as OpenAPI schemas (components only: OpenAPI has no
//! way to describe frames on an upgraded connection, so `/v1/ws` points at these by name).
//!
//! Deliberately documentation types: `ws/frames.rs` decodes and encodes the real frames.

#![allow(dead_code)]

use serde::Serialize;
use serde_json::Value;
use utoipa::ToSchema;
use uuid::Uuid;

use super::schemas::{ErrorObject, PushedSignal, SendRequestBody};

/// `{"op":"send", ...send fields}`.
#[derive(Debug, Serialize, ToSchema)]
pub struct SendFrame {
    #[schema(pattern = "^send$")]
    pub op: String,
    #[serde(rename = "ref")]
    pub reference: Option<String>,
    #[serde(flatten)]
    pub send: SendRequestBody,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct RecallFrame {
    #[schema(pattern = "^recall$")]
    pub op: String,
    #[serde(rename = "ref")]
    pub reference: Option<String>,
    pub signal_id: String,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct AckFrame {
    #[schema(pattern = "^ack$")]
    pub op: String,
    #[serde(rename = "ref")]
    pub reference: Option<String>,
    #[schema(min_items = 1, max_items = 1000)]
    pub signal_ids: Vec<Uuid>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct FactFrame {
    #[schema(pattern = "^fact$")]
    pub op: String,
    #[serde(rename = "ref")]
    pub reference: Option<String>,
    pub plugin: String,
    pub fact_type: String,
    #[schema(value_type = Object)]
    pub state: Value,
}

/// `{"op":"ping"}`; any frame or WebSocket pong is a heartbeat too.
#[derive(Debug, Serialize, ToSchema)]
pub struct PingFrame {
    #[schema(pattern = "^ping$")]
    pub op: String,
    #[serde(rename = "ref")]
    pub reference: Option<String>,
}

/// Every frame a client may send.
#[derive(Debug, Serialize, ToSchema)]
#[serde(untagged)]
pub enum ClientFrame {
    Send(SendFrame),
    Recall(RecallFrame),
    Ack(AckFrame),
    Fact(FactFrame),
    Ping(PingFrame),
}

/// The first frame of every session.
#[derive(Debug, Serialize, ToSchema)]
pub struct WelcomeFrame {
    #[schema(pattern = "^welcome$")]
    pub op: String,
    pub session_id: Uuid,
    pub tenant: String,
    pub identity: String,
    pub heartbeat_interval_ms: u64,
}

/// The answer to a client frame; `ref` echoes the frame's.
#[derive(Debug, Serialize, ToSchema)]
pub struct ResultFrame {
    #[schema(pattern = "^result$")]
    pub op: String,
    #[serde(rename = "ref")]
    pub reference: Option<String>,
    pub ok: bool,
    /// With `ok: true`: the operation's answer (a send's is `SendAccepted`).
    pub result: Option<Value>,
    /// With `ok: false`.
    pub error: Option<ErrorObject>,
}

/// A pushed signal.
#[derive(Debug, Serialize, ToSchema)]
pub struct SignalFrame {
    #[schema(pattern = "^signal$")]
    pub op: String,
    pub signal: PushedSignal,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct PongFrame {
    #[schema(pattern = "^pong$")]
    pub op: String,
    #[serde(rename = "ref")]
    pub reference: Option<String>,
}

/// Every frame the bus sends.
#[derive(Debug, Serialize, ToSchema)]
#[serde(untagged)]
pub enum ServerFrame {
    Welcome(WelcomeFrame),
    Result(ResultFrame),
    Signal(SignalFrame),
    Pong(PongFrame),
}
