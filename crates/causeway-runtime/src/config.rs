//! The TOML cluster file: DCs and their latency matrix, nodes and their addresses,
//! partitions, protocol, data directory, limits and ports. [`ClusterConfig::parse`] reads
//! and validates it; every error names the field and says how to fix it.
//!
//! ```toml
//! cluster = "local"
//! protocol = "cure"
//! partitions_per_node = 4        # or: partitions = 8
//! replication_factor = 2         # optional: DCs storing each partition (default: every DC)
//! data_dir = "causeway-data"     # each node keeps its log in data_dir/<node name>
//! dcs = ["dc1", "dc2", "dc3"]
//! rtt_ms = [[0, 88, 80], [86, 0, 145], [76, 139, 0]]   # optional; default: PaRiS Fig. 1
//! intra_dc_ms = 0.0              # optional extra one-way latency inside a DC
//! password = "..."               # optional: clients (RESP and native) must give it
//! session_scope = "endpoint"     # optional: or "connection" (a session's past is its own)
//! secret = "..."                 # cluster secret nodes prove to each other
//! # secret_file = "cluster.secret" # or: a file holding it (16 to 1024 printable bytes)
//! # keyring_dir = "keys"          # or: each node's link keys in keys/<name>.keyring
//! # insecure = true               # or neither: peers unauthenticated (tests only)
//!
//! [[nodes]]
//! name = "dc1-n1"
//! dc = "dc1"
//! addr = "127.0.0.1:7200"        # node-to-node listener
//! client_addr = "127.0.0.1:7101" # optional: native client endpoint of the DC
//! resp_addr = "127.0.0.1:7001"   # optional: RESP endpoint of the DC
//! metrics_addr = "127.0.0.1:9100" # optional: Prometheus `GET /metrics` of this node
//! http_addr = "127.0.0.1:9000"   # optional: the live cluster page (scrapes every metrics_addr)
//!
//! [tls]                          # optional: TLS on node links (mutual) and client/RESP ports
//! ca_file = "tls/ca.pem"         # the CA that signs every node's certificate
//! cert_file = "tls/node.pem"     # this node's certificate chain (SAN: its IP, or server_name)
//! key_file = "tls/node.key"
//! # server_name = "node.example" # optional: the name checked on peers' certificates
//!
//! [storage]                      # optional
//! durability = "sync"            # or "batched": fsync at most every batched_sync_interval_ms
//! batched_sync_interval_ms = 100
//! group_commit = "auto"          # or "thread" or "node" (sync only): who appends and fsyncs
//! auto_inline_max_us = 1000      # auto: the node task fsyncs itself while batches take less
//! checkpoint_records = 100000    # checkpoint and truncate the log every this many records (0: never)
//!
//! [runtime]                      # optional
//! worker_threads = 0             # 0: one thread runs the node and every connection (default)
//! transparent_huge_pages = false # false: off for the node process (default), as Redis does
//! ```

use crate::gateway::SessionScope;
use causeway_core::limits::{FRAME_LEN_MAX, PASSWORD_LEN_MAX};
use causeway_core::topology::SLOTS;
use causeway_core::{DcId, NodeId, PartitionId, Secret, Topology};
use causeway_protocols::{NodeConfig, Params, PROTOCOLS};
use serde::{Deserialize, Serialize};
use std::net::SocketAddr;
use std::path::PathBuf;

pub use causeway_core::topology::PARIS_RTT_MS;

/// Round-trip time between DCs beyond the fifth when the file gives no matrix.
pub const DEFAULT_FAR_RTT_MS: f64 = 200.0;
/// Most DCs a cluster file may declare.
pub const DCS_MAX: usize = 64;
/// Most nodes a cluster file may declare.
pub const NODES_MAX: usize = 4096;
/// Fewest and most bytes of a cluster secret.
pub const SECRET_LEN_MIN: usize = 16;
pub const SECRET_LEN_MAX: usize = 1024;
/// Default `limits.client_idle_timeout_ms`: five minutes, so a client that vanished
/// without closing (its host gone, a NAT that forgot it) stops holding a session.
pub const CLIENT_IDLE_TIMEOUT_MS: u64 = 300_000;
/// Default and longest `limits.auth_timeout_ms`.
pub const AUTH_TIMEOUT_MS: u64 = 10_000;
pub const AUTH_TIMEOUT_MS_MAX: u64 = 600_000;
/// Longest `limits.client_idle_timeout_ms`: a week.
pub const CLIENT_IDLE_TIMEOUT_MS_MAX: u64 = 7 * 24 * 3_600_000;
/// Default `limits.link_dead_after_ms`: a link whose sent frames go unacknowledged this
/// long redials. A receiver acknowledges within 100 ms of a delivery and beats four times
/// per interval while it holds frames back, so only a dead path (or a stalled process)
/// trips it, and a healed partition resumes within seconds.
pub const LINK_DEAD_AFTER_MS: u64 = 5_000;
/// Shortest and longest `limits.link_dead_after_ms`.
pub const LINK_DEAD_AFTER_MS_MIN: u64 = 100;
pub const LINK_DEAD_AFTER_MS_MAX: u64 = 600_000;
/// Default `limits.inbox_bytes_max`: 64 MiB of frames waiting for the node task.
pub const INBOX_BYTES_MAX: usize = 64 << 20;
/// Largest `limits.inbox_bytes_max` (16 GiB).
pub const INBOX_BYTES_MAX_MAX: usize = 1 << 34;
/// Most bytes of a `secret_file`.
const SECRET_FILE_LEN_MAX: u64 = 4096;

/// Queue and connection limits of one node (every queue of the runtime is bounded).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Limits {
    /// Most messages waiting on one outgoing link (unsent or unacknowledged).
    pub link_queue_max: usize,
    /// Most network messages waiting for the node task.
    pub inbox_max: usize,
    /// Most bytes of network messages (their encoded frames) waiting for the node task;
    /// at least one largest frame. A full inbox stops reading peer sockets: the senders
    /// wait (TCP flow control), nothing is dropped.
    pub inbox_bytes_max: usize,
    /// How long what a link sent may go unacknowledged before the link declares its path
    /// dead and redials (also accepted peer sockets' `TCP_USER_TIMEOUT`). Give every node the
    /// same value: a receiver's heartbeats come every quarter of its own.
    pub link_dead_after_ms: u64,
    /// Most records waiting for the disk.
    pub persist_queue_max: usize,
    /// Most client sessions open at once on one node.
    pub sessions_max: usize,
    /// Most client connections open at once on one endpoint.
    pub client_connections_max: usize,
    /// A native or RESP client connection idle (no command) this long after it
    /// authenticated is closed; 0 never closes one (Redis `timeout 0`).
    pub client_idle_timeout_ms: u64,
    /// Most connections of one endpoint (native, RESP, peer) open at once that have not
    /// authenticated yet; one more is refused at once.
    pub unauthenticated_connections_max: usize,
    /// How long a connection (native, RESP, peer) may take to authenticate, from its
    /// accept, before it is closed.
    pub auth_timeout_ms: u64,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            link_queue_max: 1 << 18,
            inbox_max: 1 << 14,
            inbox_bytes_max: INBOX_BYTES_MAX,
            link_dead_after_ms: LINK_DEAD_AFTER_MS,
            persist_queue_max: 1 << 16,
            sessions_max: 1 << 14,
            client_connections_max: 1 << 12,
            client_idle_timeout_ms: CLIENT_IDLE_TIMEOUT_MS,
            unauthenticated_connections_max: 1024,
            auth_timeout_ms: AUTH_TIMEOUT_MS,
        }
    }
}

