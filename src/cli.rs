//! The command line of CONTRACT §9: server roles and client verbs, every server flag also as a
//! `SIGNALBUS_<FLAG>` environment variable.
//!
//! Deliberately only parses: what each command does lives in `serve.rs` and `client/`.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};

#[derive(Debug, Parser)]
#[command(name = "signalbus", version, about = "An event-sourced signal bus for AI agents")]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

/// The server flags a single role does not use. They stay accepted (one environment file or
/// config file serves every role of a deployment) but are hidden from that role's `--help`, so
/// the help lists what the role reads.
const IGNORED_BY_ROLE: [(&str, &[&str]); 3] = [
    ("gateway", &["sweep_interval", "archive_after"]),
    ("projector", &["admin_token", "sweep_interval", "archive_after", "tls_cert", "tls_key", "node"]),
    ("sweeper", &["admin_token", "stale_after", "tls_cert", "tls_key"]),
];

/// The command line, with each role's help listing only the flags it reads.
pub fn command() -> clap::Command {
    let mut cmd = <Cli as clap::CommandFactory>::command();
    for (role, ignored) in IGNORED_BY_ROLE {
        cmd = cmd.mut_subcommand(role, |mut sub| {
            for &id in ignored {
                sub = sub.mut_arg(id, |a| a.hide(true));
            }
            sub
        });
    }
    cmd
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run gateway, projector and sweeper in one process (embedded without --nats-url/--database-url).
    Serve(ServerArgs),
    /// Run only the gateway role against NATS + PostgreSQL (flags other roles need are accepted
    /// and hidden, so one environment file serves every role).
    Gateway(ServerArgs),
    /// Run only the projector role against NATS + PostgreSQL.
    Projector(ServerArgs),
    /// Run only the sweeper role against NATS + PostgreSQL.
    Sweeper(ServerArgs),
    /// Manage agents (admin).
    #[command(subcommand)]
    Agent(crate::client::args::AgentCmd),
    /// Send, recall, show and list signals.
    #[command(subcommand)]
    Signal(crate::client::args::SignalCmd),
    /// Ask agents or groups to do work, and act on what you were asked.
    #[command(subcommand)]
    Directive(crate::client::directives::DirectiveCmd),
    /// Create groups and set their members (admin), join or leave them (agents), list them.
    #[command(subcommand)]
    Group(crate::client::groups::GroupCmd),
    /// Issue, list and revoke an agent's scoped or expiring tokens (admin).
    #[command(subcommand)]
    Token(crate::client::args::TokenCmd),
    /// Show (or drain) the caller's pending signals.
    Inbox(crate::client::args::InboxArgs),
    /// Receive signals as they arrive (a WebSocket session); --json prints one line each.
    Listen(crate::client::args::ListenArgs),
    /// Acknowledge signals delivered to you.
    Ack(crate::client::args::AckArgs),
    /// Read plugin state and facts.
    #[command(subcommand)]
    Plugin(crate::client::args::PluginCmd),
    /// Administrative operations.
    #[command(subcommand)]
    Admin(crate::client::args::AdminCmd),
    /// Check the stream, the database, projector lag and the read-model invariants.
    Doctor(crate::client::args::DoctorArgs),
    /// Serve MCP over stdio for a desktop agent, forwarding to a bus as the agent of --token.
    Mcp(crate::mcp::McpArgs),
    /// Print a commented config file with every key (`default`), or validate one (`check FILE`).
    #[command(subcommand)]
    Config(ConfigCmd),
    /// Print a shell completion script: `signalbus completions bash > /etc/bash_completion.d/signalbus`.
    Completions {
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
}

#[derive(Debug, Subcommand)]
pub enum ConfigCmd {
    /// Print a config file with every key, commented, at its default.
    Default,
    /// Validate a config file: unknown keys and bad values are errors; exit 0 when it is valid.
    Check {
        /// The TOML file to check.
        file: PathBuf,
    },
}

/// How log lines are written (to stderr).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    /// Human-readable lines, coloured only on a terminal.
    Text,
    /// One JSON object per line, for log collectors.
    Json,
}

