//! The bus under test: started in this process the way `signalbus serve` wires it (gateway,
//! projector and sweeper over one event log and one set of read models) — on a private
//! nats-server (either release, or a 3-node cluster with the stream at 3 replicas) plus a fresh
//! PostgreSQL database, or embedded in a temp dir — or an external bus reached by `--url`.
//!
//! An in-process bus can also be stopped, every role at once, and started again on the same
//! stream and database (`Target::stop_roles`, `Target::resume`), as an operator's restart.
//!
//! Deliberately no tuning beyond the binary's defaults: a benchmark of a specially configured
//! bus would measure something users do not run.

use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use bus::log::embedded::EmbeddedLog;
use bus::log::jetstream::{JetStreamConfig, JetStreamLog};
use bus::log::SharedLog;
use projector::{Projector, ProjectorConfig, ReadModels};
use testkit::nats::NatsServer;
use testkit::{NatsCluster, NatsVersion, TestDb};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// Which NATS an in-process distributed bus runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum NatsChoice {
    Debian,
    Current,
    Cluster,
}

/// The backends of an in-process bus, without the gateway (sweeper and rebuild scenarios talk
/// to these directly).
pub struct Backends {
    pub log: SharedLog,
    pub models: ReadModels,
    /// `nats://…` of the private server, or of a cluster's first node (distributed mode only).
    pub nats_url: Option<String>,
    /// Every server's URL, comma-separated, as `--nats-url` takes them (distributed mode only).
    pub nats_urls: Option<String>,
    /// Replicas of the bus's stream (the raw baseline uses as many).
    pub replicas: usize,
    pub database_url: Option<String>,
    pub stop: CancellationToken,
    /// Every NATS URL, comma-separated (distributed mode only): what `reopen` connects to.
    urls: Option<String>,
    _nats: Option<NatsServer>,
    nats_cluster: Option<NatsCluster>,
    _db: Option<TestDb>,
    _dir: Option<tempfile::TempDir>,
}

impl Backends {
    pub async fn start(embedded: bool, nats: NatsChoice) -> anyhow::Result<Backends> {
        // The recorder first, as `signalbus serve` installs its own before it serves.
        crate::kept::kept();
        let stop = CancellationToken::new();
        if embedded {
            let dir = tempfile::Builder::new().prefix("signalbus-bench-").tempdir()?;
            let log: SharedLog = Arc::new(EmbeddedLog::open(dir.path()).await.context("embedded log")?);
            let models = ReadModels::sqlite(dir.path()).await.context("sqlite read models")?;
            return Ok(Backends {
                log,
                models,
                nats_url: None,
                nats_urls: None,
                database_url: None,
                replicas: 1,
                stop,
                urls: None,
                _nats: None,
                nats_cluster: None,
                _db: None,
                _dir: Some(dir),
            });
        }
        let (server, cluster, urls, replicas) = match nats {
            NatsChoice::Debian | NatsChoice::Current => {
                let version = if nats == NatsChoice::Debian { NatsVersion::Debian } else { NatsVersion::Current };
                let server = NatsServer::start_version(version).await;
                let url = server.url();
                (Some(server), None, url, 1)
            }
            NatsChoice::Cluster => {
                let cluster = NatsCluster::start(NatsVersion::Current, 3).await;
                let urls = cluster.urls();
                (None, Some(cluster), urls, 3)
            }
        };
        let db = TestDb::create().await;
        let config = JetStreamConfig { replicas, ..Default::default() };
        let log: SharedLog = Arc::new(JetStreamLog::connect(&urls, config).await.context("jetstream")?);
        let models = ReadModels::postgres(db.url()).await.context("postgres read models")?;
        let first = urls.split(',').next().unwrap_or_default().to_string();
        Ok(Backends {
            log,
            models,
            nats_url: Some(first),
            nats_urls: Some(urls.clone()),
            database_url: Some(db.url().to_string()),
            replicas,
            stop,
            urls: Some(urls),
            _nats: server,
            nats_cluster: cluster,
            _db: Some(db),
            _dir: None,
        })
    }

    /// The 3-node cluster under the bus (`--nats cluster`), to kill and restart its nodes.
    pub fn cluster(&mut self) -> Option<&mut NatsCluster> {
        self.nats_cluster.as_mut()
    }

