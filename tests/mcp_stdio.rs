//! `signalbus mcp` (CONTRACT §12, the stdio shim) driven by the official MCP Python SDK's stdio
//! client against an embedded `signalbus serve`: the same tools, sends, a waiting signal and a
//! live push handed over on the next tool result and acked, the announcement over stdio, bad
//! input, and the session closed when the client goes. A bad token fails the start.
//!
//! Deliberately black-box: the binary as a desktop agent's configuration starts it.

mod support;

use std::process::Command;
use std::time::Duration;

use serde_json::json;
use support::{serve, ADMIN, BIN};

#[test]
fn the_stdio_shim_serves_the_tools_and_hands_pushed_signals_over() {
    let server = serve();
    let args = json!({"url": server.url, "admin": ADMIN, "bin": BIN});
    testkit::mcp::run_scenario("stdio", &args.to_string(), Duration::from_secs(90));
}

#[test]
fn a_bad_token_fails_the_start_with_the_reason() {
    let server = serve();
    let out = Command::new(BIN).args(["mcp", "--url", &server.url, "--token", "sb_wrong"]).output().unwrap();
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("refused the session (401)") && err.contains("unauthorized"), "{err}");
    assert!(out.stdout.is_empty(), "nothing but MCP on stdout");
    let out = Command::new(BIN).args(["mcp", "--url", "http://127.0.0.1:9", "--token", "sb_x"]).output().unwrap();
    assert_eq!(out.status.code(), Some(3), "unreachable: {out:?}");
}
