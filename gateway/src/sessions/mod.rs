//! Bus sessions: who is connected where and how to reach them — the sessions this process
//! holds (`hub`), every session on the stream (`presence`), the events of a session's life
//! (`lifecycle`, the one place that builds `session.*`), the piggyback heartbeat throttle
//! (`heartbeats`), and the closing of sessions nobody else will close (`reaper`). The agents
//! and their tokens are `agent_registry`, a leaf below.
//!
//! Deliberately knows no wire format and delivers nothing: `api/` speaks to clients and
//! `delivery/` hands signals to the sessions found here.

pub mod heartbeats;
pub mod hub;
pub mod lifecycle;
pub mod presence;
pub mod reaper;
