//! `NatsCluster`: three (or more) private `nats-server` nodes on loopback forming one JetStream
//! cluster — free client and route ports chosen up front, a store directory and a `server_name`
//! per node, one cluster name — so a test can kill -9, pause and restart any node in place and
//! ask which node leads a stream.
//!
//! Deliberately knows nothing about the bus: it hands out URLs and node handles, and reads
//! stream leadership through the JetStream API like an operator's `nats stream info` would.

use std::time::{Duration, Instant};

use async_nats::jetstream;

use crate::nats::{free_port, NatsServer};
use crate::version::NatsVersion;

/// How long a fresh cluster may take to elect its JetStream meta leader.
const READY_TIMEOUT: Duration = Duration::from_secs(30);

/// A JetStream cluster of private nodes. Nodes are killed when it is dropped.
#[derive(Debug)]
pub struct NatsCluster {
    name: String,
    nodes: Vec<NatsServer>,
}

/// What the stream's RAFT group reports about itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StreamHealth {
    /// Index of the node that leads the stream.
    pub leader: usize,
    /// Whether every replica is online and caught up with the leader.
    pub all_current: bool,
}

impl NatsCluster {
    /// Starts `size` nodes of `version` and waits until JetStream answers. Panics if it cannot.
    pub async fn start(version: NatsVersion, size: usize) -> NatsCluster {
        assert!(size >= 1, "a cluster has at least one node");
        let mut last_error = String::new();
        // A port taken between choosing and binding it shows up as an early exit; start over.
        for _ in 0..3 {
            match Self::try_start(version, size).await {
                Ok(cluster) => return cluster,
                Err(e) => last_error = e,
            }
        }
        panic!("the nats cluster did not start: {last_error}");
    }

    async fn try_start(version: NatsVersion, size: usize) -> Result<NatsCluster, String> {
        let name = format!("sbtest{}", &uuid::Uuid::new_v4().simple().to_string()[..8]);
        let route_ports: Vec<u16> = (0..size).map(|_| free_port()).collect();
        let routes: Vec<String> = route_ports.iter().map(|p| format!("nats://127.0.0.1:{p}")).collect();
        let mut nodes = Vec::with_capacity(size);
        for (i, route_port) in route_ports.iter().enumerate() {
            let extra = vec![
                "--server_name".to_string(),
                node_name(&name, i),
                "--cluster_name".to_string(),
                name.clone(),
                "--cluster".to_string(),
                format!("nats://127.0.0.1:{route_port}"),
                "--routes".to_string(),
                routes.join(","),
            ];
            nodes.push(NatsServer::unstarted(version, free_port(), extra));
        }
        // Together: a node may wait for its peers before it takes clients.
        for node in &mut nodes {
            node.spawn()?;
        }
        for node in &mut nodes {
            node.wait_accepting().await?;
        }
        let cluster = NatsCluster { name, nodes };
        cluster.wait_jetstream().await?;
        Ok(cluster)
    }

    /// `nats://127.0.0.1:a,nats://127.0.0.1:b,...`: what `--nats-url` takes.
    pub fn urls(&self) -> String {
        self.nodes.iter().map(NatsServer::url).collect::<Vec<_>>().join(",")
    }

    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    /// Node `i`: kill, pause, resume and restart it in place.
    pub fn node(&mut self, i: usize) -> &mut NatsServer {
        &mut self.nodes[i]
    }

    /// The `server_name` of node `i`, as stream info names leaders and replicas.
    pub fn name_of(&self, i: usize) -> String {
        node_name(&self.name, i)
    }

    /// Every node's log, for failure messages.
    pub fn logs(&self) -> String {
        (0..self.nodes.len()).map(|i| format!("--- {} ---\n{}", self.name_of(i), self.nodes[i].log())).collect()
    }

    /// How long after `since` node `i` logged that it became the leader of `stream` ("new
    /// stream leader"), by the server's own microsecond stamp: when a cluster elected, which
    /// polling the stream's info can only bound. `None` if it has not (or its log says otherwise).
    pub fn elected_after(&self, i: usize, stream: &str, since: std::time::SystemTime) -> Option<Duration> {
        // nats-server stamps its log in local time: `[pid] 2026/11/25 05:27:45.426312 [INF] …`.
        let since = chrono::DateTime::<chrono::Local>::from(since).naive_local();
        let marker = format!("> {stream}'");
        self.nodes[i]
            .log()
            .lines()
            .filter(|l| l.contains("new stream leader") && l.contains(&marker))
            .filter_map(|l| {
                let mut words = l.split_whitespace().skip(1);
                let stamp = format!("{} {}", words.next()?, words.next()?);
                chrono::NaiveDateTime::parse_from_str(&stamp, "%Y/%m/%d %H:%M:%S%.f").ok()
            })
            .filter_map(|at| (at - since).to_std().ok())
            .min()
    }

