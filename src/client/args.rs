//! The client verbs' command line: the connection flags every verb takes (`Conn`), and the
//! subcommands and arguments of `agent`, `signal`, `inbox`, `listen`, `ack`, `plugin`, `admin`
//! and `doctor` (`directive` and `group` keep theirs in `directives.rs` and `groups.rs`,
//! `admin expire` in `expire.rs`, `token` and `admin token` in `tokens.rs`).
//!
//! Deliberately only clap types: `verbs.rs` runs them, `cli.rs` puts them into the command tree.

use clap::{Args, Subcommand};

pub const DEFAULT_URL: &str = "http://127.0.0.1:7400";

#[derive(Debug, Clone, Args)]
pub struct Conn {
    /// Base URL of a running bus (http:// or https://).
    #[arg(long, env = "SIGNALBUS_URL", default_value = DEFAULT_URL, global = true)]
    pub url: String,
    /// Bearer token (agent or admin); default: the admin token `signalbus serve` keeps in its
    /// data dir ($SIGNALBUS_DATA_DIR, else ./signalbus-data).
    #[arg(long, env = "SIGNALBUS_TOKEN", hide_env_values = true, global = true)]
    pub token: Option<String>,
    /// Print the bus's JSON instead of a table.
    #[arg(long, global = true)]
    pub json: bool,
}