/// When an acknowledged write is on disk (`[storage] durability`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Durability {
    /// A record is reported durable only after the fsync of its group commit: an
    /// acknowledged write survives a power failure (Redis `appendfsync always`).
    #[default]
    Sync,
    /// A record is reported durable once written to the operating system, and the log is
    /// fsynced at most every `batched_sync_interval_ms`: acknowledged writes of the last
    /// interval can be lost on power failure or kernel crash, never on a process crash
    /// (Redis `appendfsync everysec`).
    Batched,
}

/// Which thread appends and fsyncs a node's records (`[storage] group_commit`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum GroupCommit {
    /// The node task itself (as `Node`) while recent batches' append and fsync took less
    /// than `auto_inline_max_us` each and the storage thread holds nothing; the storage
    /// thread (as `Thread`) otherwise. With `durability = "batched"`, the thread.
    #[default]
    Auto,
    /// A storage thread: the node task hands it each burst's records and goes on while it
    /// appends and fsyncs them; the next batch gathers during the fsync.
    Thread,
    /// The node task itself, at the end of each burst of inputs, as Redis's event loop
    /// does with `appendfsync always`: no hand-over between threads and one batch per
    /// burst, but nothing else runs on the node (peer messages, timers, other clients)
    /// during the fsync. Only with `durability = "sync"`.
    Node,
}

impl Durability {
    pub fn name(self) -> &'static str {
        match self {
            Durability::Sync => "sync",
            Durability::Batched => "batched",
        }
    }
}

/// Default `checkpoint_records`: a checkpoint per 100,000 records keeps the log (and
/// the recovery time) bounded while its cost, one pause for a quiescent moment and one
/// serialization of the node's state, stays rare.
pub const CHECKPOINT_RECORDS_DEFAULT: u64 = 100_000;
/// Largest `checkpoint_records`.
pub const CHECKPOINT_RECORDS_MAX: u64 = 1 << 32;

/// Default `auto_inline_max_us`: a node stalls for at most about a millisecond per burst
/// (an SSD's fsync takes 0.05-0.5 ms; a spinning disk's 5-10 ms sends it to the thread).
pub const AUTO_INLINE_MAX_US_DEFAULT: u64 = 1_000;
/// Largest `auto_inline_max_us`.
pub const AUTO_INLINE_MAX_US_MAX: u64 = 1_000_000;

/// Largest `batched_sync_interval_ms`.
pub const BATCHED_SYNC_INTERVAL_MS_MAX: u64 = 10_000;

/// TLS settings (`[tls]`, docs/OPERATIONS.md "Security"): with the section, node links
/// are mutual TLS and the client and RESP ports accept TLS only.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TlsConfig {
    /// This node's certificate chain (PEM), signed by `ca_file`'s CA.
    pub cert_file: PathBuf,
    /// Its private key (PEM, PKCS#8, PKCS#1 or SEC1).
    pub key_file: PathBuf,
    /// The CA certificates peers' certificates must chain to (PEM).
    pub ca_file: PathBuf,
    /// The name a peer's certificate must carry (none: the IP address dialed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_name: Option<String>,
}

/// How a node writes its log (`[storage]`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct StorageConfig {
    pub durability: Durability,
    /// With `batched`, the longest time between two fsyncs of a log with unsynced records.
    pub batched_sync_interval_ms: u64,
    /// After this many records since the last checkpoint, the node takes one (for
    /// protocols that offer them: cure, cureft, unistore without strong txns), stores it
    /// as the log's snapshot and drops the records it covers; 0 turns it off.
    pub checkpoint_records: u64,
    /// Which thread appends and fsyncs the records.
    pub group_commit: GroupCommit,
    /// With `group_commit = "auto"`: the node task fsyncs its records itself while recent
    /// batches took less than this each (µs).
    pub auto_inline_max_us: u64,
}

impl Default for StorageConfig {
    fn default() -> StorageConfig {
        StorageConfig {
            durability: Durability::Sync,
            batched_sync_interval_ms: 100,
            checkpoint_records: CHECKPOINT_RECORDS_DEFAULT,
            group_commit: GroupCommit::Auto,
            auto_inline_max_us: AUTO_INLINE_MAX_US_DEFAULT,
        }
    }
}

/// The highest `[runtime] worker_threads`.
pub const WORKER_THREADS_MAX: u16 = 256;

/// How a node process runs its tasks (`[runtime]`).
///
/// A node's protocol is one state machine on one task, so extra threads only spread the
/// connections' socket work, and every request then crosses threads twice. On the 2-core
/// machine of BENCHMARKS.md, with the client on the same machine, one thread was faster
/// for every redis-benchmark test, pipelined SET by 20x (under 2 workers the group commit
/// fell to 1.45 records per fdatasync and the version GC fell behind; why is not found):
/// hence the default. A node serving many connections on a machine of many cores can try
/// more.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RuntimeConfig {
    /// 0: tokio's current-thread runtime, everything on the process's main thread (the
    /// storage thread and fjall's own threads aside). N: a multi-thread runtime with N
    /// workers.
    pub worker_threads: u16,
    /// false (default): the node process turns transparent huge pages off for itself at
    /// start (`prctl(PR_SET_THP_DISABLE)`, Linux), as redis-server does (`disable-thp
    /// yes`). With them on, every fresh region the allocator touches faults in and zeroes
    /// 2 MiB: a replica of a 3-DC cluster under SADD spent 15% of its CPU zeroing pages
    /// (BENCHMARKS.md). true: leave the system's setting.
    pub transparent_huge_pages: bool,
}

/// Protocol timing knobs, in milliseconds (see `causeway_protocols::Params`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Timing {
    pub replication_interval_ms: f64,
    pub stabilization_interval_ms: f64,
    pub request_timeout_ms: f64,
}

impl Default for Timing {
    fn default() -> Timing {
        let p = Params::default();
        Timing {
            replication_interval_ms: p.replication_interval_ns as f64 / 1e6,
            stabilization_interval_ms: p.stabilization_interval_ns as f64 / 1e6,
            request_timeout_ms: p.request_timeout_ns as f64 / 1e6,
        }
    }
}

/// One node of the cluster file.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NodeSpec {
    pub name: String,
    pub dc: String,
    pub addr: SocketAddr,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_addr: Option<SocketAddr>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resp_addr: Option<SocketAddr>,
    /// Where this node serves Prometheus metrics (`GET /metrics`); none: no endpoint.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metrics_addr: Option<SocketAddr>,
    /// Where this node serves the live cluster page (`GET /`, `/api/cluster`), built from
    /// scraping every node's `metrics_addr`; none: no page.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http_addr: Option<SocketAddr>,
    /// Overrides `data_dir/<name>` as this node's log directory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data_dir: Option<PathBuf>,
}

