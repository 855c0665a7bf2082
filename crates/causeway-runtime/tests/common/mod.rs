//! What the pre-authentication memory tests share (`preauth_native.rs`,
//! `preauth_peer.rs`): a real node on loopback with a password, and 1,000 connections that
//! never authenticate, most declaring a 2 MB first frame and streaming part of it, the
//! rest sending small frames. The node runs in the test's process (so the attackers'
//! own sockets count too: they share one static buffer); each port's test is its own
//! binary, so no other test's memory, freed or not, mixes into its measure.
#![allow(dead_code)]

use causeway_client::{Client, Options};
use causeway_runtime::config::{local_cluster, ClusterConfig};
pub use causeway_runtime::Server;
use std::net::SocketAddr;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

pub const PASSWORD: &str = "preauth-memory-test-password";
/// Connections that never authenticate, per port (the default cap is 1,024).
pub const ATTACKERS: usize = 1_000;
/// Of them, those that send small frames rather than one large one.
pub const SMALL_SENDERS: usize = 200;
/// The first frame's declared length, and how much of it each large sender streams.
pub const DECLARED_BYTES: u32 = 2_000_000;
pub const PARTIAL_BYTES: usize = 256 << 10;
/// Most growth of the peak RSS one phase may cause, in KiB.
pub const RSS_GROWTH_KIB_MAX: u64 = 64 << 10;
/// Most time one step of the test waits.
pub const WAIT: Duration = Duration::from_secs(20);

/// What every large sender streams, shared (a buffer per attacker would count as the
/// node's growth: they share its process).
pub static CHUNK: [u8; 16 << 10] = [0x55; 16 << 10];
/// A small frame: a 4-byte length, then bytes no frame decodes to.
pub static SMALL_FRAMES: [u8; 64 * 20] = small_frames();

pub const fn small_frames() -> [u8; 64 * 20] {
    let mut out = [0xffu8; 64 * 20];
    let mut i = 0;
    while i < 64 {
        out[i * 20] = 0;
        out[i * 20 + 1] = 0;
        out[i * 20 + 2] = 0;
        out[i * 20 + 3] = 16;
        i += 1;
    }
    out
}

pub fn free_addr() -> SocketAddr {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap()
}

pub fn cluster(dir: &std::path::Path) -> ClusterConfig {
    let mut c = local_cluster("eventual", 1, 1, dir.to_path_buf(), 7100, 7000).unwrap();
    c.nodes[0].addr = free_addr();
    c.nodes[0].client_addr = Some(free_addr());
    c.nodes[0].resp_addr = None;
    c.password = Some(PASSWORD.into());
    c.secret = Some("preauth-memory-test-secret-0123".into());
    c.validate().unwrap();
    c
}

/// A field of `/proc/self/status` (`VmRSS`, `VmHWM`), in KiB.
pub fn status_kib(field: &str) -> u64 {
    let text = std::fs::read_to_string("/proc/self/status").expect("status");
    let line = text
        .lines()
        .find(|l| l.starts_with(field))
        .expect("the field");
    let digits: String = line.chars().filter(char::is_ascii_digit).collect();
    digits.parse().expect("a number")
}

/// The RSS now, with the peak reset to it where the kernel allows (else the peak stays
/// the process's, which only makes the check stricter).
pub fn reset_peak_kib() -> u64 {
    let _ = std::fs::write("/proc/self/clear_refs", "5");
    status_kib("VmRSS")
}

/// A native client with the password: a write and a read of it.
pub fn served(addr: SocketAddr, value: &[u8]) {
    let options = Options {
        connect_timeout_ms: 10_000,
        password: Some(PASSWORD.into()),
        ..Options::default()
    };
    let mut client = Client::connect_with(addr, options).expect("the client is served");
    client.begin().unwrap();
    client.set("k", value.to_vec()).unwrap();
    client.commit().unwrap();
    client.begin().unwrap();
    assert_eq!(client.get("k").unwrap(), Some(value.to_vec()));
    client.commit().unwrap();
}

/// One connection that never authenticates: a first frame declaring 2 MB, streamed in
/// part, or (`small`) small frames. Returns the connection (still open if the node has
/// not closed it) and the first bytes the node answered.
pub async fn attack(addr: SocketAddr, small: bool) -> (TcpStream, Vec<u8>) {
    let mut stream = TcpStream::connect(addr).await.expect("connect");
    let chunk: &[u8] = match small {
        true => &SMALL_FRAMES,
        false => &CHUNK,
    };
    if !small {
        let _ = stream.write_all(&DECLARED_BYTES.to_be_bytes()).await;
    }
    let mut sent = 0;
    while sent < PARTIAL_BYTES && stream.write_all(chunk).await.is_ok() {
        sent += chunk.len();
    }
    let mut answer = vec![0u8; 256];
    let n = match tokio::time::timeout(WAIT, stream.read(&mut answer)).await {
        Ok(Ok(n)) => n,
        _ => 0,
    };
    answer.truncate(n);
    (stream, answer)
}

/// Runs the attack on `target`, checks the client at `client_addr` is served while the
/// connections are held, and returns the growth of the peak RSS and the answers.
pub async fn phase(target: SocketAddr, client_addr: SocketAddr) -> (u64, Vec<Vec<u8>>) {
    let before_kib = reset_peak_kib();
    let attacks: Vec<_> = (0..ATTACKERS)
        .map(|i| tokio::spawn(attack(target, i < SMALL_SENDERS)))
        .collect();
    let mut held = Vec::with_capacity(ATTACKERS);
    for a in attacks {
        let ended = tokio::time::timeout(WAIT, a).await;
        held.push(ended.expect("each attack ends in time").expect("no panic"));
    }
    tokio::task::spawn_blocking(move || served(client_addr, b"during"))
        .await
        .expect("served while the connections are open");
    let growth_kib = status_kib("VmHWM").saturating_sub(before_kib);
    (
        growth_kib,
        held.into_iter().map(|(_, answer)| answer).collect(),
    )
}

pub fn text(answer: &[u8]) -> String {
    String::from_utf8_lossy(answer).into_owned()
}