#[derive(Debug, Subcommand)]
pub enum AgentCmd {
    /// Register an agent and print its token (shown once).
    Add {
        /// The agent's name in its tenant (`signalbus` is reserved for the bus itself).
        identity: String,
        /// The tenant to register it in.
        #[arg(long, default_value = "default")]
        tenant: String,
        /// What kind of client it is: daemon, shim or interactive.
        #[arg(long, default_value = "interactive")]
        kind: String,
        #[command(flatten)]
        conn: Conn,
    },
    /// List agents with their recipient state.
    List {
        /// The tenant to list (admin; an agent sees its own).
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
    /// Remove an agent: its token stops working, its sessions close, sends to it are refused as
    /// unknown_recipient and its pending signals expire; its history stays, and the identity
    /// may be registered again (with a new token).
    Remove {
        identity: String,
        #[arg(long, default_value = "default")]
        tenant: String,
        #[command(flatten)]
        conn: Conn,
    },
}

#[derive(Debug, Subcommand)]
pub enum SignalCmd {
    /// Send a signal as the authenticated agent. Its type sets the defaults (class, TTL,
    /// priority: see `signalbus signal types`); a sync signal to a recipient that is not
    /// connected bounces instead of queueing.
    Send {
        /// The recipient's identity, or @group: one signal to each member but you, all with one
        /// fanout_id, printed one line per member.
        to: String,
        /// The signal type, e.g. Question, Blocker, TaskAssigned, StatusUpdate (any name
        /// matching ^[A-Za-z][A-Za-z0-9_.]{0,63}$; unknown types get the async defaults).
        #[arg(long = "type")]
        signal_type: String,
        /// JSON payload (values under secret-looking keys are stored as "[REDACTED]").
        #[arg(long, default_value = "{}")]
        payload: String,
        /// sync (pushed now or bounced) or async (pushed now or queued); default: the type's.
        #[arg(long, value_parser = ["sync", "async"])]
        delivery_class: Option<String>,
        /// How long the signal may wait for delivery, 1 to 2592000 seconds; default: the type's.
        #[arg(long)]
        ttl_seconds: Option<u64>,
        /// Free text (at most 64 characters) copied onto every event of the signal.
        #[arg(long)]
        correlation_id: Option<String>,
        /// Sending again with the same key (same sender) answers the first signal instead of
        /// creating another (at most 200 characters).
        #[arg(long)]
        dedupe_key: Option<String>,
        /// Schedule it: deliver after this long, e.g. 90s, 1h, 2days (at most 30 days; async
        /// only). The recipient cannot see it until then; its TTL counts from then.
        #[arg(long, value_parser = humantime::parse_duration, conflicts_with = "at")]
        after: Option<std::time::Duration>,
        /// Schedule it: deliver at this time, RFC 3339 (e.g. 2026-11-21T09:30:00Z), in the future
        /// and at most 30 days ahead (async only).
        #[arg(long)]
        at: Option<String>,
        #[command(flatten)]
        conn: Conn,
    },
    /// Print the per-type defaults (class, TTL, category, priority) built into this binary; a
    /// deployment may override them with `[types]` in its config file.
    Types {
        #[command(flatten)]
        conn: Conn,
    },
    /// Recall a signal you sent, or every signal of one fan-out or one conversation.
    #[command(group(clap::ArgGroup::new("which").required(true).args(["signal_id", "fanout", "correlation"])))]
    Recall {
        /// The signal's id.
        signal_id: Option<String>,
        /// Recall each signal of this fan-out (the fanout_id a send to @group answered).
        #[arg(long)]
        fanout: Option<String>,
        /// Recall each of your signals with this correlation id.
        #[arg(long)]
        correlation: Option<String>,
        #[command(flatten)]
        conn: Conn,
    },
    /// Show the conversation a signal belongs to: your signals with its correlation id, oldest
    /// first (the signal alone when it has none).
    Thread {
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
    /// List your signals, newest first, with their status.
    List {
        /// sent or received (default: both).
        #[arg(long)]
        role: Option<String>,
        /// pending, delivered, expired or recalled (default: all).
        #[arg(long)]
        status: Option<String>,
        /// At most this many rows, 1 to 1000.
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
    /// Wait up to this long (at most 60s) for a signal when none is pending: the answer comes
    /// as soon as one is, or empty after the wait.
    #[arg(long, value_parser = humantime::parse_duration)]
    pub wait: Option<std::time::Duration>,
    #[command(flatten)]
    pub conn: Conn,
}

/// `signalbus listen`: one WebSocket session, printing signals as they arrive.
#[derive(Debug, Args)]
pub struct ListenArgs {
    /// Ack each signal once it is printed (otherwise it is redelivered on the next session).
    #[arg(long)]
    pub ack: bool,
    /// Stop after this many signals (default: until interrupted or the bus closes the session).
    #[arg(long)]
    pub count: Option<u64>,
    /// The session's kind: daemon, shim or interactive.
    #[arg(long, default_value = "interactive", value_parser = ["daemon", "shim", "interactive"])]
    pub kind: String,
    #[command(flatten)]
    pub conn: Conn,
}

/// `signalbus ack`: acknowledge signals delivered to you.
#[derive(Debug, Args)]
pub struct AckArgs {
    /// Ids of signals delivered to the token's agent.
    #[arg(required = true)]
    pub signal_ids: Vec<String>,
    #[command(flatten)]
    pub conn: Conn,
}

#[derive(Debug, Subcommand)]
pub enum PluginCmd {
    /// Record a plugin fact (you own the plugin names `<identity>` and `<identity>/...`).
    Fact {
        plugin: String,
        /// The fact's type, 1 to 128 characters.
        #[arg(long)]
        fact_type: String,
        /// The fact's state: a JSON object (at most 1 MiB); it becomes the plugin's state.
        #[arg(long, default_value = "{}")]
        state: String,
        #[command(flatten)]
        conn: Conn,
    },
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
    /// Force-expire a tenant's pending signals by filter (at least one besides --tenant); each
    /// races its delivery on the stream, so none ends both delivered and expired.
    Expire(ExpireArgs),
    /// Create, list and revoke tenant admin tokens (an admin inside one tenant only).
    #[command(subcommand)]
    Token(AdminTokenCmd),
}

#[derive(Debug, Args)]
pub struct DoctorArgs {
    #[command(flatten)]
    pub conn: Conn,
}

/// `signalbus admin expire`: the operator's force-expire (CONTRACT §16).
#[derive(Debug, Args)]
pub struct ExpireArgs {
    /// The tenant whose pending signals to expire (required, with at least one filter below).
    #[arg(long)]
    pub tenant: String,
    /// Only signals to this identity.
    #[arg(long)]
    pub to: Option<String>,
    /// Only signals from this identity.
    #[arg(long)]
    pub from: Option<String>,
    /// Only signals of this type.
    #[arg(long = "type", value_name = "TYPE")]
    pub signal_type: Option<String>,
    /// Only signals created at least this long ago (e.g. 90s, 1h, 7days).
    #[arg(long, value_parser = humantime::parse_duration)]
    pub older_than: Option<std::time::Duration>,
    /// Only these signals (the flag repeats, or takes several ids).
    #[arg(long = "id", value_name = "ID", num_args = 1..)]
    pub ids: Vec<String>,
    /// Expire nothing; list what would expire.
    #[arg(long)]
    pub dry_run: bool,
    #[command(flatten)]
    pub conn: Conn,
}

// `signalbus token …` and `signalbus admin token …` (their runs: `tokens.rs`).

/// The scopes of CONTRACT §17, in the order the bus lists them.
pub const SCOPES: [&str; 6] = ["send", "receive", "recall", "facts", "directives", "read"];

#[derive(Debug, Subcommand)]
pub enum TokenCmd {
    /// Issue another token for an agent, limited to some scopes and/or expiring; prints its
    /// secret once (admin, or a tenant admin of the agent's tenant).
    Issue {
        /// The agent the token acts as.
        identity: String,
        /// The agent's tenant.
        #[arg(long, default_value = "default")]
        tenant: String,
        /// A scope the token holds (repeat the flag, or separate with commas); default: every
        /// scope (send, receive, recall, facts, directives, read).
        #[arg(long = "scope", value_name = "SCOPE", value_delimiter = ',', value_parser = SCOPES)]
        scopes: Vec<String>,
        /// The token stops working after this long, e.g. 1h, 30d (whole seconds, at most 10 years);
        /// default: never.
        #[arg(long, value_parser = humantime::parse_duration)]
        expires_in: Option<std::time::Duration>,
        /// A name to tell the token by in `token list` (at most 128 characters).
        #[arg(long)]
        label: Option<String>,
        #[command(flatten)]
        conn: Conn,
    },
    /// List an agent's tokens without their secrets: the registration token first, then those
    /// issued and not revoked (an expired one with EXPIRED true).
    List {
        identity: String,
        #[arg(long, default_value = "default")]
        tenant: String,
        #[command(flatten)]
        conn: Conn,
    },
    /// Revoke one of an agent's issued tokens: it stops working at once and its sessions close
    /// (the registration token is replaced with `agent rotate` instead).
    Revoke {
        identity: String,
        /// The token's id, as `token issue` and `token list` show it.
        token_id: String,
        #[arg(long, default_value = "default")]
        tenant: String,
        #[command(flatten)]
        conn: Conn,
    },
}

#[derive(Debug, Subcommand)]
pub enum AdminTokenCmd {
    /// Create a tenant admin token: an admin inside that tenant only; prints its secret once
    /// (the global admin only).
    Create {
        /// The tenant it administers.
        #[arg(long)]
        tenant: String,
        /// A name to tell the token by in `admin token list`.
        #[arg(long)]
        label: Option<String>,
        #[command(flatten)]
        conn: Conn,
    },
    /// List the tenant admin tokens, without their secrets (a tenant admin sees its own tenant's).
    List {
        /// Only this tenant's.
        #[arg(long)]
        tenant: Option<String>,
        #[command(flatten)]
        conn: Conn,
    },
    /// Revoke a tenant admin token: it stops working at once (the global admin only).
    Revoke {
        /// The token's id, as `admin token create` and `admin token list` show it.
        token_id: String,
        #[command(flatten)]
        conn: Conn,
    },
}
