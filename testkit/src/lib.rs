//! Test support: real servers for tests — private `nats-server` processes and throwaway
//! PostgreSQL databases — so no test mocks the stream or the database.
//!
//! Deliberately not used by production code.
//!
//! # Layout
//! - `pg`: `TestDb`, a fresh database per test, dropped afterwards.
//! - `nats`: `NatsServer`, a private JetStream server per test group, stoppable and restartable.

pub mod nats;
pub mod pg;

pub use nats::NatsServer;
pub use pg::TestDb;