    /// Which node leads `stream`, waiting (up to `within`) through an election. Asks through
    /// every running node, so one dead node is no obstacle.
    pub async fn stream_leader(&mut self, stream: &str, within: Duration) -> usize {
        self.wait_stream(stream, within, |_| true).await.leader
    }

    /// Waits (up to `within`) until `stream` has a leader and every replica is online and
    /// current: after a restart, the point from which losing another node keeps a quorum.
    pub async fn wait_stream_current(&mut self, stream: &str, within: Duration) -> StreamHealth {
        self.wait_stream(stream, within, |h| h.all_current).await
    }

    async fn wait_stream(
        &mut self,
        stream: &str,
        within: Duration,
        good: impl Fn(&StreamHealth) -> bool,
    ) -> StreamHealth {
        let deadline = Instant::now() + within;
        let mut last = String::from("no answer");
        loop {
            for i in 0..self.nodes.len() {
                if !self.nodes[i].is_running() {
                    continue;
                }
                match self.health_via(i, stream).await {
                    Ok(h) if good(&h) => return h,
                    Ok(h) => last = format!("{h:?}"),
                    Err(e) => last = e,
                }
            }
            assert!(Instant::now() < deadline, "stream {stream} not healthy after {within:?}: {last}");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// The stream's health as node `i` relays it. Also asks for the account first: that needs
    /// the meta leader, which creating a consumer needs too (after every node restarted, the
    /// stream can be current before the meta group has a leader).
    async fn health_via(&self, i: usize, stream: &str) -> Result<StreamHealth, String> {
        let client = connect(&self.nodes[i].url()).await?;
        let js = jetstream::new(client);
        let info = tokio::time::timeout(Duration::from_secs(2), async {
            js.query_account().await.map_err(|e| e.to_string())?;
            js.get_stream(stream).await.map_err(|e| e.to_string())?.info().await.cloned().map_err(|e| e.to_string())
        })
        .await
        .map_err(|_| "stream info timed out".to_string())??;
        let cluster = info.cluster.ok_or("stream info without cluster")?;
        let leader = cluster.leader.ok_or("no stream leader")?;
        let leader = (0..self.nodes.len()).find(|n| self.name_of(*n) == leader).ok_or("unknown leader name")?;
        let all_current = cluster.replicas.len() + 1 == info.config.num_replicas.max(1)
            && cluster.replicas.iter().all(|r| r.current && !r.offline);
        Ok(StreamHealth { leader, all_current })
    }

    /// Waits until JetStream answers account requests (the meta group has a leader).
    async fn wait_jetstream(&self) -> Result<(), String> {
        let deadline = Instant::now() + READY_TIMEOUT;
        let client = connect(&self.nodes[0].url()).await?;
        let js = jetstream::new(client);
        loop {
            match tokio::time::timeout(Duration::from_secs(2), js.query_account()).await {
                Ok(Ok(_)) => return Ok(()),
                Ok(Err(e)) if Instant::now() > deadline => return Err(format!("{e}; logs:\n{}", self.logs())),
                Err(_) if Instant::now() > deadline => return Err(format!("timed out; logs:\n{}", self.logs())),
                _ => tokio::time::sleep(Duration::from_millis(200)).await,
            }
        }
    }
}

fn node_name(cluster: &str, i: usize) -> String {
    format!("{cluster}-n{}", i + 1)
}

async fn connect(url: &str) -> Result<async_nats::Client, String> {
    async_nats::ConnectOptions::new()
        .connection_timeout(Duration::from_secs(2))
        .connect(url)
        .await
        .map_err(|e| format!("cannot connect to {url}: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A 3-node cluster elects a leader for a replicated stream, keeps it writable when the
    /// leader is killed (another node takes over), and the restarted node catches up.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_replicated_stream_survives_its_leaders_death() {
        let mut cluster = NatsCluster::start(NatsVersion::Current, 3).await;
        assert_eq!(cluster.urls().split(',').count(), 3);
        let addrs: Vec<async_nats::ServerAddr> = cluster.urls().split(',').map(|u| u.parse().unwrap()).collect();
        let client = async_nats::connect(addrs).await.unwrap();
        let js = jetstream::new(client);
        let config = jetstream::stream::Config {
            name: "KILLME".into(),
            subjects: vec!["killme.>".into()],
            num_replicas: 3,
            ..Default::default()
        };
        js.create_stream(config).await.unwrap();
        js.publish("killme.a", "1".into()).await.unwrap().await.unwrap();
        let first = cluster.wait_stream_current("KILLME", Duration::from_secs(20)).await;
        assert!(first.all_current);

        cluster.node(first.leader).kill().await;
        let second = cluster.stream_leader("KILLME", Duration::from_secs(20)).await;
        assert_ne!(second, first.leader, "a dead node cannot lead");
        cluster.node(first.leader).restart().await;
        let healed = cluster.wait_stream_current("KILLME", Duration::from_secs(20)).await;
        assert!(healed.all_current);
    }
}