/// The whole cluster file.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClusterConfig {
    pub cluster: String,
    pub protocol: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partitions: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partitions_per_node: Option<u32>,
    /// DCs storing each partition, 1..=dcs (none: every DC, full replication). Partition
    /// `p` lives in the `replication_factor` consecutive DCs from `p % dcs`
    /// (`Topology::replicas_of`); only protocols without
    /// `Requirements::full_replication` accept fewer than `dcs`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replication_factor: Option<u16>,
    pub data_dir: PathBuf,
    pub dcs: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rtt_ms: Option<Vec<Vec<f64>>>,
    #[serde(default)]
    pub intra_dc_ms: f64,
    /// Password RESP clients must give with AUTH (none: no authentication).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub password: Option<Secret>,
    /// Whose causal past a client session starts each transaction from: `"endpoint"`
    /// (default: every connection of the node's endpoint, per user, so a write
    /// acknowledged to one connection is visible to the next transaction of any) or
    /// `"connection"` (its own: the papers' sessions). RESP clients switch with `CLIENT
    /// SESSION`.
    #[serde(default, skip_serializing_if = "SessionScope::is_endpoint")]
    pub session_scope: SessionScope,
    /// The cluster secret nodes prove to each other when they connect. At most one of
    /// `secret` and `secret_file` (a file holding the secret, trailing newline ignored).
    /// Without either a node refuses to start unless `insecure` is set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret: Option<Secret>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret_file: Option<PathBuf>,
    /// Instead of a secret: the directory of per-node keyrings (`causeway keyring`), from
    /// which each node reads `<its name>.keyring`, the keys of its own links only, so a
    /// node whose files leak cannot pose as another ([`crate::keyring`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub keyring_dir: Option<PathBuf>,
    /// Start without a cluster secret: peer connections are not authenticated, so anyone
    /// who reaches a node's peer port can inject messages (tests on one machine only;
    /// `causeway server --insecure` sets it too).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub insecure: bool,
    /// TLS on node links and client ports (none: plain TCP).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls: Option<TlsConfig>,
    #[serde(default)]
    pub limits: Limits,
    #[serde(default)]
    pub timing: Timing,
    #[serde(default)]
    pub storage: StorageConfig,
    #[serde(default)]
    pub runtime: RuntimeConfig,
    /// Protocol sections: `[protocols.NAME]` holds protocol NAME's own settings (each
    /// field with a default; see the protocol's `Config`). Not `[protocol.NAME]`: the
    /// `protocol = "NAME"` key already names the protocol, and TOML cannot hold a string
    /// and a table under one key.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub protocols: std::collections::BTreeMap<String, toml::Table>,
    pub nodes: Vec<NodeSpec>,
}

/// Where one node sits in the cluster, derived from the file.
#[derive(Clone, Debug, PartialEq)]
pub struct Placement {
    pub id: NodeId,
    pub dc: DcId,
    pub spec: NodeSpec,
}

fn field(name: &str, problem: impl std::fmt::Display, fix: &str) -> String {
    format!("cluster file: field `{name}`: {problem}; fix: {fix}")
}

/// Refuses `value` of field `name` outside `1..=max`.
fn positive_at_most(name: &str, value: u64, max: u64) -> Result<(), String> {
    if value == 0 || value > max {
        return Err(field(
            name,
            format!("{value} is out of range"),
            &format!("give 1..={max}"),
        ));
    }
    Ok(())
}

impl ClusterConfig {
    /// The client endpoints of the DC `placement` sits in, named to a client that knocks
    /// at the wrong one: `(client_addr, resp_addr)`, each the node's own when it has one,
    /// else the first of its DC's nodes that has one.
    pub fn dc_endpoints(&self, placement: &Placement) -> (Option<SocketAddr>, Option<SocketAddr>) {
        let dc = &placement.spec.dc;
        let first = |pick: fn(&NodeSpec) -> Option<SocketAddr>| {
            pick(&placement.spec)
                .or_else(|| self.nodes.iter().filter(|n| &n.dc == dc).find_map(pick))
        };
        (first(|n| n.client_addr), first(|n| n.resp_addr))
    }

    /// Parses and validates a cluster file's text.
    pub fn parse(text: &str) -> Result<ClusterConfig, String> {
        let config: ClusterConfig = toml::from_str(text).map_err(|e| {
            format!("cluster file is not valid: {e}fix: correct the TOML at the place shown")
        })?;
        config.validate()?;
        Ok(config)
    }

