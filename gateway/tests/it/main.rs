//! Gateway integration tests: a real WebSocket client and HTTP client against `gateway::run`
//! on the embedded stream with SQLite read models and a running projector.
//!
//! Deliberately one test binary (many modules): each binary links the whole stack, and the
//! shared 2-core build box pays for every link.

mod cluster;
mod connect_race;
mod drain;
mod frames;
mod identity;
mod inbox;
mod openapi;
mod piggyback;
mod plugins;
mod prop;
mod recall;
mod send_table;
mod support;
