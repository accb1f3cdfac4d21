//! The `signalbus` binary: parses the command line and hands over to a server role or a client
//! verb.
//!
//! Deliberately only wires crates together; no behaviour of the bus lives here.
//!
//! # Layout
//! - `cli`: the command line (clap).
//! - `serve`: opens log and read models for the mode and runs the roles.
//! - `client/`: the HTTP client verbs.
//! - `telemetry`: tracing and the Prometheus recorder.
//! - `admin_token`, `config`: the admin token and the config file.

mod admin_token;
mod cli;
mod client;
mod config;
mod serve;
mod telemetry;

use clap::Parser;

use cli::{Cli, Command};
use serve::Roles;

#[tokio::main]
async fn main() {
    let cli = Cli::parse();
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
            telemetry::init_tracing();
            match serve::run(roles, args).await {
                Ok(()) => 0,
                Err(e) => {
                    eprintln!("error: {e:#}");
                    1
                }
            }
        }
        (_, command) => client::run(command).await,
    };
    std::process::exit(code);
}