    /// Reads, parses and validates a cluster file.
    pub fn load(path: &std::path::Path) -> Result<ClusterConfig, String> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("cannot read cluster file {}: {e}", path.display()))?;
        ClusterConfig::parse(&text).map_err(|e| format!("{}: {e}", path.display()))
    }

    /// The TOML text of this configuration.
    pub fn to_toml(&self) -> String {
        toml::to_string(self).expect("a cluster config always serializes")
    }

    /// Checks every field; the error names the field and the fix.
    /// Refuses a link timeout or inbox byte bound out of range.
    fn validate_links(&self) -> Result<(), String> {
        let l = &self.limits;
        let dead = l.link_dead_after_ms;
        if !(LINK_DEAD_AFTER_MS_MIN..=LINK_DEAD_AFTER_MS_MAX).contains(&dead) {
            return Err(field(
                "limits.link_dead_after_ms",
                format!("{dead} is out of range"),
                &format!("give {LINK_DEAD_AFTER_MS_MIN}..={LINK_DEAD_AFTER_MS_MAX}"),
            ));
        }
        let bytes = l.inbox_bytes_max;
        if !(FRAME_LEN_MAX..=INBOX_BYTES_MAX_MAX).contains(&bytes) {
            return Err(field(
                "limits.inbox_bytes_max",
                format!("{bytes} is out of range (an inbox holds a largest frame)"),
                &format!("give {FRAME_LEN_MAX}..={INBOX_BYTES_MAX_MAX}"),
            ));
        }
        Ok(())
    }

    pub fn validate(&self) -> Result<(), String> {
        self.validate_basics()?;
        self.validate_dcs()?;
        self.validate_nodes()?;
        self.partition_count()?;
        self.validate_replication()?;
        self.validate_machine()
    }

    /// The protocol accepts its section for this topology (UniStore's `f` below the DC
    /// count, say): builds the first node's machine, empty, and drops it.
    fn validate_machine(&self) -> Result<(), String> {
        let node_config = NodeConfig {
            node: NodeId(0),
            topology: self.topology(),
            params: self.params(),
            section: self.section(),
        };
        causeway_protocols::new_node(&self.protocol, node_config, &[])
            .map(drop)
            .map_err(|e| {
                let fix = "see the protocol's settings in docs/OPERATIONS.md";
                field(&format!("protocols.{}", self.protocol), e, fix)
            })
    }

    fn validate_basics(&self) -> Result<(), String> {
        if self.cluster.is_empty() || self.cluster.len() > 64 {
            return Err(field(
                "cluster",
                "must have 1 to 64 characters",
                "name the cluster",
            ));
        }
        if !PROTOCOLS.contains(&self.protocol.as_str()) {
            let fix = format!("use one of: {}", PROTOCOLS.join(", "));
            return Err(field(
                "protocol",
                format!("unknown '{}'", self.protocol),
                &fix,
            ));
        }
        self.validate_sections()?;
        self.validate_secret()?;
        let t = &self.timing;
        for (name, v) in [
            ("timing.replication_interval_ms", t.replication_interval_ms),
            (
                "timing.stabilization_interval_ms",
                t.stabilization_interval_ms,
            ),
            ("timing.request_timeout_ms", t.request_timeout_ms),
        ] {
            if !(v > 0.0 && v < 3_600_000.0) {
                return Err(field(
                    name,
                    format!("{v} is out of range"),
                    "give 0 < ms < 3600000",
                ));
            }
        }
        positive_at_most(
            "storage.batched_sync_interval_ms",
            self.storage.batched_sync_interval_ms,
            BATCHED_SYNC_INTERVAL_MS_MAX,
        )?;
        if self.storage.group_commit == GroupCommit::Node
            && self.storage.durability == Durability::Batched
        {
            return Err(field(
                "storage.group_commit",
                "\"node\" fsyncs every batch, so it cannot go with durability = \"batched\"",
                "use group_commit = \"auto\" (the default) or \"thread\" with batched",
            ));
        }
        positive_at_most(
            "storage.auto_inline_max_us",
            self.storage.auto_inline_max_us,
            AUTO_INLINE_MAX_US_MAX,
        )?;
        if self.storage.checkpoint_records > CHECKPOINT_RECORDS_MAX {
            return Err(field(
                "storage.checkpoint_records",
                format!("{} is out of range", self.storage.checkpoint_records),
                &format!("give 0 (never) ..={CHECKPOINT_RECORDS_MAX}"),
            ));
        }
        if self.runtime.worker_threads > WORKER_THREADS_MAX {
            return Err(field(
                "runtime.worker_threads",
                format!("{} is out of range", self.runtime.worker_threads),
                &format!("give 0 (one thread) ..={WORKER_THREADS_MAX}"),
            ));
        }
        let l = &self.limits;
        for (name, v) in [
            ("limits.link_queue_max", l.link_queue_max),
            ("limits.inbox_max", l.inbox_max),
            ("limits.persist_queue_max", l.persist_queue_max),
            ("limits.sessions_max", l.sessions_max),
            ("limits.client_connections_max", l.client_connections_max),
            (
                "limits.unauthenticated_connections_max",
                l.unauthenticated_connections_max,
            ),
        ] {
            if v == 0 || v > 1 << 24 {
                return Err(field(
                    name,
                    format!("{v} is out of range"),
                    "give 1..=16777216",
                ));
            }
        }
        if l.client_idle_timeout_ms > CLIENT_IDLE_TIMEOUT_MS_MAX {
            return Err(field(
                "limits.client_idle_timeout_ms",
                format!("{} is out of range", l.client_idle_timeout_ms),
                &format!("give 0 (never) to {CLIENT_IDLE_TIMEOUT_MS_MAX}"),
            ));
        }
        self.validate_links()?;
        if l.auth_timeout_ms == 0 || l.auth_timeout_ms > AUTH_TIMEOUT_MS_MAX {
            return Err(field(
                "limits.auth_timeout_ms",
                format!("{} is out of range", l.auth_timeout_ms),
                &format!("give 1..={AUTH_TIMEOUT_MS_MAX}"),
            ));
        }
        if self
            .password
            .as_ref()
            .is_some_and(|p| p.len() > PASSWORD_LEN_MAX)
        {
            return Err(field(
                "password",
                "longer than the limit".to_string(),
                &format!("give at most {PASSWORD_LEN_MAX} bytes"),
            ));
        }
        Ok(())
    }

    fn validate_secret(&self) -> Result<(), String> {
        if self.secret.is_some() && self.secret_file.is_some() {
            return Err(field(
                "secret_file",
                "given together with `secret`",
                "keep only one of them",
            ));
        }
        if self.keyring_dir.is_some() && (self.secret.is_some() || self.secret_file.is_some()) {
            return Err(field(
                "keyring_dir",
                "given together with a cluster secret",
                "keep only one: a node with the secret can derive every node's keys",
            ));
        }
        match &self.secret {
            Some(secret) => check_secret("secret", secret),
            None => Ok(()),
        }
    }

    /// What node `name` proves its links with: its keyring (`keyring_dir`), else the
    /// cluster secret; `None` when the file configures neither.
    pub fn node_keys(&self, name: &str) -> Result<Option<crate::auth::Keys>, String> {
        if let Some(dir) = &self.keyring_dir {
            return crate::keyring::load(self, dir, name).map(Some);
        }
        let secret = self.cluster_secret()?;
        Ok(secret.map(|s| crate::auth::Keys::Secret(std::sync::Arc::from(s.as_bytes()))))
    }

    /// The cluster secret, read from `secret_file` when the file names one; `None` when
    /// the file configures none.
    pub fn cluster_secret(&self) -> Result<Option<Secret>, String> {
        if let Some(secret) = &self.secret {
            return Ok(Some(secret.clone()));
        }
        let Some(path) = &self.secret_file else {
            return Ok(None);
        };
        let fix = "point `secret_file` at a readable file holding the secret";
        let len = std::fs::metadata(path)
            .map_err(|e| field("secret_file", format!("{}: {e}", path.display()), fix))?
            .len();
        if len > SECRET_FILE_LEN_MAX {
            let problem = format!("{} has {len} bytes", path.display());
            return Err(field("secret_file", problem, fix));
        }
        let text = std::fs::read_to_string(path)
            .map_err(|e| field("secret_file", format!("{}: {e}", path.display()), fix))?;
        let secret = text.trim_end_matches(['\n', '\r']).to_string();
        check_secret("secret_file", &secret)?;
        Ok(Some(secret.into()))
    }

    fn validate_dcs(&self) -> Result<(), String> {
        if self.dcs.is_empty() || self.dcs.len() > DCS_MAX {
            let fix = format!("list 1 to {DCS_MAX} DC names, e.g. dcs = [\"dc1\", \"dc2\"]");
            return Err(field("dcs", "wrong number of DCs", &fix));
        }
        for (i, dc) in self.dcs.iter().enumerate() {
            if dc.is_empty() || self.dcs[..i].contains(dc) {
                return Err(field(
                    "dcs",
                    format!("'{dc}' is empty or repeated"),
                    "name each DC once",
                ));
            }
        }
        if let Some(rtt) = &self.rtt_ms {
            let n = self.dcs.len();
            if rtt.len() != n || rtt.iter().any(|row| row.len() != n) {
                let fix =
                    format!("give {n} rows of {n} round-trip times, one per DC in `dcs` order");
                return Err(field("rtt_ms", "the matrix does not match `dcs`", &fix));
            }
            if rtt.iter().flatten().any(|v| !(*v >= 0.0 && *v < 60_000.0)) {
                return Err(field(
                    "rtt_ms",
                    "a value is out of range",
                    "give 0 <= ms < 60000",
                ));
            }
        }
        if !(self.intra_dc_ms >= 0.0 && self.intra_dc_ms < 60_000.0) {
            return Err(field("intra_dc_ms", "out of range", "give 0 <= ms < 60000"));
        }
        Ok(())
    }

    fn validate_nodes(&self) -> Result<(), String> {
        if self.nodes.is_empty() || self.nodes.len() > NODES_MAX {
            return Err(field(
                "nodes",
                "no nodes or too many",
                "declare [[nodes]] tables",
            ));
        }
        for (i, n) in self.nodes.iter().enumerate() {
            let here = format!("nodes[{i}]");
            if n.name.is_empty() || self.nodes[..i].iter().any(|m| m.name == n.name) {
                let problem = format!("name '{}' is empty or repeated", n.name);
                return Err(field(
                    &format!("{here}.name"),
                    problem,
                    "give each node its own name",
                ));
            }
            if !self.dcs.contains(&n.dc) {
                let fix = format!("use one of the DCs in `dcs`: {}", self.dcs.join(", "));
                return Err(field(
                    &format!("{here}.dc"),
                    format!("unknown DC '{}'", n.dc),
                    &fix,
                ));
            }
            let mut used: Vec<SocketAddr> = Vec::new();
            for m in &self.nodes[..i] {
                used.extend(
                    [
                        Some(m.addr),
                        m.client_addr,
                        m.resp_addr,
                        m.metrics_addr,
                        m.http_addr,
                    ]
                    .into_iter()
                    .flatten(),
                );
            }
            for (f, a) in [
                ("addr", Some(n.addr)),
                ("client_addr", n.client_addr),
                ("resp_addr", n.resp_addr),
                ("metrics_addr", n.metrics_addr),
                ("http_addr", n.http_addr),
            ] {
                if a.is_some_and(|a| used.contains(&a)) {
                    let problem =
                        format!("{} is already used by an earlier node", a.expect("some"));
                    return Err(field(
                        &format!("{here}.{f}"),
                        problem,
                        "give every listener its own port",
                    ));
                }
            }
        }
        self.validate_dc_sizes()
    }

    fn validate_dc_sizes(&self) -> Result<(), String> {
        let per_dc = self.nodes_per_dc();
        for dc in &self.dcs {
            let count = self.nodes.iter().filter(|n| &n.dc == dc).count();
            if count as u32 != per_dc {
                let problem = format!(
                    "DC '{dc}' has {count} nodes but DC '{}' has {per_dc}",
                    self.dcs[0]
                );
                return Err(field(
                    "nodes",
                    problem,
                    "give every DC the same number of nodes",
                ));
            }
        }
        Ok(())
    }

    /// Nodes in each DC (validated equal across DCs).
    pub fn nodes_per_dc(&self) -> u32 {
        self.nodes.iter().filter(|n| n.dc == self.dcs[0]).count() as u32
    }

    fn partition_count(&self) -> Result<u32, String> {
        let per_dc = self.nodes_per_dc().max(1);
        let total = match (self.partitions, self.partitions_per_node) {
            (Some(_), Some(_)) => {
                return Err(field(
                    "partitions",
                    "both `partitions` and `partitions_per_node` are set",
                    "keep one of them",
                ))
            }
            (Some(p), None) => p,
            (None, Some(p)) => p.saturating_mul(per_dc),
            (None, None) => per_dc,
        };
        if total < per_dc || total as usize > SLOTS {
            let problem = format!("{total} partitions for {per_dc} nodes per DC");
            return Err(field(
                "partitions",
                problem,
                "give at least one partition per node, and at most one per hash slot (16384)",
            ));
        }
        Ok(total)
    }

    /// DCs storing each partition: `replication_factor`, else every DC.
    pub fn replication(&self) -> u16 {
        self.replication_factor.unwrap_or(self.dcs.len() as u16)
    }

    /// The topology the protocols see.
    pub fn topology(&self) -> Topology {
        let partitions = self.partition_count().expect("validated");
        let dcs = self.dcs.len() as u16;
        Topology::partial(dcs, self.nodes_per_dc(), partitions, self.replication())
    }

    /// `replication_factor` is in 1..=dcs, the protocol accepts partial replication when
    /// it is below `dcs`, and every node stores at least one partition.
    fn validate_replication(&self) -> Result<(), String> {
        let dcs = self.dcs.len() as u16;
        let r = self.replication();
        if !(1..=dcs).contains(&r) {
            let fix = format!(
                "give 1 to {dcs} (the number of DCs; {dcs}, the default, stores every partition in every DC)"
            );
            let problem = format!("{r} is out of range for {dcs} DCs");
            return Err(field("replication_factor", problem, &fix));
        }
        if r == dcs {
            return Ok(());
        }
        let entry = causeway_protocols::entry(&self.protocol)?;
        if entry.requirements().full_replication {
            let partial = partial_replication_protocols();
            let others = if partial.is_empty() {
                "no protocol of this build supports partial replication".to_string()
            } else {
                format!(
                    "or run a protocol that supports partial replication: {}",
                    partial.join(", ")
                )
            };
            let problem = format!(
                "protocol {} needs full replication (every DC stores every partition), but a replication factor of {r} stores each partition in {r} of the {dcs} DCs",
                self.protocol
            );
            let fix = format!("set it to {dcs} or leave it out; {others}");
            return Err(field("replication_factor", problem, &fix));
        }
        self.validate_every_node_stores()
    }

    /// Under partial replication, some node could store nothing: node `i` of DC `d` holds
    /// the partitions `p` with `p % nodes_per_dc == i` whose replicas include `d`. Placement
    /// repeats every lcm(nodes_per_dc, dcs) partitions, so looking that far is enough.
    fn validate_every_node_stores(&self) -> Result<(), String> {
        let topo = self.topology();
        let per_dc = u64::from(topo.nodes_per_dc);
        let period = per_dc / gcd(per_dc, u64::from(topo.dcs)) * u64::from(topo.dcs);
        let stored = |partitions: u64| -> Vec<bool> {
            let mut stored = vec![false; topo.node_count() as usize];
            for p in (0..partitions.min(period) as u32).map(PartitionId) {
                for dc in topo.replicas_of(p) {
                    stored[topo.node_of(dc, p).0 as usize] = true;
                }
            }
            stored
        };
        let Some(empty) = stored(u64::from(topo.partitions)).iter().position(|s| !s) else {
            return Ok(());
        };
        let node = self
            .placements()
            .into_iter()
            .find(|p| p.id.0 as usize == empty)
            .expect("every node id has a placement");
        let problem = format!(
            "node {} of DC {} would store none of the {} partitions with a replication factor of {}",
            node.spec.name, node.spec.dc, topo.partitions, topo.replication_factor
        );
        let fix = if stored(period).iter().all(|s| *s) {
            format!("give at least {period} partitions")
        } else {
            format!(
                "no partition count fills every node: raise the replication factor, or give a number of nodes per DC that shares no factor with the {} DCs",
                topo.dcs
            )
        };
        Err(field("replication_factor", problem, &fix))
    }

    /// Every `[protocols.NAME]` names a known protocol, and the running one's parses.
    fn validate_sections(&self) -> Result<(), String> {
        for name in self.protocols.keys() {
            let Ok(entry) = causeway_protocols::entry(name) else {
                let fix = format!("use one of: {}", PROTOCOLS.join(", "));
                return Err(field(
                    &format!("protocols.{name}"),
                    "unknown protocol",
                    &fix,
                ));
            };
            if name == &self.protocol {
                let fix = "see the protocol's settings in docs/OPERATIONS.md";
                entry
                    .check_section(&self.section())
                    .map_err(|e| field(&format!("protocols.{name}"), e, fix))?;
            }
        }
        Ok(())
    }

    /// The running protocol's section, as the protocols take it (`Null`: defaults).
    pub fn section(&self) -> serde_json::Value {
        match self.protocols.get(&self.protocol) {
            Some(table) => serde_json::to_value(table).expect("a TOML table converts"),
            None => serde_json::Value::Null,
        }
    }

    /// The protocol parameters.
    pub fn params(&self) -> Params {
        let ns = |ms: f64| (ms * 1e6) as u64;
        Params {
            replication_interval_ns: ns(self.timing.replication_interval_ms),
            stabilization_interval_ns: ns(self.timing.stabilization_interval_ms),
            request_timeout_ns: ns(self.timing.request_timeout_ms),
            mutation: None,
            // Real nodes boot apart: their timers are out of phase without help.
            timer_phase_ns: 0,
        }
    }

    /// Every node with its global id: DC d's nodes, in file order, are
    /// `d * nodes_per_dc ..`.
    pub fn placements(&self) -> Vec<Placement> {
        let per_dc = self.nodes_per_dc();
        let mut out = Vec::with_capacity(self.nodes.len());
        for (d, dc) in self.dcs.iter().enumerate() {
            let in_dc = self.nodes.iter().filter(|n| &n.dc == dc);
            for (i, spec) in in_dc.enumerate() {
                out.push(Placement {
                    id: NodeId(d as u32 * per_dc + i as u32),
                    dc: DcId(d as u16),
                    spec: spec.clone(),
                });
            }
        }
        out.sort_by_key(|p| p.id);
        out
    }

    /// The node called `name`, or an error listing the names.
    pub fn placement(&self, name: &str) -> Result<Placement, String> {
        self.placements()
            .into_iter()
            .find(|p| p.spec.name == name)
            .ok_or_else(|| {
                let names: Vec<&str> = self.nodes.iter().map(|n| n.name.as_str()).collect();
                format!(
                    "no node '{name}' in the cluster file; its nodes: {}",
                    names.join(", ")
                )
            })
    }

    /// One-way latency from DC `a` to DC `b` in nanoseconds (half the round trip).
    pub fn one_way_ns(&self, a: DcId, b: DcId) -> u64 {
        let (a, b) = (usize::from(a.0), usize::from(b.0));
        let rtt_ms = if a == b {
            return (self.intra_dc_ms * 1e6) as u64;
        } else if let Some(m) = &self.rtt_ms {
            m[a][b]
        } else if a < 5 && b < 5 {
            PARIS_RTT_MS[a][b]
        } else {
            DEFAULT_FAR_RTT_MS
        };
        (rtt_ms * 1e6 / 2.0) as u64
    }

    /// The log directory of a node.
    pub fn node_dir(&self, spec: &NodeSpec) -> PathBuf {
        spec.data_dir
            .clone()
            .unwrap_or_else(|| self.data_dir.join(&spec.name))
    }
}

