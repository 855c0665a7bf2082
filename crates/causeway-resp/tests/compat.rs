//! Compatibility tests with real clients against `causeway-resp-memory`: a scripted
//! `redis-cli` session, redis-py with pipelining, MULTI/EXEC and RESP3, a cross-DC causal
//! scenario through two connections to two DCs, and malformed RESP bytes (answered with an
//! error and the connection closed, the server unharmed).
//!
//! The client tools come from `.ci/install-extras`. Where one is missing the test says so
//! loudly and skips, except under CI (`CI` set), where a missing tool fails the test.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// How long a test waits for the server to start or answer.
const WAIT_MS_MAX: u64 = 10_000;

/// A running `causeway-resp-memory`, killed on drop.
struct Server {
    child: Child,
    ports: Vec<u16>,
    /// The server's stdout, kept open so that it never writes to a closed pipe.
    _stdout: std::io::Lines<BufReader<std::process::ChildStdout>>,
}

impl Server {
    /// Starts the server on free ports with `args`; learns each DC's port from its output.
    fn start(dcs: usize, args: &[&str]) -> Server {
        let dcs_arg = dcs.to_string();
        let mut child = Command::new(env!("CARGO_BIN_EXE_causeway-resp-memory"))
            .args(["--port", "0", "--dcs", &dcs_arg])
            .args(args)
            .stdout(Stdio::piped())
            .spawn()
            .expect("start causeway-resp-memory");
        let mut lines = BufReader::new(child.stdout.take().expect("piped stdout")).lines();
        let ports = (0..dcs)
            .map(|_| {
                let line = lines.next().expect("a port line").expect("utf-8 output");
                let port = line.rsplit(':').next().expect("ip:port");
                port.parse().expect("a port number")
            })
            .collect();
        Server {
            child,
            ports,
            _stdout: lines,
        }
    }

