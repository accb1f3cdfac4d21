//! Gateway integration tests: a real WebSocket client and HTTP client against `gateway::run`
//! on the embedded stream with SQLite read models and a running projector.
//!
//! Deliberately one test binary (many modules): each binary links the whole stack, and the
//! shared 2-core build box pays for every link.

mod bounds;
mod cluster;
mod connect_race;
mod connections;
mod depth;
mod directives;
mod drain;
mod edges;
mod fact_pages;
mod force_expire;
mod frames;
mod groups;
mod identity;
mod inbox;
mod jwt;
mod mcp;
mod openapi;
mod paths;
mod piggyback;
mod plugins;
mod poison;
mod prop;
mod recall;
mod removal;
mod scheduled;
mod send_table;
mod support;
mod tokens;
mod waiting;