    /// Connects afresh to the same stream and read models, under a new stop token: what a
    /// restarted process would do. The old roles must have stopped (`stop` cancelled).
    pub async fn reopen(&mut self) -> anyhow::Result<()> {
        self.stop = CancellationToken::new();
        match (&self._dir, &self.urls, &self.database_url) {
            (Some(dir), _, _) => {
                self.log = Arc::new(EmbeddedLog::open(dir.path()).await.context("embedded log")?);
                self.models = ReadModels::sqlite(dir.path()).await.context("sqlite read models")?;
            }
            (None, Some(urls), Some(db)) => {
                let config = JetStreamConfig { replicas: self.replicas, ..Default::default() };
                self.log = Arc::new(JetStreamLog::connect(urls, config).await.context("jetstream")?);
                self.models = ReadModels::postgres(db).await.context("postgres read models")?;
            }
            _ => anyhow::bail!("backends without a stream to reopen"),
        }
        Ok(())
    }

    pub fn spawn_projector(&self) -> JoinHandle<()> {
        let mut config = ProjectorConfig::default();
        if let Some(ms) = knob("SIGNALBUS_BENCH_PROJECTOR_MAX_WAIT_MS") {
            config.max_wait = Duration::from_millis(ms);
        }
        if let Some(n) = knob("SIGNALBUS_BENCH_PROJECTOR_MAX_BATCH") {
            config.max_batch = n as usize;
        }
        let projector = Projector::new(self.log.clone(), self.models.clone(), config);
        let stop = self.stop.clone();
        // As `signalbus serve` runs it: on a thread of its own.
        tokio::spawn(async move {
            if let Err(e) = projector.run_on_own_thread(stop).await {
                tracing::error!(error = %e, "projector stopped");
            }
        })
    }

    pub fn sweeper_lease(&self) -> sweeper::Lease {
        match &self.database_url {
            Some(url) => sweeper::Lease::Postgres { database_url: url.clone() },
            None => sweeper::Lease::Local,
        }
    }

    pub fn spawn_sweeper(&self, config: sweeper::SweeperConfig) -> JoinHandle<()> {
        let queries: Arc<dyn projector::Queries> = Arc::new(self.models.clone());
        let sweeper = sweeper::Sweeper::new(self.log.clone(), queries, self.models.clone(), config);
        let stop = self.stop.clone();
        tokio::spawn(async move {
            if let Err(e) = sweeper.run(stop).await {
                tracing::error!(error = %e, "sweeper stopped");
            }
        })
    }

    /// Waits until the read models have applied everything on the stream now.
    pub async fn settle(&self, timeout: Duration) -> anyhow::Result<()> {
        use projector::Queries;
        let last = self.log.last_seq().await?;
        self.models.wait_for(last, timeout).await.context("projector catch-up")?;
        Ok(())
    }
}

impl Drop for Backends {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

/// Where the workload goes: URLs and the admin token, plus the backends when in-process.
pub struct Target {
    pub base: String,
    pub ws_url: String,
    pub admin_token: String,
    /// In-process only: the bus's backends (event counts, raw baseline server) and gateway.
    pub local: Option<(Backends, gateway::Gateway)>,
    /// NATS server for the raw baseline (`--nats-url` with `--url`, or the private one).
    pub nats_url: Option<String>,
    /// Replicas the raw baseline's stream gets (the bus stream's, in-process).
    pub replicas: usize,
    server: Option<JoinHandle<std::io::Result<()>>>,
    /// In-process only: the projector and the sweeper.
    roles: Vec<JoinHandle<()>>,
}

impl Target {
    /// A bus in this process: gateway on 127.0.0.1:0, projector, sweeper.
    pub async fn start(embedded: bool, nats: NatsChoice) -> anyhow::Result<Target> {
        let backends = Backends::start(embedded, nats).await?;
        let mut target = Target {
            base: String::new(),
            ws_url: String::new(),
            admin_token: format!("bench-admin-{}", uuid::Uuid::new_v4().simple()),
            nats_url: backends.nats_url.clone(),
            replicas: backends.replicas,
            local: None,
            server: None,
            roles: Vec::new(),
        };
        target.serve(backends).await?;
        Ok(target)
    }