    fn port(&self, dc: usize) -> u16 {
        self.ports[dc]
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Whether `tool` runs; loud skip locally, failure under CI.
fn have(tool: &str, probe: &[&str]) -> bool {
    let ok = Command::new(tool)
        .args(probe)
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        assert!(
            std::env::var_os("CI").is_none(),
            "{tool} {probe:?} failed under CI: .ci/install-extras must install it"
        );
        eprintln!(
            "\n!!!!! SKIPPING: {tool} {probe:?} does not run here; run .ci/install-extras !!!!!\n"
        );
    }
    ok
}

fn script(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/compat")
        .join(name)
}

/// Runs a Python script with the given ports; fails the test with its output on error.
fn python(name: &str, ports: &[u16]) {
    let ports: Vec<String> = ports.iter().map(u16::to_string).collect();
    let out = Command::new("python3")
        .arg(script(name))
        .args(&ports)
        .output()
        .expect("run python3");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{name} failed:\n{text}");
    assert!(text.contains("ok:"), "{name} printed no result:\n{text}");
}

fn connect(port: u16) -> TcpStream {
    let stream = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    stream
        .set_read_timeout(Some(Duration::from_millis(WAIT_MS_MAX)))
        .expect("timeout");
    stream
}

/// Sends `input` on a fresh connection; returns everything the server wrote before it
/// closed the connection (the read fails the test if it does not close in time).
fn send_until_closed(port: u16, input: &[u8]) -> String {
    let mut stream = connect(port);
    stream.write_all(input).expect("write");
    let mut out = Vec::new();
    stream
        .read_to_end(&mut out)
        .expect("the server closes the connection");
    String::from_utf8_lossy(&out).into_owned()
}

fn ping(port: u16) -> String {
    let mut stream = connect(port);
    stream.write_all(b"*1\r\n$4\r\nPING\r\n").expect("write");
    let mut buf = [0u8; 64];
    let n = stream.read(&mut buf).expect("read");
    String::from_utf8_lossy(&buf[..n]).into_owned()
}

#[test]
fn malformed_resp_is_answered_and_closed_and_the_server_lives_on() {
    let server = Server::start(1, &[]);
    let port = server.port(0);
    let huge_count = format!("*{}\r\n", 1u64 << 40);
    let huge_bulk = format!("*2\r\n$3\r\nSET\r\n${}\r\n", 1u64 << 40);
    let bad: [&[u8]; 7] = [
        b"*1\r\n:5\r\n",
        b"*x\r\n",
        b"*2\r\n$3\r\nGET\r\n$-5\r\n",
        b"*1\r\n$4\r\nPINGxx",
        b"\x00\xff\xfe\x16\x03\x01 not resp at all",
        huge_count.as_bytes(),
        huge_bulk.as_bytes(),
    ];
    let mut idle = connect(port);
    idle.write_all(b"*2\r\n$3\r\nGET\r\n$10\r\nabc")
        .expect("a half-sent command");
    for input in bad {
        let answer = send_until_closed(port, input);
        assert!(
            answer.starts_with("-ERR Protocol error"),
            "{input:?} -> {answer:?}"
        );
        assert_eq!(
            ping(port),
            "+PONG\r\n",
            "the server answers after {input:?}"
        );
    }
    // A value over the limit, sent whole as a client does: the server reads it to its end
    // before closing, so the client sees the error naming the limit, not a reset.
    let mut big = b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$3000000\r\n".to_vec();
    big.extend(std::iter::repeat_n(b'a', 3_000_000));
    big.extend_from_slice(b"\r\n");
    let answer = send_until_closed(port, &big);
    assert!(
        answer.starts_with("-ERR Protocol error: invalid bulk length 3000000: an argument is at most 2097152 bytes (2 MiB)"),
        "{answer:?}"
    );
    let long_line = vec![b'a'; 65_536];
    let answer = send_until_closed(port, &long_line);
    assert!(
        answer.contains("too big inline request") && answer.contains("65536 bytes (64 KiB)"),
        "{answer:?}"
    );
    let native_hello = [0u8, 0, 0, 9, 0, 2, 0, 0, 0, 0, 0, 0, 0];
    let answer = send_until_closed(port, &native_hello);
    assert!(
        answer.starts_with("-ERR Protocol error: this port speaks the Redis protocol"),
        "{answer:?}"
    );
    let pipelined = send_until_closed(port, b"*1\r\n$4\r\nPING\r\n*1\r\n:1\r\n");
    assert!(
        pipelined.starts_with("+PONG\r\n-ERR Protocol error"),
        "{pipelined:?}"
    );
}

/// Inline commands, as `redis-benchmark`'s PING_INLINE and `nc` send them, quotes and
/// escapes split as Redis splits them; the connection stays open.
#[test]
fn inline_commands_are_answered_like_arrays() {
    let server = Server::start(1, &[]);
    let mut stream = connect(server.port(0));
    let input = b"PING\r\nSET k \"a b\\x41\"\r\n\r\nGET k\nAPPEND k ' c'\r\nSTRLEN k\r\n";
    stream.write_all(input).expect("write");
    let want = "+PONG\r\n+OK\r\n$4\r\na bA\r\n:6\r\n:6\r\n";
    let mut got = Vec::new();
    let deadline = Instant::now() + Duration::from_millis(WAIT_MS_MAX);
    while got.len() < want.len() && Instant::now() < deadline {
        let mut buf = [0u8; 256];
        stream
            .set_read_timeout(Some(Duration::from_millis(WAIT_MS_MAX)))
            .expect("timeout");
        let n = stream.read(&mut buf).expect("read");
        assert!(n > 0, "closed after {:?}", String::from_utf8_lossy(&got));
        got.extend_from_slice(&buf[..n]);
    }
    assert_eq!(String::from_utf8_lossy(&got), want);
    let answer = send_until_closed(server.port(0), b"SET k \"unterminated\r\n");
    assert!(answer.contains("unbalanced quotes"), "{answer:?}");
}

#[test]
fn redis_cli_scripted_session() {
    if !have("redis-cli", &["--version"]) {
        return;
    }
    let server = Server::start(1, &[]);
    let session = std::fs::read_to_string(script("redis_cli_session.txt")).expect("session");
    let (commands, expected): (Vec<&str>, Vec<&str>) = session
        .lines()
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(|l| l.split_once(" => ").expect("COMMAND => expected output"))
        .unzip();
    let mut child = Command::new("redis-cli")
        .args(["-p", &server.port(0).to_string()])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("run redis-cli");
    let input = commands.join("\n") + "\n";
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(input.as_bytes())
        .expect("write commands");
    let out = child.wait_with_output().expect("redis-cli output");
    let got = String::from_utf8_lossy(&out.stdout);
    let want: Vec<String> = expected
        .iter()
        .map(|e| if *e == "(empty)" { "" } else { e })
        .map(|e| e.replace("\\n", "\n"))
        .collect();
    assert_eq!(got.trim_end(), want.join("\n"), "redis-cli session differs");
}

/// `redis-cli --scan` (the SCAN cursor walk), with and without `--pattern`, `KEYS`,
/// `DBSIZE` and `FLUSHALL`, as a Redis user lists and wipes data.
#[test]
fn redis_cli_scan_keys_dbsize_and_flushall() {
    if !have("redis-cli", &["--version"]) {
        return;
    }
    let server = Server::start(1, &[]);
    let cli = |args: &[&str]| -> String {
        let out = Command::new("redis-cli")
            .args(["-p", &server.port(0).to_string()])
            .args(args)
            .output()
            .expect("run redis-cli");
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    };
    let mut mset = vec!["MSET".to_string()];
    for i in 0..300 {
        mset.extend([format!("key:{i}"), "v".to_string()]);
    }
    let mset: Vec<&str> = mset.iter().map(String::as_str).collect();
    assert_eq!(cli(&mset), "OK");
    assert_eq!(cli(&["SADD", "a-set", "m"]), "1");
    let lines = |text: String| -> Vec<String> {
        let mut v: Vec<String> = text.lines().map(str::to_string).collect();
        v.sort();
        v
    };
    let mut want: Vec<String> = (0..300).map(|i| format!("key:{i}")).collect();
    want.push("a-set".into());
    want.sort();
    assert_eq!(lines(cli(&["--scan"])), want);
    let tens: Vec<String> = want
        .iter()
        .filter(|k| k.starts_with("key:1"))
        .cloned()
        .collect();
    assert_eq!(lines(cli(&["--scan", "--pattern", "key:1*"])), tens);
    assert_eq!(lines(cli(&["KEYS", "key:1*"])), tens);
    assert_eq!(cli(&["DBSIZE"]), "301");
    assert_eq!(cli(&["FLUSHALL"]), "OK");
    assert_eq!(cli(&["DBSIZE"]), "0");
    assert_eq!(cli(&["--scan"]), "");
}

#[test]
fn redis_cli_one_shot_commands_replicate_between_dcs() {
    if !have("redis-cli", &["--version"]) {
        return;
    }
    let server = Server::start(2, &["--replicate-ms", "20"]);
    let cli = |dc: usize, args: &[&str]| -> String {
        let out = Command::new("redis-cli")
            .args(["-p", &server.port(dc).to_string()])
            .args(args)
            .output()
            .expect("run redis-cli");
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    };
    assert_eq!(cli(0, &["SET", "a", "1"]), "OK");
    let start = Instant::now();
    while cli(1, &["GET", "a"]) != "1" {
        assert!(
            start.elapsed() < Duration::from_millis(WAIT_MS_MAX),
            "never replicated"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn redis_py_pipelines_transactions_and_resp3() {
    if !have("python3", &["-c", "import redis"]) {
        return;
    }
    let server = Server::start(1, &["--protocol", "eventual", "--no-strong"]);
    python("redis_py.py", &[server.port(0)]);
}

#[test]
fn cross_dc_causal_scenario_through_two_connections() {
    if !have("python3", &["-c", "import redis"]) {
        return;
    }
    let server = Server::start(2, &["--replicate-ms", "0"]);
    python("cross_dc.py", &[server.port(0), server.port(1)]);
}
