//! The client verbs of CONTRACT §9 (`agent`, `signal`, `inbox`, `plugin`, `admin`, `doctor`):
//! each is one or two HTTP calls to a running bus, printed as a table or, with `--json`, as the
//! bus's own JSON.
//!
//! Deliberately no logic the server has: the CLI never decides, it asks. Exit codes: 0 ok,
//! 1 the bus answered an error, 2 usage (clap), 3 the bus is unreachable.

mod http;
mod render;
mod verbs;

use clap::{Args, Subcommand};

pub use verbs::run;

pub const DEFAULT_URL: &str = "http://127.0.0.1:7400";

#[derive(Debug, Clone, Args)]
pub struct Conn {
    /// Base URL of a running bus.
    #[arg(long, env = "SIGNALBUS_URL", default_value = DEFAULT_URL, global = true)]
    pub url: String,
    /// Bearer token (agent or admin); default: the admin token in ./signalbus-data when present.
    #[arg(long, env = "SIGNALBUS_TOKEN", hide_env_values = true, global = true)]
    pub token: Option<String>,
    /// Print the bus's JSON instead of a table.
    #[arg(long, global = true)]
    pub json: bool,
}

#[derive(Debug, Subcommand)]
pub enum AgentCmd {
    /// Register an agent and print its token.
    Add {
        identity: String,
        #[arg(long, default_value = "default")]
        tenant: String,
        #[arg(long, default_value = "interactive")]
        kind: String,
        #[command(flatten)]
        conn: Conn,
    },
    /// List agents with their recipient state.
    List {
        #[arg(long)]
        tenant: Option<String>,
        #[command(flatten)]
        conn: Conn,
    },
    /// Rotate an agent's token (the old one stops working at once).
    Rotate {
        identity: String,
        #[arg(long, default_value = "default")]
        tenant: String,
        #[command(flatten)]
        conn: Conn,
    },
}

#[derive(Debug, Subcommand)]
pub enum SignalCmd {
    /// Send a signal as the authenticated agent.
    Send {
        to: String,
        #[arg(long = "type")]
        signal_type: String,
        /// JSON payload.
        #[arg(long, default_value = "{}")]
        payload: String,
        #[arg(long)]
        delivery_class: Option<String>,
        #[arg(long)]
        ttl_seconds: Option<u64>,
        #[arg(long)]
        correlation_id: Option<String>,
        #[arg(long)]
        dedupe_key: Option<String>,
        #[command(flatten)]
        conn: Conn,
    },
    /// Recall a signal you sent.
    Recall {
        signal_id: String,
        #[command(flatten)]
        conn: Conn,
    },
    /// Show one signal.
    Show {
        signal_id: String,
        #[command(flatten)]
        conn: Conn,
    },
    /// List your signals, newest first.
    List {
        #[arg(long)]
        role: Option<String>,
        #[arg(long)]
        status: Option<String>,
        #[arg(long)]
        limit: Option<u32>,
        #[command(flatten)]
        conn: Conn,
    },
}

#[derive(Debug, Args)]
pub struct InboxArgs {
    /// Deliver the pending signals (delivered_via inbox) instead of only listing them.
    #[arg(long)]
    pub drain: bool,
    #[command(flatten)]
    pub conn: Conn,
}

#[derive(Debug, Subcommand)]
pub enum PluginCmd {
    /// The plugin's compatibility state.
    State {
        plugin: String,
        #[command(flatten)]
        conn: Conn,
    },
    /// The plugin's facts, newest first.
    Facts {
        plugin: String,
        #[arg(long)]
        fact_type: Option<String>,
        #[arg(long)]
        limit: Option<u32>,
        #[command(flatten)]
        conn: Conn,
    },
}

#[derive(Debug, Subcommand)]
pub enum AdminCmd {
    /// Rebuild every read model from the stream.
    Rebuild {
        #[command(flatten)]
        conn: Conn,
    },
}

#[derive(Debug, Args)]
pub struct DoctorArgs {
    #[command(flatten)]
    pub conn: Conn,
}
