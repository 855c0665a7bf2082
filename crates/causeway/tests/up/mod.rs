//! `causeway up` as a test fixture: starts a local cluster on free loopback ports (DC i,
//! from 0, serves clients at BASE+1+i and RESP at BASE+51+i; node k listens at BASE+100+k
//! and serves metrics at BASE+60+k), in its own process group, and reads its banner;
//! restarts it on the same data after a clean stop.
//! Learns the node pids from `DATA/up.pids`, SIGKILLs a whole DC, runs `causeway cli` and
//! plain RESP commands. Dropping it stops the group (SIGINT, then SIGKILL) and removes the
//! directory (kept on failure or when `CAUSEWAY_KEEP_LOGS` is set).

#![allow(dead_code)]

use std::io::{BufRead, BufReader, Lines, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, ChildStdout, Command, ExitStatus, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How long `up` may take to stop after SIGINT.
const STOP_TIMEOUT: Duration = Duration::from_secs(30);

/// The ports a cluster of `dcs` DCs and `nodes` nodes uses from `base` (layout above).
fn ports(base: u16, dcs: u16, nodes: u16) -> Vec<u16> {
    let dc_ports = (1..=dcs).flat_map(|i| [base + i, base + 50 + i]);
    let node_ports = (0..nodes).flat_map(|k| [base + 60 + k, base + 100 + k]);
    dc_ports.chain(node_ports).collect()
}

/// Port bases handed out in this test process (tests run in parallel), never twice.
static HANDED_OUT: Mutex<Vec<u16>> = Mutex::new(Vec::new());

/// Port bases lie in [BASE_LO, BASE_HI]: below Linux's ephemeral range (32768-60999 by
/// default), where the outgoing connections of every process on the machine take their
/// source ports. A base inside it was free when checked and then taken by some node's
/// outgoing link before `up` bound it (CI, 2026-11-23: `metrics_addr` already in use).
const BASE_LO: u16 = 10_000;
const BASE_HI: u16 = 32_000;

/// How many times [`Up::start`] moves to a new base when a port was taken between the check
/// and `up`'s bind (another process on the machine can always win that race).
const START_TRIES: u32 = 3;

/// A port base whose ports (for `dcs` DCs and `nodes` nodes) are all free now. Bases are
/// 200 apart, so two clusters' ranges never overlap.
pub fn free_base(dcs: u16, nodes: u16) -> u16 {
    let slots = u32::from((BASE_HI - BASE_LO) / 200);
    let mut base = BASE_LO + (std::process::id() % slots) as u16 * 200;
    loop {
        let wanted = ports(base, dcs, nodes);
        let held: Vec<_> = wanted
            .iter()
            .filter_map(|p| TcpListener::bind(("127.0.0.1", *p)).ok())
            .collect();
        let mut used = HANDED_OUT.lock().expect("bases lock");
        if held.len() == wanted.len() && !used.contains(&base) {
            used.push(base);
            return base;
        }
        base = if base + 200 > BASE_HI {
            BASE_LO
        } else {
            base + 200
        };
    }
}

/// `up`'s arguments for a cluster on ports from `base` (layout in the module doc).
fn up_args(dcs: u16, nodes: u16, data: &std::path::Path, base: u16, extra: &[&str]) -> Vec<String> {
    let mut args: Vec<String> = [
        "up",
        "--dcs",
        &dcs.to_string(),
        "--nodes-per-dc",
        &nodes.to_string(),
        "--data",
        data.to_str().expect("a UTF-8 temporary directory"),
        "--port-base",
        &base.to_string(),
        "--resp-port-base",
        &(base + 50).to_string(),
        "--metrics-port-base",
        &(base + 60).to_string(),
        // The cluster page has its own test (cluster_page.rs); its port could clash.
        "--http-port",
        "0",
    ]
    .map(String::from)
    .to_vec();
    args.extend(extra.iter().map(|a| a.to_string()));
    args
}

/// A running `causeway up`.
pub struct Up {
    child: Option<Child>,
    lines: Option<Lines<BufReader<ChildStdout>>>,
    pub banner: String,
    pub data: PathBuf,
    pub base: u16,
    /// Pids of every node, read once the cluster is up: `(name, dc, pid)`.
    pub pids: Vec<(String, String, i32)>,
    /// `up`'s arguments, for a restart.
    args: Vec<String>,
}

impl Up {
    /// Runs `causeway up --dcs DCS --nodes-per-dc NODES` plus `extra` on free ports (metrics
    /// on) and waits for its banner. A port taken between the check and `up`'s bind moves
    /// the cluster to a new base, up to [`START_TRIES`] times.
    pub fn start(name: &str, dcs: u16, nodes: u16, extra: &[&str]) -> Up {
        let data = std::env::temp_dir().join(format!("causeway-it-{name}-{}", std::process::id()));
        for attempt in 1..=START_TRIES {
            let _ = std::fs::remove_dir_all(&data);
            std::fs::create_dir_all(&data).expect("create the data directory");
            let base = free_base(dcs, dcs * nodes);
            let mut up = Up {
                child: None,
                lines: None,
                banner: String::new(),
                data: data.clone(),
                base,
                pids: Vec::new(),
                args: up_args(dcs, nodes, &data, base, extra),
            };
            match up.try_launch() {
                Ok(()) => return up,
                Err(e) if e.contains("Address already in use") && attempt < START_TRIES => {
                    eprintln!("port race at base {base} (attempt {attempt}), moving: {e}");
                    if let Some(mut child) = up.child.take() {
                        let _ = child.wait();
                    }
                }
                Err(e) => panic!("{e}"),
            }
        }
        unreachable!("the last attempt returns or panics")
    }

    /// Starts `up` with the arguments of [`Up::start`] and reads its banner and pids
    /// (after [`Up::interrupt`], to start it again on the same data).
    pub fn launch(&mut self) {
        if let Err(e) = self.try_launch() {
            panic!("{e}");
        }
    }

    /// [`Up::launch`], returning why `up` exited before its banner.
    fn try_launch(&mut self) -> Result<(), String> {
        let stderr = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.data.join("up.stderr"))
            .expect("up's stderr file");
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_causeway"));
        cmd.args(&self.args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(stderr)
            .process_group(0);
        let mut child = cmd.spawn().expect("start causeway up");
        self.lines = Some(BufReader::new(child.stdout.take().expect("stdout")).lines());
        self.child = Some(child);
        self.banner.clear();
        self.read_banner()?;
        self.pids = self.read_pids();
        Ok(())
    }

    /// Stops the cluster cleanly (SIGINT) and starts it again on the same data and ports.
    pub fn restart(&mut self) {
        let (status, rest) = self.interrupt();
        assert!(status.success(), "up exited with {status}: {rest:?}");
        self.launch();
    }

    fn read_banner(&mut self) -> Result<(), String> {
        for line in self.lines.as_mut().expect("up runs").by_ref() {
            let line = line.expect("read up's output");
            self.banner.push_str(&line);
            self.banner.push('\n');
            if line.contains("press Ctrl-C") {
                return Ok(());
            }
        }
        Err(format!(
            "up exited before its banner: {}{}",
            self.banner,
            self.stderr()
        ))
    }

    /// `DATA/up.pids`: `NAME DC PID` per line.
    pub fn read_pids(&self) -> Vec<(String, String, i32)> {
        let text = std::fs::read_to_string(self.data.join("up.pids")).expect("up.pids");
        text.lines()
            .map(|l| {
                let f: Vec<&str> = l.split_whitespace().collect();
                assert_eq!(f.len(), 3, "a NAME DC PID line: {l:?}");
                (f[0].into(), f[1].into(), f[2].parse().expect("a pid"))
            })
            .collect()
    }

    /// The native client address of DC `dc` (from 0).
    pub fn client_addr(&self, dc: u16) -> String {
        format!("127.0.0.1:{}", self.base + 1 + dc)
    }

    /// The RESP address of DC `dc` (from 0).
    pub fn resp_addr(&self, dc: u16) -> String {
        format!("127.0.0.1:{}", self.base + 51 + dc)
    }

    /// What `up` wrote to stderr so far.
    /// Runs `causeway load` (6 clients, 200 keys, `workload` for `seconds`) over `addrs`
    /// with a history in the cluster's directory, then `causeway check --guarantee
    /// GUARANTEE` on it; both must succeed and the check say `ok:`. Returns both outputs.
    pub fn load_and_check(
        &self,
        addrs: &[String],
        workload: &str,
        seconds: u32,
        guarantee: &str,
    ) -> (String, String) {
        let history = self.data.join("load.jsonl");
        let history = history.to_str().expect("a UTF-8 path");
        let (addrs, seconds) = (addrs.join(","), seconds.to_string());
        let (ok, out) = causeway(&[
            "load",
            "--addr",
            &addrs,
            "--workload",
            workload,
            "--keys",
            "200",
            "--clients",
            "6",
            "--duration",
            &seconds,
            "--history",
            history,
        ]);
        assert!(ok, "causeway load: {out}");
        let (ok, checked) = causeway(&["check", "--guarantee", guarantee, "--history", history]);
        assert!(ok, "causeway check: {checked}");
        assert!(checked.starts_with("ok:"), "{checked}");
        (out, checked)
    }

    pub fn stderr(&self) -> String {
        std::fs::read_to_string(self.data.join("up.stderr")).unwrap_or_default()
    }

    /// SIGKILLs every node process of DC `dc_name` (`dc1`...); returns their pids.
    pub fn kill_dc(&self, dc_name: &str) -> Vec<i32> {
        let pids: Vec<i32> = self
            .pids
            .iter()
            .filter(|(_, dc, _)| dc == dc_name)
            .map(|(_, _, pid)| *pid)
            .collect();
        for pid in &pids {
            // SAFETY: kill(2) on a node process our `up` child started and has not reaped.
            assert_eq!(unsafe { libc::kill(*pid, libc::SIGKILL) }, 0, "kill {pid}");
        }
        pids
    }

    /// SIGINT to `up` alone (as Ctrl-C would): waits for it and returns its status and the
    /// rest of its output.
    pub fn interrupt(&mut self) -> (ExitStatus, Vec<String>) {
        let mut child = self.child.take().expect("up runs");
        // SAFETY: kill(2) on our child.
        unsafe {
            libc::kill(child.id() as libc::pid_t, libc::SIGINT);
        }
        let status = wait_for(&mut child, STOP_TIMEOUT).expect("up stops after SIGINT");
        let rest = self.rest_of_output();
        (status, rest)
    }

    /// Waits for `up` to exit by itself; its status and the rest of its output.
    pub fn wait_exit(&mut self) -> (ExitStatus, Vec<String>) {
        let mut child = self.child.take().expect("up runs");
        let status = wait_for(&mut child, STOP_TIMEOUT).expect("up exits by itself");
        let rest = self.rest_of_output();
        (status, rest)
    }

    /// What `up` printed after its banner, to its exit.
    fn rest_of_output(&mut self) -> Vec<String> {
        let lines = self.lines.take().expect("up ran");
        lines.map_while(Result::ok).collect()
    }

    /// Node processes of this cluster still alive (by pid, checked against its command line,
    /// so a reused pid does not count).
    pub fn live_nodes(&self) -> Vec<String> {
        let mark = self.data.to_string_lossy().to_string();
        self.pids
            .iter()
            .filter(|(_, _, pid)| {
                let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
                String::from_utf8_lossy(&cmdline).contains(&mark)
            })
            .map(|(name, _, pid)| format!("{name} (pid {pid})"))
            .collect()
    }
}

/// Waits up to `timeout` for `child` to exit.
fn wait_for(child: &mut Child, timeout: Duration) -> Option<ExitStatus> {
    let deadline = Instant::now() + timeout;
    loop {
        if let Ok(Some(status)) = child.try_wait() {
            return Some(status);
        }
        if Instant::now() > deadline {
            return None;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

impl Drop for Up {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let group = child.id() as libc::pid_t;
            // SAFETY: kill(2) on the process group of a child we spawned (its nodes).
            unsafe { libc::kill(-group, libc::SIGINT) };
            if wait_for(&mut child, STOP_TIMEOUT).is_none() {
                // SAFETY: as above.
                unsafe { libc::kill(-group, libc::SIGKILL) };
                let _ = child.wait();
            }
        }
        if !std::thread::panicking() && std::env::var_os("CAUSEWAY_KEEP_LOGS").is_none() {
            let _ = std::fs::remove_dir_all(&self.data);
        } else {
            eprintln!("cluster data and logs kept in {}", self.data.display());
        }
    }
}

/// Runs `causeway ARGS`: whether it succeeded, and its stdout and stderr.
pub fn causeway(args: &[&str]) -> (bool, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_causeway"))
        .args(args)
        .output()
        .expect("run causeway");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

/// Runs `causeway cli --addr ADDR -c SCRIPT`: whether it succeeded, and its stdout and
/// stderr.
pub fn cli_result(addr: &str, script: &str) -> (bool, String) {
    causeway(&["cli", "--addr", addr, "-c", script])
}

/// Runs a CLI script that must succeed; its output.
pub fn cli(addr: &str, script: &str) -> String {
    let (ok, text) = cli_result(addr, script);
    assert!(ok, "cli {script}: {text}");
    text
}

/// One RESP2 command on a connection; its reply: a status, error or integer line as sent
/// (`+OK`, `-ERR ...`, `:1`), a bulk string's body, or `(nil)`. Arrays are not read.
pub fn resp_command(conn: &mut BufReader<TcpStream>, args: &[&str]) -> String {
    resp_pipeline(conn, &[args]).remove(0)
}

/// Sends the commands in one write (a pipeline) and reads a reply for each: a simple
/// string, error or integer as its line (`+OK`, `:3`), a bulk string as its text, a nil
/// as `(nil)` (no arrays).
pub fn resp_pipeline(conn: &mut BufReader<TcpStream>, cmds: &[&[&str]]) -> Vec<String> {
    let mut frames = String::new();
    for args in cmds {
        frames.push_str(&format!("*{}\r\n", args.len()));
        for a in *args {
            frames.push_str(&format!("${}\r\n{a}\r\n", a.len()));
        }
    }
    conn.get_mut()
        .write_all(frames.as_bytes())
        .expect("send RESP commands");
    cmds.iter().map(|_| resp_reply(conn)).collect()
}

/// Reads one reply (see [`resp_pipeline`]).
fn resp_reply(conn: &mut BufReader<TcpStream>) -> String {
    let mut header = String::new();
    conn.read_line(&mut header).expect("a RESP reply");
    let header = header.trim_end().to_string();
    let Some(len) = header.strip_prefix('$') else {
        return header;
    };
    let Ok(len) = len.parse::<usize>() else {
        return "(nil)".into();
    };
    let mut body = vec![0; len + 2];
    conn.read_exact(&mut body).expect("a bulk string body");
    String::from_utf8_lossy(&body[..len]).to_string()
}

/// A RESP connection (30 s read timeout).
pub fn resp_connect(addr: &str) -> BufReader<TcpStream> {
    let stream = TcpStream::connect(addr).expect("connect to RESP");
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .expect("read timeout");
    BufReader::new(stream)
}

/// Adds `member` to the set `set` in a txn of its own: whether it was acknowledged.
pub fn add_member(client: &mut causeway_client::Client, set: &str, member: &str) -> bool {
    let add = causeway_core::crdt::Update::Add(member.as_bytes().to_vec());
    client
        .begin()
        .and_then(|_| client.update(set, add))
        .and_then(|_| client.commit())
        .is_ok()
}

/// How long [`members_at`] retries a read the cluster aborts.
const ABORTED_READ_RETRY_MAX: std::time::Duration = std::time::Duration::from_secs(20);

/// The members of the set `set` as DC `dc` of `up` reads them. A read the cluster aborts
/// is retried, as any client retries an abort: right after a state transfer, a partition
/// holds the image as its checkpoint, and a snapshot from a DC vector that the other
/// partitions have not yet brought past it is "too old" there until they do (seen once
/// in CI, under load, at the frozen DC of `up_long_outage`).
pub fn members_at(up: &Up, dc: u16, set: &str) -> std::collections::BTreeSet<String> {
    use causeway_core::{crdt::ObjType, Key, ObjValue};
    let addr = up.client_addr(dc);
    let mut client = causeway_client::Client::connect(addr.as_str()).expect("a reader connects");
    let began = std::time::Instant::now();
    let values = loop {
        client.begin().expect("begin");
        match client.read(vec![(Key::from(set), ObjType::Set)]) {
            Ok(values) => break values,
            Err(causeway_client::ClientError::Aborted(why))
                if began.elapsed() < ABORTED_READ_RETRY_MAX =>
            {
                eprintln!("DC {dc}'s read of {set} aborted ({why}); retrying");
                let _ = client.abort();
                std::thread::sleep(std::time::Duration::from_millis(200));
            }
            Err(e) => panic!("read the set: {e:?}"),
        }
    };
    client.commit().expect("commit the read");
    match &values[0].value {
        ObjValue::Set(members) => members
            .iter()
            .map(|b| String::from_utf8_lossy(b).into())
            .collect(),
        other => panic!("a set, not {other:?}"),
    }
}
