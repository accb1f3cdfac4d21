//! Test support. (placeholder)
