//! Test support: real servers for tests — private `nats-server` processes (either supported
//! release, alone or as a cluster) and throwaway PostgreSQL databases — and real third-party
//! clients (the MCP Python SDK), so no test mocks the stream, the database or a client.
//!
//! Deliberately not used by production code.
//!
//! # Layout
//! - `pg`: `TestDb`, a fresh database per test, dropped afterwards.
//! - `version`: `NatsVersion`, Debian's 2.9.10 or the current release `scripts/test` installs.
//! - `nats`: `NatsServer`, a private JetStream server per test group: pause (SIGSTOP), resume,
//!   stop, kill -9 and restart.
//! - `cluster`: `NatsCluster`, three nodes on loopback forming one JetStream cluster, with the
//!   stream leader and replica health as the JetStream API reports them.
//! - `process_signal`: `signal`, the same faults for any process (a bus role under test).
//! - `embedded`: `append_raw`, an event planted in the embedded log's file past the log and
//!   its codec.
//! - `mcp`: the official MCP Python SDK in a venv, and the runner of its scenario scripts.

pub mod cluster;
pub mod embedded;
pub mod mcp;
pub mod nats;
pub mod pg;
mod process_signal;
pub mod version;

pub use cluster::{NatsCluster, StreamHealth};
pub use nats::NatsServer;
pub use pg::TestDb;
pub use process_signal::signal;
pub use version::NatsVersion;
