//! The `signalbus` binary: parses the command line and hands over to a server role or a client
//! verb.
//!
//! Deliberately only wires crates together; no behaviour of the bus lives here.
//!
//! # Layout
//! - `cli`: the command line (clap).
//! - `serve`: opens log and read models for the mode and runs the roles.
//! - `client/`: the HTTP client verbs.
//! - `mcp/`: `signalbus mcp`, MCP over stdio forwarding to a bus (the desktop agents' shim).
//! - `telemetry`: tracing and the Prometheus recorder.
//! - `admin_token`, `config`: the admin token and the config file (`config.default.toml`).
//! - `tls`: the listener's certificate and key, read into a rustls server config.

// mimalloc rather than glibc malloc: allocation was ~25% of the bus at saturation and
// mimalloc measured faster; see docs/performance.md, "Allocator".
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

mod admin_token;
mod cli;
mod client;
mod config;
mod mcp;
mod serve;
mod telemetry;
mod tls;

use clap::FromArgMatches;

use cli::{Cli, Command, ConfigCmd};
use serve::Roles;

#[tokio::main]
async fn main() {
    let matches = cli::command().get_matches();
    let cli = Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.exit());
    let roles = match &cli.command {
        Command::Serve(_) => Some(Roles::All),
        Command::Gateway(_) => Some(Roles::Gateway),
        Command::Projector(_) => Some(Roles::Projector),
        Command::Sweeper(_) => Some(Roles::Sweeper),
        _ => None,
    };
    let code = match (roles, cli.command) {
        (
            Some(roles),
            Command::Serve(args) | Command::Gateway(args) | Command::Projector(args) | Command::Sweeper(args),
        ) => {
            let sub = matches.subcommand().map(|(_, m)| m).expect("a server subcommand");
            let resolved = config::resolve(args, sub);
            let log_format = resolved.as_ref().map_or(cli::LogFormat::Text, |(a, _)| a.log_format);
            telemetry::init_tracing(log_format);
            let outcome = match resolved {
                Ok(resolved) => serve::run(roles, resolved).await,
                Err(e) => Err(e),
            };
            match outcome {
                Ok(()) => 0,
                Err(e) => {
                    eprintln!("error: {}", cause_chain(&e));
                    1
                }
            }
        }
        (_, Command::Config(ConfigCmd::Default)) => {
            print!("{}", config::DEFAULT_FILE);
            0
        }
        (_, Command::Config(ConfigCmd::Check { file })) => match config::check(&file) {
            Ok(()) => {
                println!("{}: ok", file.display());
                0
            }
            Err(e) => {
                eprintln!("error: {}", cause_chain(&e));
                1
            }
        },
        (_, Command::Mcp(args)) => {
            // stdout carries MCP: logs go to stderr only.
            telemetry::init_tracing(cli::LogFormat::Text);
            mcp::run(args).await
        }
        (_, Command::Completions { shell }) => {
            // Into a buffer first: clap_complete panics on a write error, and a closed pipe
            // (`signalbus completions zsh | head`) is not an error worth a panic.
            let mut script = Vec::new();
            clap_complete::generate(shell, &mut cli::command(), "signalbus", &mut script);
            let _ = std::io::Write::write_all(&mut std::io::stdout().lock(), &script);
            0
        }
        (_, command) => client::run(command).await,
    };
    std::process::exit(code);
}

/// The error and its causes, joined by `: `, each said once: a layer whose message already
/// contains its cause's (sqlx and our own error enums often repeat it) hides that cause.
fn cause_chain(e: &anyhow::Error) -> String {
    let mut parts: Vec<String> = Vec::new();
    for cause in e.chain() {
        let text = cause.to_string();
        if parts.iter().any(|p| p.contains(&text)) {
            continue;
        }
        parts.push(text);
    }
    parts.join(": ")
}

#[cfg(test)]
mod tests {
    #[test]
    fn each_cause_is_said_once() {
        let inner = anyhow::anyhow!("database \"x\" does not exist");
        let mid = inner.context("read models: database \"x\" does not exist");
        let outer = mid.context("cannot open the read models");
        assert_eq!(
            super::cause_chain(&outer),
            "cannot open the read models: read models: database \"x\" does not exist"
        );
    }
}
