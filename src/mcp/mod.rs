//! `signalbus mcp --url URL --token T`: MCP over stdio for desktop agents (their configuration
//! starts a command), forwarding to a running bus — SPEC-071's shim. It holds a WebSocket
//! session of the agent (`kind: shim`), buffers the signals pushed to it, hands them over on
//! the next tool result and acks them then; each push is also announced to the client.
//!
//! Deliberately no bus logic: tools, schemas and argument checks are the gateway's
//! (`gateway::mcp`), answers are the bus's. Nothing but MCP is written to stdout.
//!
//! # Layout
//! - `inbox`: the WebSocket session and the buffer of pushed signals.
//! - `shim`: the MCP server forwarding each tool to the matching HTTP call.

mod inbox;
mod shim;

use std::sync::Arc;

use clap::Args;
use rmcp::ServiceExt;
use tokio_util::sync::CancellationToken;

use crate::client::args::DEFAULT_URL;

/// Longest wait for the bus to answer one forwarded call.
const CALL_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(60);

#[derive(Debug, Args)]
pub struct McpArgs {
    /// Base URL of the bus.
    #[arg(long, env = "SIGNALBUS_URL", default_value = DEFAULT_URL)]
    pub url: String,
    /// The agent's token (the agent this MCP client acts as).
    #[arg(long, env = "SIGNALBUS_TOKEN", hide_env_values = true)]
    pub token: String,
}

/// Runs the shim until the client closes stdin; returns the exit code (1: the bus refused the
/// token, 3: the bus cannot be reached — the CLI's codes).
pub async fn run(args: McpArgs) -> i32 {
    let base = args.url.trim_end_matches('/').to_string();
    let buffer = Arc::new(inbox::Buffer::default());
    let stop = CancellationToken::new();
    let session = match inbox::open(inbox::ws_url(&base), args.token.clone(), buffer.clone(), stop.clone()).await {
        Ok(task) => task,
        Err(inbox::OpenError::Refused { status, body }) => {
            eprintln!("error: the bus at {base} refused the session ({status}): {body}");
            return 1;
        }
        Err(inbox::OpenError::Unreachable(why)) => {
            eprintln!("error: {why}");
            return 3;
        }
    };
    // A call never hangs on a bus that stopped answering: past this it is answered
    // `internal` (the bus may have taken it; a send is retried with its dedupe_key).
    let api = match signalbus_client::HttpApi::new(&base, &args.token, Some(CALL_TIMEOUT)) {
        Ok(api) => api,
        Err(e) => {
            stop.cancel();
            let _ = session.await;
            eprintln!("error: {e}");
            return 2;
        }
    };
    let shim = shim::Shim { base, api, buffer, peer: Default::default(), quiet: Default::default() };
    shim.announce_pushes();
    let code = match shim.serve(rmcp::transport::stdio()).await {
        Ok(running) => match running.waiting().await {
            Ok(_) => 0,
            Err(e) => {
                eprintln!("error: mcp session ended: {e}");
                1
            }
        },
        Err(e) => {
            eprintln!("error: mcp initialization failed: {e}");
            1
        }
    };
    // The client is gone: close the bus session cleanly, so it is recorded closed at once.
    stop.cancel();
    let _ = session.await;
    code
}
