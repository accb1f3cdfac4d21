//! A private nats-server per test (to be written).