/// Every flag but `--config` is also a key of the config file's `[server]` table (`config.rs`);
/// a flag or its environment variable wins over the file, the file over the default.
#[derive(Debug, Clone, Args)]
pub struct ServerArgs {
    /// Address the HTTP and WebSocket API listens on.
    #[arg(long, env = "SIGNALBUS_LISTEN", default_value = "127.0.0.1:7400")]
    pub listen: String,
    /// Serve `/metrics` only on this address, not on --listen: its labels name identities
    /// (`sender`), so deployments that expose the API may keep metrics on a private interface.
    #[arg(long, env = "SIGNALBUS_METRICS_LISTEN")]
    pub metrics_listen: Option<String>,
    /// Where the embedded store and the generated admin token live.
    #[arg(long, env = "SIGNALBUS_DATA_DIR", default_value = "./signalbus-data")]
    pub data_dir: PathBuf,
    /// NATS server(s) with JetStream, comma-separated for a cluster (distributed mode; needs
    /// --database-url too).
    #[arg(long, env = "SIGNALBUS_NATS_URL")]
    pub nats_url: Option<String>,
    /// PostgreSQL for the read models (distributed mode; needs --nats-url too).
    #[arg(long, env = "SIGNALBUS_DATABASE_URL")]
    pub database_url: Option<String>,
    /// Admin token; generated, printed once and kept in the data dir when absent.
    #[arg(long, env = "SIGNALBUS_ADMIN_TOKEN", hide_env_values = true)]
    pub admin_token: Option<String>,
    /// A session whose newest heartbeat is older than this is stale.
    #[arg(long, env = "SIGNALBUS_STALE_AFTER", default_value = "60s", value_parser = humantime::parse_duration)]
    pub stale_after: Duration,
    /// How often the sweeper scans for overdue signals its timers missed.
    #[arg(long, env = "SIGNALBUS_SWEEP_INTERVAL", default_value = "60s", value_parser = humantime::parse_duration)]
    pub sweep_interval: Duration,
    /// TOML config file: `[server]` (any flag), `[limits]`, `[types.Name]`; see `signalbus config default`.
    #[arg(long, env = "SIGNALBUS_CONFIG")]
    pub config: Option<PathBuf>,
    /// Replicas of the JetStream stream (a cluster; > 1 needs nats-server >= 2.10.19). A stream
    /// that exists with another count is reported at start, never changed.
    #[arg(long, env = "SIGNALBUS_REPLICAS", default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=5))]
    pub replicas: u16,
    /// JetStream stream name.
    #[arg(long, env = "SIGNALBUS_STREAM", default_value = "SIGNALBUS")]
    pub stream: String,
    /// How long the stream keeps events (and history keeps rows); a scheduled signal must end
    /// within it.
    #[arg(long, env = "SIGNALBUS_RETENTION", default_value = "30days", value_parser = humantime::parse_duration)]
    pub retention: Duration,
    /// Terminal rows older than this move from signal_queue to signal_history.
    #[arg(long, env = "SIGNALBUS_ARCHIVE_AFTER", default_value = "24h", value_parser = humantime::parse_duration)]
    pub archive_after: Duration,
    /// Name of this process in session records (default: host name and pid).
    #[arg(long, env = "SIGNALBUS_NODE")]
    pub node: Option<String>,
    /// PEM certificate chain: the gateway's listener serves HTTPS and `wss://` (needs --tls-key).
    #[arg(long, env = "SIGNALBUS_TLS_CERT")]
    pub tls_cert: Option<PathBuf>,
    /// PEM private key (PKCS#8, PKCS#1 or SEC1) of --tls-cert.
    #[arg(long, env = "SIGNALBUS_TLS_KEY")]
    pub tls_key: Option<PathBuf>,
    /// Log lines as `text` (coloured on a terminal) or `json` (one object a line).
    #[arg(long, env = "SIGNALBUS_LOG_FORMAT", value_enum, default_value = "text")]
    pub log_format: LogFormat,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shown_flags(role: &str) -> Vec<String> {
        let mut cmd = command();
        let sub = cmd.find_subcommand_mut(role).unwrap();
        sub.get_arguments().filter(|a| !a.is_hide_set()).filter_map(|a| a.get_long().map(str::to_string)).collect()
    }

    #[test]
    fn each_role_shows_only_the_flags_it_reads_and_accepts_the_rest() {
        assert!(shown_flags("serve").contains(&"sweep-interval".to_string()));
        assert!(!shown_flags("gateway").contains(&"sweep-interval".to_string()));
        assert!(shown_flags("gateway").contains(&"tls-cert".to_string()));
        assert!(!shown_flags("sweeper").contains(&"tls-cert".to_string()));
        assert!(!shown_flags("projector").contains(&"admin-token".to_string()));
        let m = command().try_get_matches_from(["signalbus", "gateway", "--sweep-interval", "5s"]);
        assert!(m.is_ok(), "a hidden flag is still accepted: {m:?}");
        command().debug_assert();
    }
}
