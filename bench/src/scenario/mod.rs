//! One module per scenario family; each returns a `report::Outcome`.
//!
//! Deliberately nothing shared here: shared pieces live in `bed`, `client`, `drive`, `raw`.

pub mod connections;
pub mod directives;
pub mod failover;
pub mod fanout;
pub mod loads;
pub mod memory;
pub mod peer;
pub mod projector;
pub mod rebuild;
pub mod schedule;
pub mod sweeper;
pub mod traffic;
pub mod waiters;
