//! Wires the roles together: opens the event log and the read models for the chosen mode,
//! then runs the gateway, projector and sweeper a command asked for until SIGTERM or SIGINT,
//! and stops them in order (gateway first, while the stream is open). A gateway with `[auth]`
//! JWT settings re-reads its JWKS file on SIGHUP.
//!
//! Deliberately holds no logic of its own: every behaviour lives in a library crate.

use std::path::Path;
use std::sync::Arc;

use anyhow::{bail, Context};
use axum::Router;
use bus::log::embedded::Durability;
use bus::log::SharedLog;
use tokio_util::sync::CancellationToken;
use tracing::info;

use crate::cli::ServerArgs;
use crate::{admin_token, config, telemetry, tls};

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

pub async fn open_log(mode: &Mode, args: &ServerArgs, durability: Durability) -> anyhow::Result<SharedLog> {
    Ok(match mode {
        Mode::Embedded => {
            let log = bus::log::embedded::EmbeddedLog::open_with(&args.data_dir, durability)
                .await
                .with_context(|| format!("cannot open the embedded event log in {}", args.data_dir.display()))?;
            Arc::new(log)
        }
        Mode::Distributed { nats_url, .. } => {
            let config = bus::log::jetstream::JetStreamConfig {
                stream: args.stream.clone(),
                max_age: args.retention,
                replicas: usize::from(args.replicas),
                ..Default::default()
            };
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

pub async fn run(roles: Roles, (args, config_file): (ServerArgs, config::Config)) -> anyhow::Result<()> {
    let mode = Mode::from_args(&args)?;
    if roles != Roles::All && mode == Mode::Embedded {
        bail!("single roles run against NATS + PostgreSQL: give --nats-url and --database-url");
    }
    bus::files::private_dir(&args.data_dir)
        .with_context(|| format!("cannot create data dir {}", args.data_dir.display()))?;
    let metrics = telemetry::install_metrics()?;
    // Read before anything starts: a bad certificate stops the process at once.
    let tls = match (&args.tls_cert, &args.tls_key) {
        (Some(cert), Some(key)) => Some(tls::server_config(cert, key)?),
        _ => None,
    };
    if tls.is_some() && matches!(roles, Roles::Projector | Roles::Sweeper) {
        tracing::warn!("--tls-cert/--tls-key apply to the gateway's listener; this role serves plain HTTP");
    }
    // The JWKS file too: one that cannot be read or holds no usable key stops the process at
    // once. Only the roles that serve the gateway check JWTs.
    let jwt = if matches!(roles, Roles::All | Roles::Gateway) { config_file.jwt_verifier()? } else { None };
    if let Some(verifier) = &jwt {
        let settings = config_file.jwt.as_ref();
        info!(
            hs256 = settings.is_some_and(|s| s.hs256_secret.is_some()),
            jwks_file = ?verifier.jwks_file(),
            "jwt bearer tokens accepted"
        );
        reload_jwks_on_sighup(verifier.clone());
    }
    let types = config_file.types.clone();
    telemetry::init_series(
        matches!(roles, Roles::All | Roles::Gateway),
        matches!(roles, Roles::All | Roles::Projector),
        matches!(roles, Roles::All | Roles::Sweeper),
        &types,
    );
    let log = open_log(&mode, &args, config_file.embedded_durability).await?;
    let models = open_models(&mode, &args.data_dir).await?;
    let queries: Arc<dyn projector::queries::Queries> = Arc::new(models.clone());
    let cancel = CancellationToken::new();
    let mut tasks = tokio::task::JoinSet::new();

    if matches!(roles, Roles::All | Roles::Projector) {
        // Several projectors may run on one database: one leads, the others stand by.
        let lease = match &mode {
            Mode::Embedded => projector::lease::Lease::Local,
            Mode::Distributed { database_url, .. } => projector::lease::Lease::Postgres {
                database_url: database_url.clone(),
                key: projector::lease::PROJECTOR_LEASE_KEY,
            },
        };
        let config = projector::ProjectorConfig { stale_after: args.stale_after, lease, ..Default::default() };
        let projector = projector::Projector::new(log.clone(), models.clone(), config);
        let c = cancel.clone();
        tasks.spawn(async move { projector.run_on_own_thread(c).await.context("projector stopped") });
    }
    if matches!(roles, Roles::All | Roles::Sweeper) {
        let lease = match &mode {
            Mode::Embedded => sweeper::Lease::Local,
            Mode::Distributed { database_url, .. } => sweeper::Lease::Postgres { database_url: database_url.clone() },
        };
        let mut config = sweeper::SweeperConfig {
            sweep_interval: args.sweep_interval,
            archive_after: args.archive_after,
            retention: args.retention,
            types: types.clone(),
            lease,
            ..Default::default()
        };
        // The status fact's `leader`: the name given to this process, when one is.
        if let Some(node) = &args.node {
            config.node = node.clone();
        }
        let sweeper = sweeper::Sweeper::new(log.clone(), queries.clone(), models.clone(), config);
        let c = cancel.clone();
        tasks.spawn(async move { sweeper.run(c).await.context("sweeper stopped") });
    }

    let listener = tokio::net::TcpListener::bind(&args.listen)
        .await
        .with_context(|| format!("cannot listen on {}", args.listen))?;
    info!(addr = %listener.local_addr()?, mode = ?mode_name(&mode), tls = args.tls_cert.is_some(), "listening");
    // SIGTERM (systemd, Docker, Kubernetes) and SIGINT (Ctrl-C) both stop the process gracefully.
    let stop = CancellationToken::new();
    tokio::spawn(stop_on_signal(stop.clone()));
    let shutdown = stop.clone().cancelled_owned();
    // `/metrics` goes on its own listener when asked, and then nowhere else.
    let metrics = match &args.metrics_listen {
        Some(addr) => {
            let limits = gateway::ConnLimits { tls: None, ..config_file.connections.clone() };
            serve_metrics(addr, telemetry::metrics_router(metrics), limits, cancel.clone()).await?;
            Router::new()
        }
        None => telemetry::metrics_router(metrics),
    };
    let server = if matches!(roles, Roles::All | Roles::Gateway) {
        let admin_token = match &mode {
            Mode::Embedded => admin_token::resolve(args.admin_token.clone(), &args.data_dir)?,
            // Every gateway must agree on who is admin: one token, given to all of them.
            Mode::Distributed { .. } => args.admin_token.clone().filter(|t| !t.is_empty()).context(
                "a gateway on NATS + PostgreSQL needs --admin-token (or SIGNALBUS_ADMIN_TOKEN): every gateway \
                 must be given the same one, so none generates its own",
            )?,
        };
        let config = gateway::GatewayConfig {
            node: args.node.clone().unwrap_or_else(default_node),
            admin_token,
            stale_after: args.stale_after,
            types,
            admin_ops: Some(gateway::ProjectorAdmin::shared(log.clone(), models.clone())),
            send_rate: config_file.send_rate,
            fact_rate: config_file.fact_rate,
            connections: gateway::ConnLimits { tls: tls.map(gateway::Tls::new), ..config_file.connections.clone() },
            directive_issuers: config_file.directive_issuers.clone(),
            directive_default_deadline: config_file.directive_default_deadline,
            max_fanout: config_file.max_fanout,
            retention: Some(args.retention),
            jwt,
            ..Default::default()
        };
        let gw = gateway::Gateway::start(log.clone(), queries.clone(), config).await.context("gateway start")?;
        let router = gateway::app(gw.clone()).merge(metrics);
        tokio::spawn(gateway::serve_router(listener, router, gw, shutdown))
    } else {
        // Plain HTTP, under the same connection cap and deadlines as the gateway's listener: a
        // public ops port must not be held open by silent sockets either.
        let router = telemetry::ops_router(log.clone(), queries.clone()).merge(metrics);
        let limits = gateway::ConnLimits { tls: None, ..config_file.connections.clone() };
        tokio::spawn(gateway::serve_with_limits(listener, router, limits, shutdown))
    };

    // The first role to fail stops the others: a half-running bus is worse than a stopped one.
    let mut server = server;
    let early = tokio::select! {
        r = &mut server => Some(r.context("server task")?.context("server")),
        Some(r) = tasks.join_next() => { r.context("role task")??; None }
        _ = stop.cancelled() => None,
    };
    stop.cancel();
    // The gateway goes first, while the stream is still open: it stops accepting, records
    // every session's close, and closes the sockets with 1001.
    let outcome = match early {
        Some(r) => r,
        None => match tokio::time::timeout(STOP_GATEWAY_WITHIN, &mut server).await {
            Ok(r) => r.context("server task")?.context("server"),
            Err(_) => {
                tracing::warn!("the server did not stop in time; stopping anyway");
                server.abort();
                Ok(())
            }
        },
    };
    // Then the projector (it commits or abandons its batch) and the sweeper (its lease dies
    // with its connection).
    cancel.cancel();
    let roles = async {
        while let Some(r) = tasks.join_next().await {
            r.context("role task")??;
        }
        anyhow::Ok(())
    };
    match tokio::time::timeout(STOP_ROLES_WITHIN, roles).await {
        Ok(r) => r?,
        Err(_) => tracing::warn!("a role did not stop in time; exiting anyway"),
    }
    info!("stopped");
    outcome
}

/// How long the gateway may take to close its sessions at a stop; with `STOP_ROLES_WITHIN`,
/// the process exits within the 10 s that service managers allow before SIGKILL.
const STOP_GATEWAY_WITHIN: std::time::Duration = std::time::Duration::from_secs(7);
const STOP_ROLES_WITHIN: std::time::Duration = std::time::Duration::from_secs(2);

/// Cancels `stop` on the first SIGTERM or SIGINT.
async fn stop_on_signal(stop: CancellationToken) {
    use tokio::signal::unix::{signal, SignalKind};
    let (Ok(mut term), Ok(mut int)) = (signal(SignalKind::terminate()), signal(SignalKind::interrupt())) else {
        tracing::error!("cannot listen for SIGTERM/SIGINT; the process stops only when killed");
        return;
    };
    let name = tokio::select! {
        _ = term.recv() => "SIGTERM",
        _ = int.recv() => "SIGINT",
    };
    info!(signal = name, "stopping: no new work, closing sessions");
    stop.cancel();
}

/// Re-reads the JWT verifier's JWKS file on every SIGHUP (key rotation at the identity
/// provider); a failed reload keeps the keys already loaded. The handler is in place when this
/// returns, so a SIGHUP never falls to the default action (exit) once the gateway serves.
fn reload_jwks_on_sighup(verifier: Arc<gateway::jwt::JwtVerifier>) {
    use tokio::signal::unix::{signal, SignalKind};
    let Ok(mut hup) = signal(SignalKind::hangup()) else {
        tracing::error!("cannot listen for SIGHUP; the jwks file is read only at start");
        return;
    };
    tokio::spawn(async move {
        while hup.recv().await.is_some() {
            let file = verifier.jwks_file().map(|p| p.display().to_string());
            match verifier.reload() {
                Ok(keys) if file.is_some() => info!(signal = "SIGHUP", keys, file, "jwks reloaded"),
                Ok(_) => info!(signal = "SIGHUP", "no jwks file to reload"),
                Err(e) => {
                    let error = format!("{:#}", anyhow::Error::new(e));
                    tracing::warn!(
                        signal = "SIGHUP",
                        file,
                        error,
                        "jwks reload failed, keeping the keys already loaded"
                    );
                }
            }
        }
    });
}

/// Binds `addr` and serves `router` (just `/metrics`) on it until `cancel`. Not one of the roles:
/// it stops with them, and a failure only costs the scrapes, so it is logged, never fatal.
async fn serve_metrics(
    addr: &str,
    router: Router,
    limits: gateway::ConnLimits,
    cancel: CancellationToken,
) -> anyhow::Result<()> {
    let listener =
        tokio::net::TcpListener::bind(addr).await.with_context(|| format!("cannot listen for metrics on {addr}"))?;
    info!(addr = %listener.local_addr()?, "serving /metrics on its own listener");
    tokio::spawn(async move {
        let served = gateway::serve_with_limits(listener, router, limits, async move { cancel.cancelled().await });
        if let Err(e) = served.await {
            tracing::error!(error = %e, "the metrics listener stopped");
        }
    });
    Ok(())
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