    /// Starts projector, sweeper and a gateway on a fresh 127.0.0.1 port over `backends`.
    async fn serve(&mut self, backends: Backends) -> anyhow::Result<()> {
        self.roles = vec![
            backends.spawn_projector(),
            backends.spawn_sweeper(sweeper::SweeperConfig { lease: backends.sweeper_lease(), ..Default::default() }),
        ];
        // No per-identity quotas: the bench measures what the bus can carry, not the quotas.
        let config = gateway::GatewayConfig {
            node: "bench".into(),
            admin_token: self.admin_token.clone(),
            send_rate: None,
            fact_rate: None,
            max_projector_lag: match knob("SIGNALBUS_BENCH_MAX_PROJECTOR_LAG_MS") {
                Some(0) => None,
                Some(ms) => Some(Duration::from_millis(ms)),
                None => gateway::GatewayConfig::default().max_projector_lag,
            },
            ..Default::default()
        };
        let queries: Arc<dyn projector::Queries> = Arc::new(backends.models.clone());
        let gw = gateway::Gateway::start(backends.log.clone(), queries, config).await.context("gateway start")?;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let stop = backends.stop.clone();
        self.server = Some(tokio::spawn(gateway::run(listener, gw.clone(), async move { stop.cancelled().await })));
        self.base = format!("http://{addr}");
        self.ws_url = format!("ws://{addr}/v1/ws");
        self.local = Some((backends, gw));
        Ok(())
    }

    /// Stops every role of the in-process bus (gateway, projector, sweeper: its sessions are
    /// closed) and hands back its backends, still holding the stream and the database.
    pub async fn stop_roles(&mut self) -> anyhow::Result<Backends> {
        let (backends, gw) = self.local.take().context("only an in-process bus can be stopped")?;
        backends.stop.cancel();
        if let Some(s) = self.server.take() {
            let _ = tokio::time::timeout(Duration::from_secs(15), s).await;
        }
        for role in self.roles.drain(..) {
            let _ = tokio::time::timeout(Duration::from_secs(15), role).await;
        }
        drop(gw);
        Ok(backends)
    }

    /// Starts every role again on `backends` (from `stop_roles`), as a restarted process: new
    /// connections to the same stream and database, a gateway on a new port (`base`, `ws_url`).
    pub async fn resume(&mut self, mut backends: Backends) -> anyhow::Result<()> {
        backends.reopen().await?;
        self.serve(backends).await
    }

    /// Another gateway in this process on its own NATS connection, as a second gateway process
    /// would be (same admin token, node `node`); it stops with the bus. Its base URL.
    pub async fn add_gateway(&self, node: &str) -> anyhow::Result<String> {
        let (b, first) = self.local.as_ref().context("an in-process bus")?;
        let urls = b.nats_urls.as_deref().context("a distributed bus")?;
        let config = JetStreamConfig { replicas: b.replicas, ..Default::default() };
        let log: SharedLog = Arc::new(JetStreamLog::connect(urls, config).await.context("jetstream")?);
        let queries: Arc<dyn projector::Queries> = Arc::new(b.models.clone());
        let config = gateway::GatewayConfig { node: node.to_string(), ..first.config().clone() };
        let gw = gateway::Gateway::start(log, queries, config).await.context("gateway start")?;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let stop = b.stop.clone();
        tokio::spawn(gateway::run(listener, gw, async move { stop.cancelled().await }));
        Ok(format!("http://{addr}"))
    }

    /// An external bus.
    pub fn external(url: &str, admin_token: &str, nats_url: Option<String>) -> Target {
        let base = url.trim_end_matches('/').to_string();
        let ws = base.replacen("http://", "ws://", 1).replacen("https://", "wss://", 1);
        Target {
            ws_url: format!("{ws}/v1/ws"),
            base,
            admin_token: admin_token.to_string(),
            local: None,
            nats_url,
            replicas: 1,
            server: None,
            roles: Vec::new(),
        }
    }

    pub fn log(&self) -> Option<&SharedLog> {
        self.local.as_ref().map(|(b, _)| &b.log)
    }

    /// Events appended to the stream so far: the in-process log's last sequence, or the
    /// external bus's `signalbus_event_append_seconds_count` from `/metrics`.
    pub async fn events_so_far(&self, http: &reqwest::Client) -> anyhow::Result<u64> {
        if let Some(log) = self.log() {
            return Ok(log.last_seq().await?);
        }
        let text = http.get(format!("{}/metrics", self.base)).send().await?.text().await?;
        let total: f64 = text
            .lines()
            .filter(|l| l.starts_with("signalbus_event_append_seconds_count"))
            .filter_map(|l| l.split_whitespace().last()?.parse::<f64>().ok())
            .sum();
        Ok(total as u64)
    }

    /// Stops the in-process bus: closes its sessions, then the roles.
    pub async fn shutdown(mut self) {
        if let Some((b, _)) = &self.local {
            b.stop.cancel();
        }
        if let Some(s) = self.server.take() {
            let _ = tokio::time::timeout(Duration::from_secs(15), s).await;
        }
    }
}

/// An experiment's override of a default, from the environment (unset: the default).
fn knob(name: &str) -> Option<u64> {
    std::env::var(name).ok()?.parse().ok()
}
