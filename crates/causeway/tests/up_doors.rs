//! Every door of a `causeway up` cluster answers a client of the wrong protocol with one line
//! naming the right port (RESP on the native port, the native CLI on the RESP port, either on
//! the metrics port); an oversized RESP argument is refused naming the limit; `cli -c` that
//! ends inside a transaction fails instead of dropping it; a refused connection is reported
//! at once.

mod up;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};
use up::{cli, cli_result, Up};

/// Sends `input` on a new connection to `addr` and reads until the server closes it.
fn answer_to(addr: &str, input: &[u8]) -> String {
    let mut conn = TcpStream::connect(addr).expect("connect");
    conn.set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    conn.write_all(input).expect("write");
    let mut out = Vec::new();
    let _ = conn.read_to_end(&mut out);
    String::from_utf8_lossy(&out).into_owned()
}

#[test]
fn each_door_names_the_right_one_and_the_cli_keeps_no_silent_losses() {
    let up = Up::start("doors", 1, 1, &["--protocol", "cure"]);
    let (native, resp) = (up.client_addr(0), up.resp_addr(0));
    let metrics = format!("127.0.0.1:{}", up.base + 60);
    let ping = b"*1\r\n$4\r\nPING\r\n";

    let (ok, out) = cli_result(&resp, "get k");
    assert!(!ok, "{out}");
    assert!(
        out.contains("answered in the Redis protocol (RESP)") && out.contains(&native),
        "the CLI on the RESP port is told the native one: {out}"
    );
    let told = answer_to(&native, ping);
    assert!(
        told.starts_with("-ERR this is Causeway's native client port") && told.contains(&resp),
        "RESP on the native port is told the RESP one: {told:?}"
    );
    let told = answer_to(&metrics, ping);
    assert!(
        told.starts_with("-ERR this is Causeway's metrics (HTTP) port")
            && told.contains(&resp)
            && told.contains(&native),
        "RESP on the metrics port: {told:?}"
    );
    let (ok, out) = cli_result(&metrics, "get k");
    assert!(
        !ok && out.contains("metrics (HTTP) port") && out.contains(&native),
        "{out}"
    );

    let big = b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$20000000\r\n";
    let told = answer_to(&resp, big);
    assert!(
        told.contains("invalid bulk length 20000000: an argument is at most 2097152 bytes (2 MiB)"),
        "{told:?}"
    );

    let (ok, out) = cli_result(&native, "begin; set x 1");
    assert!(!ok, "a script ending inside a transaction fails: {out}");
    assert!(out.contains("ended inside a transaction"), "{out}");
    let out = cli(&native, "get x");
    assert!(
        out.contains("x = (nil)"),
        "the transaction was aborted: {out}"
    );

    let free = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let closed = free.local_addr().expect("addr").to_string();
    drop(free);
    let began = Instant::now();
    let (ok, out) = cli_result(&closed, "get k");
    assert!(!ok && out.contains("nothing listens there"), "{out}");
    assert!(
        began.elapsed() < Duration::from_secs(3),
        "reported at once, not after the connect timeout: {:?}",
        began.elapsed()
    );
}
