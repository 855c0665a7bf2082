//! A real multi-process cluster on loopback for integration tests: writes a cluster file
//! with free ports (bound to port 0 then released), starts one `causeway server` process
//! per node (logs in the cluster's directory), and can SIGKILL and restart nodes. Dropping
//! it stops every node and removes the directory (kept on failure or when
//! `CAUSEWAY_KEEP_LOGS` is set).

#![allow(dead_code)]

use causeway_runtime::config::{Limits, NodeSpec, Timing};
use causeway_runtime::ClusterConfig;
use std::net::{SocketAddr, TcpListener};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

pub struct Cluster {
    pub config: ClusterConfig,
    pub dir: PathBuf,
    path: PathBuf,
    children: Vec<Option<Child>>,
}

/// Ports handed out in this test process, never handed out twice.
static HANDED_OUT: Mutex<Vec<u16>> = Mutex::new(Vec::new());

/// A free loopback port: bound to port 0 and held in `held` until the cluster file is
/// written, so one cluster never gets the same port twice.
fn free_addr(held: &mut Vec<TcpListener>) -> SocketAddr {
    loop {
        let l = TcpListener::bind("127.0.0.1:0").expect("bind an ephemeral port");
        let addr = l.local_addr().expect("local addr");
        held.push(l);
        let mut used = HANDED_OUT.lock().expect("ports lock");
        if !used.contains(&addr.port()) {
            used.push(addr.port());
            return addr;
        }
    }
}

impl Cluster {
    /// Starts `dcs` DCs of `nodes_per_dc` nodes running `protocol`; the first node of each
    /// DC serves clients. `rtt_ms` is the inter-DC round trip (uniform).
    pub fn start(name: &str, protocol: &str, dcs: u16, nodes_per_dc: u32, rtt_ms: f64) -> Cluster {
        let dir = std::env::temp_dir().join(format!("causeway-it-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("create the test directory");
        let dc_names: Vec<String> = (1..=dcs).map(|i| format!("dc{i}")).collect();
        let mut nodes = Vec::new();
        let mut held = Vec::new();
        for dc in &dc_names {
            for i in 0..nodes_per_dc {
                nodes.push(NodeSpec {
                    name: format!("{dc}-n{}", i + 1),
                    dc: dc.clone(),
                    addr: free_addr(&mut held),
                    client_addr: (i == 0).then(|| free_addr(&mut held)),
                    resp_addr: None,
                    metrics_addr: Some(free_addr(&mut held)),
                    http_addr: None,
                    data_dir: None,
                });
            }
        }
        let n = usize::from(dcs);
        let rtt = (0..n)
            .map(|a| (0..n).map(|b| if a == b { 0.0 } else { rtt_ms }).collect())
            .collect();
        let config = ClusterConfig {
            cluster: name.into(),
            protocol: protocol.into(),
            partitions: None,
            partitions_per_node: Some(2),
            replication_factor: None,
            data_dir: dir.clone(),
            dcs: dc_names,
            rtt_ms: Some(rtt),
            intra_dc_ms: 0.0,
            password: None,
            session_scope: Default::default(),
            secret: Some("test-cluster-secret-0123".into()),
            secret_file: None,
            keyring_dir: None,
            insecure: false,
            tls: None,
            limits: Limits::default(),
            timing: Timing {
                request_timeout_ms: 3000.0,
                ..Timing::default()
            },
            storage: Default::default(),
            runtime: Default::default(),
            protocols: Default::default(),
            nodes,
        };
        config.validate().expect("a valid test cluster");
        let path = dir.join("cluster.toml");
        std::fs::write(&path, config.to_toml()).expect("write the cluster file");
        drop(held);
        let mut cluster = Cluster {
            children: config.nodes.iter().map(|_| None).collect(),
            config,
            dir,
            path,
        };
        for i in 0..cluster.children.len() {
            cluster.spawn(i);
        }
        cluster
    }

    fn spawn(&mut self, i: usize) {
        let name = self.config.nodes[i].name.clone();
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.join(format!("{name}.log")))
            .expect("open the node log");
        let child = Command::new(env!("CARGO_BIN_EXE_causeway"))
            .args(["server", "--config"])
            .arg(&self.path)
            .args(["--node", &name])
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("clone the log"))
            .stderr(log)
            .spawn()
            .expect("start a node");
        self.children[i] = Some(child);
    }

    pub fn index(&self, name: &str) -> usize {
        self.config
            .nodes
            .iter()
            .position(|n| n.name == name)
            .expect("a node of the cluster")
    }

    /// SIGKILLs a node (no shutdown, unsynced writes lost).
    pub fn kill(&mut self, name: &str) {
        let i = self.index(name);
        let mut child = self.children[i].take().expect("the node runs");
        child.kill().expect("SIGKILL the node");
        child.wait().expect("reap the node");
    }

    pub fn restart(&mut self, name: &str) {
        let i = self.index(name);
        assert!(self.children[i].is_none(), "restart of a running node");
        self.spawn(i);
    }

    /// The client endpoint of DC `dc` (from 0).
    pub fn client_addr(&self, dc: usize) -> SocketAddr {
        let name = &self.config.dcs[dc];
        self.config
            .nodes
            .iter()
            .find_map(|n| (&n.dc == name).then_some(n.client_addr).flatten())
            .expect("every DC has a client endpoint")
    }

    pub fn log(&self, name: &str) -> String {
        std::fs::read_to_string(self.dir.join(format!("{name}.log"))).unwrap_or_default()
    }

    /// Asks every node to stop (SIGTERM) and waits; panics if one does not exit cleanly.
    pub fn stop(&mut self) {
        for child in self.children.iter().flatten() {
            // SAFETY: kill(2) on a child we spawned and have not reaped.
            unsafe {
                libc::kill(child.id() as libc::pid_t, libc::SIGTERM);
            }
        }
        let deadline = Instant::now() + Duration::from_secs(20);
        for (i, slot) in self.children.iter_mut().enumerate() {
            let Some(mut child) = slot.take() else {
                continue;
            };
            let status = loop {
                if let Some(s) = child.try_wait().expect("wait") {
                    break s;
                }
                assert!(
                    Instant::now() < deadline,
                    "node {i} did not stop after SIGTERM"
                );
                std::thread::sleep(Duration::from_millis(20));
            };
            assert!(
                status.success(),
                "node {} exited with {status}",
                self.config.nodes[i].name
            );
        }
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        for child in self.children.iter_mut().flatten() {
            let _ = child.kill();
            let _ = child.wait();
        }
        if !std::thread::panicking() && std::env::var_os("CAUSEWAY_KEEP_LOGS").is_none() {
            let _ = std::fs::remove_dir_all(&self.dir);
        } else {
            eprintln!("node logs kept in {}", self.dir.display());
        }
    }
}

/// Retries `f` every 20 ms until it returns `Some` or `timeout` passes.
pub fn eventually<T>(timeout: Duration, mut f: impl FnMut() -> Option<T>) -> Option<T> {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(v) = f() {
            return Some(v);
        }
        if Instant::now() > deadline {
            return None;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}
