//! TTL enforcement and retention. (filled by the sweeper issue)