/// The protocols of this build that accept a replication factor below the DC count.
pub fn partial_replication_protocols() -> Vec<&'static str> {
    PROTOCOLS
        .iter()
        .copied()
        .filter(|p| causeway_protocols::entry(p).is_ok_and(|e| !e.requirements().full_replication))
        .collect()
}

/// A secret has SECRET_LEN_MIN..=SECRET_LEN_MAX printable ASCII characters.
fn check_secret(name: &str, secret: &str) -> Result<(), String> {
    let fix = format!(
        "give {SECRET_LEN_MIN} to {SECRET_LEN_MAX} printable ASCII characters, e.g. 64 hex digits from `openssl rand -hex 32`"
    );
    if !(SECRET_LEN_MIN..=SECRET_LEN_MAX).contains(&secret.len()) {
        let problem = format!("the secret has {} bytes", secret.len());
        return Err(field(name, problem, &fix));
    }
    if !secret.bytes().all(|b| b.is_ascii_graphic()) {
        return Err(field(
            name,
            "the secret has a character that is not printable ASCII (or a space)",
            &fix,
        ));
    }
    Ok(())
}

fn gcd(a: u64, b: u64) -> u64 {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

/// Builds the cluster file `causeway up` runs: `dcs` DCs of `nodes_per_dc` nodes on
/// loopback; DC i (from 1) serves clients at `port_base + i` and RESP at
/// `resp_port_base + i` (none when `resp_port_base` is 0); node k (from 0) listens for
/// peers at `port_base + 100 + k`.
pub fn local_cluster(
    protocol: &str,
    dcs: u16,
    nodes_per_dc: u32,
    data_dir: PathBuf,
    port_base: u16,
    resp_port_base: u16,
) -> Result<ClusterConfig, String> {
    let names: Vec<String> = (1..=dcs).map(|i| format!("dc{i}")).collect();
    let mut nodes = Vec::new();
    for (d, dc) in names.iter().enumerate() {
        for i in 0..nodes_per_dc {
            let k = d as u32 * nodes_per_dc + i;
            let port = |base: u16, off: u32| -> Result<SocketAddr, String> {
                let p = u32::from(base) + off;
                u16::try_from(p)
                    .map(|p| SocketAddr::from(([127, 0, 0, 1], p)))
                    .map_err(|_| format!("port {p} is out of range; fix: lower --port-base"))
            };
            let first = i == 0;
            nodes.push(NodeSpec {
                name: format!("{dc}-n{}", i + 1),
                dc: dc.clone(),
                addr: port(port_base, 100 + k)?,
                client_addr: if first {
                    Some(port(port_base, d as u32 + 1)?)
                } else {
                    None
                },
                resp_addr: if first && resp_port_base != 0 {
                    Some(port(resp_port_base, d as u32 + 1)?)
                } else {
                    None
                },
                metrics_addr: None,
                http_addr: None,
                data_dir: None,
            });
        }
    }
    let config = ClusterConfig {
        cluster: "local".into(),
        protocol: protocol.into(),
        partitions: None,
        partitions_per_node: Some(4),
        replication_factor: None,
        data_dir,
        dcs: names,
        rtt_ms: None,
        intra_dc_ms: 0.0,
        password: None,
        session_scope: SessionScope::Endpoint,
        secret: None,
        secret_file: None,
        keyring_dir: None,
        insecure: false,
        tls: None,
        limits: Limits::default(),
        timing: Timing::default(),
        storage: StorageConfig::default(),
        runtime: RuntimeConfig::default(),
        protocols: Default::default(),
        nodes,
    };
    config.validate()?;
    Ok(config)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn local() -> ClusterConfig {
        local_cluster("eventual", 3, 2, "/tmp/x".into(), 7100, 7000).unwrap()
    }

    #[test]
    fn a_tls_section_round_trips_and_unknown_tls_keys_are_refused() {
        let mut c = local();
        c.tls = Some(TlsConfig {
            cert_file: "tls/node.pem".into(),
            key_file: "tls/node.key".into(),
            ca_file: "tls/ca.pem".into(),
            server_name: Some("node.example".into()),
        });
        let text = c.to_toml();
        assert!(text.contains("[tls]"), "{text}");
        assert_eq!(ClusterConfig::parse(&text).unwrap(), c);
        let bad = text.replace("server_name", "servername");
        let e = ClusterConfig::parse(&bad).unwrap_err();
        assert!(e.contains("servername"), "{e}");
    }

    #[test]
    fn local_cluster_round_trips_through_toml_and_places_nodes() {
        let c = local();
        let back = ClusterConfig::parse(&c.to_toml()).unwrap();
        assert_eq!(back, c);
        let p = c.placement("dc2-n2").unwrap();
        assert_eq!((p.id, p.dc), (NodeId(3), DcId(1)));
        assert_eq!(p.spec.addr.port(), 7203);
        assert_eq!(
            c.placement("dc3-n1")
                .unwrap()
                .spec
                .client_addr
                .unwrap()
                .port(),
            7103
        );
        assert_eq!(c.topology(), Topology::full(3, 2, 8));
        assert_eq!(c.one_way_ns(DcId(0), DcId(1)), 44_140_000);
    }

    #[test]
    fn errors_name_the_field_and_the_fix() {
        let mut c = local();
        c.protocol = "nope".into();
        let e = c.validate().unwrap_err();
        assert!(
            e.contains("`protocol`") && e.contains("fix: use one of"),
            "{e}"
        );
        let mut c = local();
        c.nodes[3].addr = c.nodes[0].addr;
        let e = c.validate().unwrap_err();
        assert!(e.contains("nodes[3].addr") && e.contains("own port"), "{e}");
        let mut c = local();
        c.nodes[2].metrics_addr = c.nodes[0].client_addr;
        let e = c.validate().unwrap_err();
        assert!(e.contains("nodes[2].metrics_addr"), "{e}");
        c.nodes[2].metrics_addr = Some("127.0.0.1:9102".parse().unwrap());
        let text = c.to_toml();
        assert!(text.contains("metrics_addr = \"127.0.0.1:9102\""), "{text}");
        assert_eq!(ClusterConfig::parse(&text).unwrap(), c);
        c.nodes[1].http_addr = c.nodes[2].metrics_addr;
        assert!(c.validate().unwrap_err().contains("nodes[2].metrics_addr"));
        c.nodes[1].http_addr = Some("127.0.0.1:9000".parse().unwrap());
        let text = c.to_toml();
        assert!(text.contains("http_addr = \"127.0.0.1:9000\""), "{text}");
        assert_eq!(ClusterConfig::parse(&text).unwrap(), c);
        let mut c = local();
        c.nodes.pop();
        assert!(c.validate().unwrap_err().contains("same number of nodes"));
        let mut c = local();
        c.rtt_ms = Some(vec![vec![0.0; 2]; 2]);
        assert!(c.validate().unwrap_err().contains("`rtt_ms`"));
        let e = ClusterConfig::parse("cluster = 1").unwrap_err();
        assert!(e.contains("not valid"), "{e}");
        assert!(c.placement("ghost").is_err());
    }

    #[test]
    fn worker_threads_default_to_one_thread_round_trip_and_are_range_checked() {
        let mut c = local();
        assert_eq!(c.runtime.worker_threads, 0, "one thread by default");
        c.runtime.worker_threads = 4;
        let text = c.to_toml();
        assert!(text.contains("worker_threads = 4"), "{text}");
        assert_eq!(ClusterConfig::parse(&text).unwrap(), c);
        c.runtime.worker_threads = WORKER_THREADS_MAX + 1;
        let e = c.validate().unwrap_err();
        assert!(
            e.contains("runtime.worker_threads") && e.contains("out of range"),
            "{e}"
        );
        let e = ClusterConfig::parse(&text.replace("worker_threads", "workers")).unwrap_err();
        assert!(e.contains("workers"), "{e}");
    }

    #[test]
    fn group_commit_is_auto_by_default_and_node_refuses_batched() {
        let mut c = local();
        assert_eq!(c.storage.group_commit, GroupCommit::Auto);
        assert_eq!(c.storage.auto_inline_max_us, AUTO_INLINE_MAX_US_DEFAULT);
        c.storage.durability = Durability::Batched;
        c.validate()
            .expect("auto goes with batched (the thread writes)");
        c.storage.durability = Durability::Sync;
        c.storage.auto_inline_max_us = 0;
        let e = c.validate().unwrap_err();
        assert!(e.contains("storage.auto_inline_max_us"), "{e}");
        c.storage.auto_inline_max_us = AUTO_INLINE_MAX_US_MAX + 1;
        assert!(c.validate().is_err(), "above the limit");
        c.storage.auto_inline_max_us = 250;
        c.storage.group_commit = GroupCommit::Node;
        let text = c.to_toml();
        assert!(text.contains("group_commit = \"node\""), "{text}");
        assert_eq!(ClusterConfig::parse(&text).unwrap(), c);
        c.storage.durability = Durability::Batched;
        let e = c.validate().unwrap_err();
        assert!(
            e.contains("storage.group_commit") && e.contains("batched"),
            "{e}"
        );
        let e = ClusterConfig::parse(&text.replace("\"node\"", "\"disk\"")).unwrap_err();
        assert!(e.contains("disk"), "{e}");
    }

    #[test]
    fn link_dead_after_and_inbox_bytes_have_defaults_round_trip_and_are_range_checked() {
        let mut c = local();
        assert_eq!(c.limits.link_dead_after_ms, LINK_DEAD_AFTER_MS);
        assert_eq!(c.limits.inbox_bytes_max, INBOX_BYTES_MAX);
        c.limits.link_dead_after_ms = 2_000;
        c.limits.inbox_bytes_max = 32 << 20;
        let text = c.to_toml();
        assert!(text.contains("link_dead_after_ms = 2000"), "{text}");
        assert_eq!(ClusterConfig::parse(&text).unwrap(), c);
        for dead in [0, LINK_DEAD_AFTER_MS_MIN - 1, LINK_DEAD_AFTER_MS_MAX + 1] {
            c.limits.link_dead_after_ms = dead;
            let e = c.validate().unwrap_err();
            assert!(e.contains("limits.link_dead_after_ms"), "{e}");
        }
        c.limits.link_dead_after_ms = LINK_DEAD_AFTER_MS_MIN;
        c.limits.inbox_bytes_max = FRAME_LEN_MAX - 1;
        let e = c.validate().unwrap_err();
        assert!(
            e.contains("limits.inbox_bytes_max") && e.contains("largest frame"),
            "{e}"
        );
        c.limits.inbox_bytes_max = FRAME_LEN_MAX;
        c.validate().expect("one largest frame is enough");
    }

    #[test]
    fn transparent_huge_pages_are_off_by_default_and_round_trip() {
        let mut c = local();
        assert!(
            !c.runtime.transparent_huge_pages,
            "off for the node by default"
        );
        c.runtime.transparent_huge_pages = true;
        let text = c.to_toml();
        assert!(text.contains("transparent_huge_pages = true"), "{text}");
        assert_eq!(ClusterConfig::parse(&text).unwrap(), c);
    }

    #[test]
    fn debug_output_shows_neither_the_secret_nor_the_password() {
        let mut c = local();
        c.secret = Some("cluster-secret-0123456789".into());
        c.password = Some("client-password-42".into());
        let shown = format!("{c:?}");
        assert!(!shown.contains("cluster-secret") && !shown.contains("client-password"));
        assert!(shown.contains(causeway_core::secret::REDACTED), "{shown}");
        let text = c.to_toml();
        assert!(
            text.contains("cluster-secret-0123456789"),
            "the file keeps it: {text}"
        );
    }

    #[test]
    fn a_secret_is_length_checked_and_read_from_its_file() {
        let mut c = local();
        assert_eq!(c.cluster_secret(), Ok(None));
        c.limits.client_idle_timeout_ms = CLIENT_IDLE_TIMEOUT_MS_MAX + 1;
        let e = c.validate().unwrap_err();
        assert!(e.contains("`limits.client_idle_timeout_ms`"), "{e}");
        c.limits.client_idle_timeout_ms = 0;
        c.secret = Some("short".into());
        let e = c.validate().unwrap_err();
        assert!(e.contains("`secret`") && e.contains("5 bytes"), "{e}");
        c.secret = Some("x".repeat(SECRET_LEN_MAX + 1).into());
        assert!(c.validate().unwrap_err().contains("`secret`"));
        c.secret = Some("has a space in it, sadly".into());
        assert!(c.validate().unwrap_err().contains("printable"));
        c.secret = Some("0123456789abcdef".into());
        let back = ClusterConfig::parse(&c.to_toml()).unwrap();
        assert_eq!(back.cluster_secret(), Ok(Some("0123456789abcdef".into())));
        let dir = std::env::temp_dir().join(format!("cw-secret-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("secret");
        std::fs::write(&path, "fedcba9876543210fedcba\n").unwrap();
        c.secret_file = Some(path.clone());
        assert!(c.validate().unwrap_err().contains("together with `secret`"));
        c.secret = None;
        assert_eq!(
            c.cluster_secret(),
            Ok(Some("fedcba9876543210fedcba".into()))
        );
        std::fs::write(&path, "tiny\n").unwrap();
        assert!(c.cluster_secret().unwrap_err().contains("`secret_file`"));
        c.secret_file = Some(dir.join("missing"));
        assert!(c.cluster_secret().unwrap_err().contains("missing"));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn the_replication_factor_defaults_to_every_dc_and_is_range_checked() {
        let c = local();
        assert_eq!((c.replication(), c.topology().replication_factor), (3, 3));
        assert!(!c.to_toml().contains("replication_factor"), "left out");
        let text = c.to_toml().replace(
            "partitions_per_node = 4",
            "partitions_per_node = 4\nreplication_factor = 3",
        );
        let full = ClusterConfig::parse(&text).unwrap();
        assert_eq!(full.replication_factor, Some(3));
        assert_eq!(full.topology(), Topology::full(3, 2, 8), "3 of 3 is full");
        for bad in [0, 4] {
            let text = text.replace(
                "replication_factor = 3",
                &format!("replication_factor = {bad}"),
            );
            let e = ClusterConfig::parse(&text).unwrap_err();
            assert!(
                e.contains("`replication_factor`")
                    && e.contains(&format!("{bad} is out of range for 3 DCs"))
                    && e.contains("fix: give 1 to 3"),
                "{e}"
            );
        }
    }

    #[test]
    fn a_protocol_needing_full_replication_refuses_a_smaller_factor_by_name() {
        for protocol in ["eventual", "cure", "cureft", "unistore"] {
            let mut c = local();
            c.protocol = protocol.into();
            c.replication_factor = Some(2);
            let e = ClusterConfig::parse(&c.to_toml()).unwrap_err();
            assert!(
                e.contains("`replication_factor`")
                    && e.contains(&format!("protocol {protocol} needs full replication"))
                    && e.contains("2 of the 3 DCs")
                    && e.contains("fix: set it to 3 or leave it out"),
                "{e}"
            );
            for partial in partial_replication_protocols() {
                assert!(e.contains(partial), "{e} names {partial}");
            }
        }
        for p in partial_replication_protocols() {
            assert!(
                !causeway_protocols::entry(p)
                    .unwrap()
                    .requirements()
                    .full_replication
            );
        }
    }

    #[test]
    fn partial_placement_follows_the_topology_and_every_node_must_store_a_partition() {
        let mut c = local();
        c.replication_factor = Some(2);
        assert_eq!(c.topology(), Topology::partial(3, 2, 8, 2));
        assert_eq!(c.validate_every_node_stores(), Ok(()));
        // 2 DCs of 2 nodes, each partition in one DC: DC 0 stores the even partitions,
        // which all sit on its first node, whatever their number.
        let mut c = local_cluster("eventual", 2, 2, "/tmp/x".into(), 7100, 7000).unwrap();
        c.replication_factor = Some(1);
        let e = c.validate_every_node_stores().unwrap_err();
        assert!(
            e.contains("node dc1-n2 of DC dc1 would store none of the 8 partitions")
                && e.contains("no partition count fills every node"),
            "{e}"
        );
        // 3 DCs of 2 nodes, one replica each: 2 partitions leave nodes empty, 6 do not.
        let mut c = local();
        (c.partitions_per_node, c.partitions) = (None, Some(2));
        c.replication_factor = Some(1);
        let e = c.validate_every_node_stores().unwrap_err();
        assert!(
            e.contains("node dc1-n2 of DC dc1 would store none of the 2 partitions")
                && e.contains("fix: give at least 6 partitions"),
            "{e}"
        );
        c.partitions = Some(6);
        assert_eq!(c.validate_every_node_stores(), Ok(()));
        for n in 0..6 {
            assert!(!c.topology().partitions_of(NodeId(n)).is_empty());
        }
    }

    #[test]
    fn a_partial_protocol_takes_a_smaller_factor_from_the_file() {
        let Some(protocol) = partial_replication_protocols().first().copied() else {
            eprintln!("no protocol of this build supports partial replication");
            return;
        };
        let mut c = local();
        c.protocol = protocol.into();
        c.replication_factor = Some(2);
        let text = c.to_toml();
        assert!(text.contains("replication_factor = 2"), "{text}");
        let parsed = ClusterConfig::parse(&text).unwrap();
        assert_eq!(parsed, c);
        assert_eq!(parsed.topology(), Topology::partial(3, 2, 8, 2));
    }

    #[test]
    fn a_unistore_f_of_the_cluster_file_is_checked_against_the_dcs() {
        let mut c = local();
        c.protocol = "unistore".into();
        let text = format!("{}\n[protocols.unistore]\nf = 1\n", c.to_toml());
        let parsed = ClusterConfig::parse(&text).unwrap();
        assert_eq!(parsed.section(), serde_json::json!({ "f": 1 }));
        let text = text.replace("f = 1", "f = 3");
        let e = ClusterConfig::parse(&text).unwrap_err();
        assert!(
            e.contains("`protocols.unistore`") && e.contains("f = 3 needs at least"),
            "{e}"
        );
    }
}
