//! Wires the roles together: opens the event log and the read models for the chosen mode,
//! then runs the gateway, projector and sweeper a command asked for until Ctrl-C.
//!
//! Deliberately holds no logic of its own: every behaviour lives in a library crate.

use std::path::Path;
use std::sync::Arc;

use anyhow::{bail, Context};
use bus::log::SharedLog;
use tokio_util::sync::CancellationToken;
use tracing::info;

use crate::cli::ServerArgs;
use crate::{admin_token, config, telemetry};

/// Which roles this process runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Roles {
    All,
    Gateway,
    Projector,
    Sweeper,
}

/// Where events and read models live.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Mode {
    Embedded,
    Distributed { nats_url: String, database_url: String },
}

impl Mode {
    pub fn from_args(args: &ServerArgs) -> anyhow::Result<Mode> {
        match (&args.nats_url, &args.database_url) {
            (None, None) => Ok(Mode::Embedded),
            (Some(n), Some(d)) => Ok(Mode::Distributed { nats_url: n.clone(), database_url: d.clone() }),
            (Some(_), None) => bail!("--nats-url needs --database-url too (or give neither to run embedded)"),
            (None, Some(_)) => bail!("--database-url needs --nats-url too (or give neither to run embedded)"),
        }
    }
}

pub async fn open_log(mode: &Mode, args: &ServerArgs) -> anyhow::Result<SharedLog> {
    Ok(match mode {
        Mode::Embedded => {
            let log = bus::log::embedded::EmbeddedLog::open(&args.data_dir)
                .await
                .with_context(|| format!("cannot open the embedded event log in {}", args.data_dir.display()))?;
            Arc::new(log)
        }
        Mode::Distributed { nats_url, .. } => {
            let config = bus::log::jetstream::JetStreamConfig { stream: args.stream.clone(), max_age: args.retention };
            let log = bus::log::jetstream::JetStreamLog::connect(nats_url, config)
                .await
                .with_context(|| format!("cannot reach NATS JetStream at {nats_url}"))?;
            Arc::new(log)
        }
    })
}

pub async fn open_models(mode: &Mode, data_dir: &Path) -> anyhow::Result<projector::ReadModels> {
    Ok(match mode {
        Mode::Embedded => projector::ReadModels::sqlite(data_dir)
            .await
            .with_context(|| format!("cannot open the embedded read models in {}", data_dir.display()))?,
        Mode::Distributed { database_url, .. } => projector::ReadModels::postgres(database_url)
            .await
            .context("cannot reach PostgreSQL (check --database-url)")?,
    })
}

pub async fn run(roles: Roles, args: ServerArgs) -> anyhow::Result<()> {
    let mode = Mode::from_args(&args)?;
    if roles != Roles::All && mode == Mode::Embedded {
        bail!("single roles run against NATS + PostgreSQL: give --nats-url and --database-url");
    }
    std::fs::create_dir_all(&args.data_dir)
        .with_context(|| format!("cannot create data dir {}", args.data_dir.display()))?;
    let metrics = telemetry::install_metrics()?;
    let config_file = config::load(args.config.as_deref())?;
    let types = config_file.types.clone();
    let log = open_log(&mode, &args).await?;
    let models = open_models(&mode, &args.data_dir).await?;
    let queries: Arc<dyn projector::queries::Queries> = Arc::new(models.clone());
    let cancel = CancellationToken::new();
    let mut tasks = tokio::task::JoinSet::new();

    if matches!(roles, Roles::All | Roles::Projector) {
        let config = projector::ProjectorConfig { stale_after: args.stale_after, ..Default::default() };
        let projector = projector::Projector::new(log.clone(), models.clone(), config);
        let c = cancel.clone();
        tasks.spawn(async move { projector.run(c).await.context("projector stopped") });
    }
    if matches!(roles, Roles::All | Roles::Sweeper) {
        let lease = match &mode {
            Mode::Embedded => sweeper::Lease::Local,
            Mode::Distributed { database_url, .. } => sweeper::Lease::Postgres { database_url: database_url.clone() },
        };
        let config = sweeper::SweeperConfig {
            sweep_interval: args.sweep_interval,
            archive_after: args.archive_after,
            retention: args.retention,
            types: types.clone(),
            lease,
            ..Default::default()
        };
        let sweeper = sweeper::Sweeper::new(log.clone(), queries.clone(), models.clone(), config);
        let c = cancel.clone();
        tasks.spawn(async move { sweeper.run(c).await.context("sweeper stopped") });
    }

    let listener = tokio::net::TcpListener::bind(&args.listen)
        .await
        .with_context(|| format!("cannot listen on {}", args.listen))?;
    info!(addr = %listener.local_addr()?, mode = ?mode_name(&mode), "listening");
    let shutdown = {
        let c = cancel.clone();
        async move {
            tokio::select! {
                _ = tokio::signal::ctrl_c() => info!("shutting down"),
                _ = c.cancelled() => {}
            }
            c.cancel();
        }
    };
    let server = if matches!(roles, Roles::All | Roles::Gateway) {
        let admin_token = admin_token::resolve(args.admin_token.clone(), &args.data_dir)?;
        let config = gateway::GatewayConfig {
            node: args.node.clone().unwrap_or_else(default_node),
            admin_token,
            stale_after: args.stale_after,
            types,
            admin_ops: Some(gateway::ProjectorAdmin::shared(log.clone(), models.clone())),
            send_rate: config_file.send_rate,
            ..Default::default()
        };
        let gw = gateway::Gateway::start(log.clone(), queries.clone(), config).await.context("gateway start")?;
        let router = gateway::app(gw.clone()).merge(telemetry::metrics_router(metrics));
        tokio::spawn(gateway::serve_router(listener, router, gw, shutdown))
    } else {
        let router = telemetry::ops_router(log.clone(), queries.clone()).merge(telemetry::metrics_router(metrics));
        tokio::spawn(async move { axum::serve(listener, router).with_graceful_shutdown(shutdown).await })
    };

    // The first role to fail stops the others: a half-running bus is worse than a stopped one.
    let outcome = tokio::select! {
        r = server => r.context("server task")?.context("server"),
        Some(r) = tasks.join_next() => r.context("role task")?,
    };
    cancel.cancel();
    while let Some(r) = tasks.join_next().await {
        r.context("role task")??;
    }
    outcome
}

fn mode_name(mode: &Mode) -> &'static str {
    match mode {
        Mode::Embedded => "embedded",
        Mode::Distributed { .. } => "distributed",
    }
}

fn default_node() -> String {
    let host = std::fs::read_to_string("/etc/hostname").map(|h| h.trim().to_string()).unwrap_or_default();
    let host = if host.is_empty() { "node".to_string() } else { host };
    format!("{host}-{}", std::process::id())
}
