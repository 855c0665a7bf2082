//! Nothing before authentication costs memory (issue 75): a real RESP endpoint (the
//! `causeway-resp-memory` binary, in its own process so its RSS is its own) with a password
//! takes 1,000 connections that never authenticate, most starting a `SET` of a 2 MB value
//! and streaming part of it, the rest sending small commands; its peak RSS stays within
//! 64 MiB of what it was before, and an authenticated client is served meanwhile.

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const PASSWORD: &str = "preauth-test-password";
/// Connections that never authenticate (the endpoint's default cap is 1,024).
const ATTACKERS: usize = 1_000;
/// Of them, those that send small commands rather than a large value.
const SMALL_SENDERS: usize = 200;
/// How much of its 2 MB value each large sender streams.
const PARTIAL_BYTES: usize = 256 << 10;
/// Most growth of the server's RSS the attack may cause, in KiB.
const RSS_GROWTH_KIB_MAX: u64 = 64 << 10;
/// Most time one step of the test waits.
const WAIT: Duration = Duration::from_secs(20);

/// The server process, killed when dropped.
struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn start_server() -> (Server, SocketAddr) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_causeway-resp-memory"))
        .args(["--port", "0", "--threads", "2", "--password", PASSWORD])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start causeway-resp-memory");
    let stdout = child.stdout.take().expect("stdout");
    let server = Server(child);
    let mut line = String::new();
    BufReader::new(stdout).read_line(&mut line).expect("line");
    let addr = line.trim().rsplit(' ').next().expect("address");
    (server, addr.parse().expect("a socket address"))
}

/// A field of `/proc/PID/status` (`VmRSS`, `VmHWM`), in KiB.
fn status_kib(pid: u32, field: &str) -> u64 {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("status");
    let line = text
        .lines()
        .find(|l| l.starts_with(field))
        .expect("the field");
    let digits: String = line.chars().filter(char::is_ascii_digit).collect();
    digits.parse().expect("a number")
}

/// Sends `input` and reads the answer up to `want` bytes or the close.
async fn exchange(stream: &mut TcpStream, input: &[u8], want: usize) -> String {
    stream.write_all(input).await.expect("write");
    let mut out = Vec::new();
    while out.len() < want {
        let mut buf = [0u8; 512];
        match tokio::time::timeout(WAIT, stream.read(&mut buf)).await {
            Ok(Ok(n)) if n > 0 => out.extend_from_slice(&buf[..n]),
            _ => break,
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// One connection that never authenticates: a large `SET` streamed in part, or (`small`)
/// `PING`s until the endpoint gives up on it. Returns the connection (still open, if the
/// server has not closed it) and the first bytes the server answered.
async fn attack(addr: SocketAddr, small: bool) -> (TcpStream, String) {
    let mut stream = TcpStream::connect(addr).await.expect("connect");
    let chunk: Vec<u8> = match small {
        true => b"*1\r\n$4\r\nPING\r\n".repeat(64),
        false => vec![b'v'; 16 << 10],
    };
    if !small {
        let head = b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$2000000\r\n";
        let _ = stream.write_all(head).await;
    }
    let mut sent = 0;
    while sent < PARTIAL_BYTES {
        if stream.write_all(&chunk).await.is_err() {
            break;
        }
        sent += chunk.len();
    }
    let mut answer = vec![0u8; 256];
    let n = match tokio::time::timeout(WAIT, stream.read(&mut answer)).await {
        Ok(Ok(n)) => n,
        _ => 0,
    };
    (stream, String::from_utf8_lossy(&answer[..n]).into_owned())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thousand_unauthenticated_connections_cost_little_and_a_client_is_served() {
    let (server, addr) = start_server();
    let pid = server.0.id();
    let mut client = TcpStream::connect(addr).await.expect("connect");
    let auth = format!("*2\r\n$4\r\nAUTH\r\n${}\r\n{PASSWORD}\r\n", PASSWORD.len());
    assert_eq!(exchange(&mut client, auth.as_bytes(), 5).await, "+OK\r\n");
    let set = b"*3\r\n$3\r\nSET\r\n$1\r\na\r\n$1\r\n1\r\n";
    assert_eq!(exchange(&mut client, set, 5).await, "+OK\r\n");
    let before_kib = status_kib(pid, "VmRSS");
    let attacks: Vec<_> = (0..ATTACKERS)
        .map(|i| tokio::spawn(attack(addr, i < SMALL_SENDERS)))
        .collect();
    let mut held = Vec::with_capacity(ATTACKERS);
    for a in attacks {
        let (stream, answer) = tokio::time::timeout(WAIT, a)
            .await
            .expect("each attack ends in time")
            .expect("no panic");
        held.push((stream, answer));
    }
    let get = b"*2\r\n$3\r\nGET\r\n$1\r\na\r\n";
    let served = exchange(&mut client, get, 7).await;
    assert_eq!(served, "$1\r\n1\r\n", "the authenticated client is served");
    let peak_kib = status_kib(pid, "VmHWM");
    let growth_kib = peak_kib.saturating_sub(before_kib);
    eprintln!("RSS before {before_kib} KiB, peak {peak_kib} KiB, growth {growth_kib} KiB");
    assert!(
        growth_kib < RSS_GROWTH_KIB_MAX,
        "1,000 unauthenticated connections grew the server by {growth_kib} KiB"
    );
    let large = &held[SMALL_SENDERS].1;
    assert!(
        large.contains("an argument before AUTH is at most 4096 bytes (4 KiB)"),
        "a large SET before AUTH is refused at its length: {large:?}"
    );
    let small = &held[0].1;
    assert!(small.starts_with("-NOAUTH"), "{small:?}");
    drop(held);
}
