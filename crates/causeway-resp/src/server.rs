//! The TCP side: the accept loop of one RESP endpoint ([`serve`]) and each connection's
//! read / execute / write loop.
//!
//! A connection reads what the socket has, runs every whole command buffered (a pipeline
//! is answered in one write, at most [`PIPELINE_DEPTH_MAX`] commands or
//! [`REPLY_BUFFER_MAX`] bytes at a time), writes the replies, and reads again. Malformed
//! input is answered with `-ERR Protocol error: ...` and the connection closes, once what the
//! client still sends is read (bounded: [`drain_input`]); the endpoint and the other
//! connections go on.
//!
//! With a password, a connection that has not authenticated yet costs almost nothing
//! (issue 75): it has no session, a 1 KiB input buffer, commands of at most
//! [`crate::limits::PREAUTH_COMMAND_BYTES_MAX`] and [`PREAUTH_BYTES_MAX`] in all, and
//! `RespConfig::auth_timeout_ms` to authenticate; at most `RespConfig::unauthenticated_max`
//! such connections are open at once. Past any of these it is told so and closed.

use crate::conn::{Conn, Shared};
use crate::data::DataCmd;
use crate::limits::{
    AUTH_TIMEOUT_MS, CONNECTIONS_MAX, CONN_BUFFER_BYTES, ERROR_DRAIN_BYTES_MAX, ERROR_DRAIN_MS,
    IDLE_TIMEOUT_MS, KEEPALIVE_IDLE_MS, KEEPALIVE_INTERVAL_MS, KEEPALIVE_RETRIES,
    PIPELINE_DEPTH_MAX, PIPELINE_TXN_COMMANDS_MAX, PREAUTH_BUFFER_BYTES, PREAUTH_BYTES_MAX,
    PREAUTH_DRAIN_BUFFER_BYTES, REPLY_BUFFER_MAX, SHUTDOWN_GRACE_MS, UNAUTHENTICATED_MAX,
};
use crate::parse::{bytes_text, parse_command_within, ParseLimits, ProtocolError};
use crate::reply::Reply;
use crate::session::SessionFactory;
use bytes::BytesMut;
use causeway_core::limits::PASSWORD_LEN_MAX;
use causeway_core::Secret;
use std::io;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinSet;
use tokio::time::Instant;

/// How one RESP endpoint runs.
#[derive(Clone, Debug)]
pub struct RespConfig {
    /// When set, clients must `AUTH` (or `HELLO ... AUTH default <password>`) first; at
    /// most `PASSWORD_LEN_MAX` bytes.
    pub password: Option<Secret>,
    /// Most connections open at once; one more is told so and closed.
    pub connections_max: usize,
    /// Most connections open at once that have not authenticated yet (with a password);
    /// one more is told so and closed.
    pub unauthenticated_max: usize,
    /// How long a connection may take to authenticate (with a password), in
    /// milliseconds, from its accept; then it is told so and closed. Positive.
    pub auth_timeout_ms: u64,
    /// An authenticated connection idle (no command) this long is closed; 0 never closes
    /// one (Redis `timeout 0`). Default [`IDLE_TIMEOUT_MS`].
    pub idle_timeout_ms: u64,
    /// The endpoint stops accepting and closes its connections once this holds `true`
    /// (or its sender is dropped). `None`: serve until the task is dropped.
    pub shutdown: Option<watch::Receiver<bool>>,
    /// TLS: when set, every connection must open with a TLS handshake (`redis-cli
    /// --tls`), completed within [`TLS_HANDSHAKE_TIMEOUT_MS`]. `None`: plain TCP.
    pub tls: Option<Arc<tokio_rustls::rustls::ServerConfig>>,
    /// The DC's native client endpoint, named to a client that speaks Causeway's native
    /// protocol here (`causeway cli` pointed at this port). `None`: not named.
    pub native_addr: Option<std::net::SocketAddr>,
}

/// Longest a client may take to complete its TLS handshake, in milliseconds.
pub const TLS_HANDSHAKE_TIMEOUT_MS: u64 = 10_000;

impl Default for RespConfig {
    fn default() -> RespConfig {
        RespConfig {
            password: None,
            connections_max: CONNECTIONS_MAX,
            unauthenticated_max: UNAUTHENTICATED_MAX,
            auth_timeout_ms: AUTH_TIMEOUT_MS,
            idle_timeout_ms: IDLE_TIMEOUT_MS,
            shutdown: None,
            tls: None,
            native_addr: None,
        }
    }
}

/// Waits until the shutdown signal is raised; forever without one.
async fn shutdown_raised(signal: &mut Option<watch::Receiver<bool>>) {
    match signal {
        Some(rx) => {
            let _ = rx.wait_for(|stop| *stop).await;
        }
        None => std::future::pending().await,
    }
}

/// Serves RESP on `listener`, one session of `factory` per connection, until the
/// shutdown signal of `config` is raised (then it stops accepting, gives open connections
/// [`SHUTDOWN_GRACE_MS`] to finish their command and returns). Errors accepting one
/// connection (out of file descriptors, a reset) are waited out, not returned.
pub async fn serve<F: SessionFactory>(
    listener: TcpListener,
    factory: F,
    config: RespConfig,
) -> io::Result<()> {
    assert!(
        config.connections_max > 0 && config.unauthenticated_max > 0,
        "connections_max and unauthenticated_max must be positive"
    );
    assert!(
        config.auth_timeout_ms > 0,
        "auth_timeout_ms must be positive"
    );
    assert!(
        config
            .password
            .as_ref()
            .is_none_or(|p| p.len() <= PASSWORD_LEN_MAX),
        "a password is at most {PASSWORD_LEN_MAX} bytes, so AUTH fits the pre-auth budget"
    );
    let unauthenticated = Arc::new(AtomicUsize::new(0));
    let shared = Arc::new(Shared {
        factory,
        password: config.password.clone(),
        clients: AtomicUsize::new(0),
    });
    let next_id = AtomicU64::new(1);
    let mut signal = config.shutdown.clone();
    let mut conns = JoinSet::new();
    loop {
        tokio::select! {
            () = shutdown_raised(&mut signal) => break,
            Some(_) = conns.join_next(), if !conns.is_empty() => {}
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => {
                    let id = next_id.fetch_add(1, Ordering::Relaxed);
                    let pending = shared
                        .password
                        .is_some()
                        .then(|| Pending::enter(&unauthenticated, &config));
                    let conn = run_connection(stream, shared.clone(), id, config.clone(), pending);
                    conns.spawn(conn);
                }
                Err(_) => tokio::time::sleep(Duration::from_millis(10)).await,
            },
        }
    }
    drop(listener);
    let grace = Duration::from_millis(SHUTDOWN_GRACE_MS);
    let _ = tokio::time::timeout(grace, async { while conns.join_next().await.is_some() {} }).await;
    conns.abort_all();
    Ok(())
}

/// Counts a connection while it lives.
struct ClientSlot<'a>(&'a AtomicUsize);

impl Drop for ClientSlot<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

/// A connection that has not authenticated yet: counted among the endpoint's
/// unauthenticated connections until it authenticates or closes, with the deadline by
/// which it must authenticate and the bytes it sent so far.
struct Pending {
    count: Arc<AtomicUsize>,
    /// How many were unauthenticated, this one included, when it was accepted.
    position: usize,
    deadline: Instant,
    read_bytes: usize,
}

impl Pending {
    fn enter(count: &Arc<AtomicUsize>, config: &RespConfig) -> Pending {
        let position = count.fetch_add(1, Ordering::Relaxed) + 1;
        Pending {
            count: count.clone(),
            position,
            deadline: Instant::now() + Duration::from_millis(config.auth_timeout_ms),
            read_bytes: 0,
        }
    }
}

impl Drop for Pending {
    fn drop(&mut self) {
        self.count.fetch_sub(1, Ordering::Relaxed);
    }
}

/// One connection, from accept to close.
async fn run_connection<F: SessionFactory>(
    stream: TcpStream,
    shared: Arc<Shared<F>>,
    id: u64,
    config: RespConfig,
    pending: Option<Pending>,
) {
    let open = shared.clients.fetch_add(1, Ordering::Relaxed) + 1;
    let _slot = ClientSlot(&shared.clients);
    let _ = stream.set_nodelay(true);
    let _ = keepalive(&stream);
    let Some(tls) = config.tls.clone() else {
        return run_session(stream, shared.clone(), id, config, (open, pending)).await;
    };
    if over_limits(&config, open, pending.as_ref()).is_some() {
        // Over a limit under TLS: closed before the handshake, which would cost more than
        // the refusal is worth.
        return;
    }
    let limit = Duration::from_millis(TLS_HANDSHAKE_TIMEOUT_MS);
    let acceptor = tokio_rustls::TlsAcceptor::from(tls);
    if let Ok(Ok(stream)) = tokio::time::timeout(limit, acceptor.accept(stream)).await {
        run_session(stream, shared.clone(), id, config, (open, pending)).await;
    }
}

/// Why a new connection is refused at once (its one-line answer), if it is: the
/// endpoint's connection limits.
fn over_limits(config: &RespConfig, open: usize, pending: Option<&Pending>) -> Option<String> {
    if open > config.connections_max {
        return Some("-ERR max number of clients reached\r\n".into());
    }
    let max = config.unauthenticated_max;
    match pending {
        Some(p) if p.position > max => Some(format!(
            "-ERR too many unauthenticated connections (limit {max}): authenticate at once \
             after connecting, or try again later\r\n"
        )),
        _ => None,
    }
}

/// One connection after its TLS handshake, if any: the client limits, then commands
/// until it leaves or the endpoint shuts down.
async fn run_session<F: SessionFactory, S: AsyncRead + AsyncWrite + Unpin>(
    mut stream: S,
    shared: Arc<Shared<F>>,
    id: u64,
    config: RespConfig,
    (open, pending): (usize, Option<Pending>),
) {
    if let Some(refusal) = over_limits(&config, open, pending.as_ref()) {
        let _ = stream.write_all(refusal.as_bytes()).await;
        let _ = stream.flush().await;
        return;
    }
    let mut conn = Conn::new(shared.clone(), id);
    let mut signal = config.shutdown.clone();
    // Biased: the branches in this order, not a random one drawn at every poll (each
    // request polls this select). Shutdown first, so a busy connection still sees it.
    tokio::select! {
        biased;
        () = shutdown_raised(&mut signal) => {}
        _ = serve_stream(&mut stream, &mut conn, &config, pending) => {}
    }
    let _ = stream.shutdown().await;
}

/// TCP keepalive on an accepted socket: the first probe after [`KEEPALIVE_IDLE_MS`] of
/// silence, so a half-open client (its host gone) is dropped in about a minute.
fn keepalive(stream: &TcpStream) -> io::Result<()> {
    let params = socket2::TcpKeepalive::new()
        .with_time(Duration::from_millis(KEEPALIVE_IDLE_MS))
        .with_interval(Duration::from_millis(KEEPALIVE_INTERVAL_MS))
        .with_retries(KEEPALIVE_RETRIES);
    socket2::SockRef::from(stream).set_tcp_keepalive(&params)
}

/// Reads more input into `input`; `Ok(0)` when the client closed or, with a nonzero
/// `idle_timeout_ms`, sent nothing for that long.
async fn read_more<S: AsyncRead + Unpin>(
    stream: &mut S,
    input: &mut BytesMut,
    idle_timeout_ms: u64,
) -> io::Result<usize> {
    if idle_timeout_ms == 0 {
        return stream.read_buf(input).await;
    }
    let idle = Duration::from_millis(idle_timeout_ms);
    tokio::time::timeout(idle, stream.read_buf(input))
        .await
        .unwrap_or(Ok(0))
}

/// What one read brought.
enum Read {
    /// Some bytes.
    More,
    /// The client closed, or stayed idle too long.
    Closed,
    /// The connection broke its pre-authentication budget: this answer, then close.
    Refused(Reply),
}

/// Reads more input: an authenticated connection under its idle timeout, an
/// unauthenticated one into a small buffer, within its budget and by its deadline.
async fn read_step<S: AsyncRead + Unpin>(
    stream: &mut S,
    input: &mut BytesMut,
    config: &RespConfig,
    pending: Option<&mut Pending>,
) -> io::Result<Read> {
    let Some(p) = pending else {
        input.reserve(CONN_BUFFER_BYTES);
        let n = read_more(stream, input, config.idle_timeout_ms).await?;
        return Ok(if n == 0 { Read::Closed } else { Read::More });
    };
    if p.read_bytes >= PREAUTH_BYTES_MAX {
        return Ok(Read::Refused(Reply::err(format!(
            "Protocol error: {} sent without authenticating: a connection may send at most {} \
             before AUTH",
            bytes_text(p.read_bytes),
            bytes_text(PREAUTH_BYTES_MAX)
        ))));
    }
    input.reserve(PREAUTH_BUFFER_BYTES);
    match tokio::time::timeout_at(p.deadline, stream.read_buf(input)).await {
        Ok(read) => {
            let n = read?;
            p.read_bytes += n;
            Ok(if n == 0 { Read::Closed } else { Read::More })
        }
        Err(_) => Ok(Read::Refused(Reply::err(format!(
            "authentication timeout: a connection must AUTH within {} ms of connecting",
            config.auth_timeout_ms
        )))),
    }
}

/// The read / execute / write loop; returns when the client leaves, asks to (`QUIT`),
/// sends malformed input, stays idle for the config's `idle_timeout_ms` (0: forever),
/// breaks its pre-authentication budget (`pending`: not authenticated yet), or on an IO
/// error.
async fn serve_stream<F: SessionFactory, S: AsyncRead + AsyncWrite + Unpin>(
    stream: &mut S,
    conn: &mut Conn<F>,
    config: &RespConfig,
    mut pending: Option<Pending>,
) -> io::Result<()> {
    let start_bytes = match pending {
        Some(_) => PREAUTH_BUFFER_BYTES,
        None => CONN_BUFFER_BYTES,
    };
    let mut input = BytesMut::with_capacity(start_bytes);
    let mut output = BytesMut::with_capacity(start_bytes);
    // The pipelinable commands gathered, kept across reads: a new vector for each
    // command was an allocation per request.
    let mut run: Vec<DataCmd> = Vec::new();
    loop {
        let close = run_buffered(&mut input, &mut output, &mut run, conn, stream).await;
        let (close, malformed) = match close? {
            Ok(close) => (close, false),
            Err(e) => {
                protocol_error(&e, config.native_addr).encode(conn.proto(), &mut output);
                (true, true)
            }
        };
        if conn.is_authed() {
            pending = None;
        }
        write_out(stream, &mut output).await?;
        if malformed {
            drain_input(stream, pending.is_some()).await;
        }
        if close {
            return Ok(());
        }
        match read_step(stream, &mut input, config, pending.as_mut()).await? {
            Read::More => {}
            Read::Closed => return Ok(()),
            Read::Refused(reply) => {
                reply.encode(conn.proto(), &mut output);
                write_out(stream, &mut output).await?;
                return Ok(());
            }
        }
    }
}

/// Writes out and clears what `output` holds, if anything.
async fn write_out<S: AsyncWrite + Unpin>(stream: &mut S, output: &mut BytesMut) -> io::Result<()> {
    if output.is_empty() {
        return Ok(());
    }
    stream.write_all(output).await?;
    // A TLS stream may keep the last record buffered until flushed (a no-op on plain
    // TCP): without it a reply could wait for the client's next command.
    stream.flush().await?;
    output.clear();
    Ok(())
}

/// Runs every whole command in `input`, encoding replies into `output` (written out early
/// when a batch grows past its limits). Consecutive standalone data commands already
/// buffered together (a pipeline) run as one transaction, at most
/// [`PIPELINE_TXN_COMMANDS_MAX`] at a time ([`Conn::run_pipelined`]); nothing waits for
/// more input to fill one. Returns whether the connection must close, or the malformed
/// input that closes it (answered by the caller, after the replies before it).
async fn run_buffered<F: SessionFactory, S: AsyncWrite + Unpin>(
    input: &mut BytesMut,
    output: &mut BytesMut,
    run: &mut Vec<DataCmd>,
    conn: &mut Conn<F>,
    stream: &mut S,
) -> io::Result<Result<bool, ProtocolError>> {
    assert!(run.is_empty(), "commands left from an earlier input");
    let mut batch_commands = 0;
    loop {
        let limits = match conn.is_authed() {
            true => ParseLimits::FULL,
            false => ParseLimits::PREAUTH,
        };
        let args = match parse_command_within(input, &limits) {
            Ok(Some(args)) => args,
            Ok(None) => {
                run_pipelined(conn, run, output).await;
                return Ok(Ok(false));
            }
            Err(e) => {
                run_pipelined(conn, run, output).await;
                return Ok(Err(e));
            }
        };
        if let Some(cmd) = conn.pipelinable(&args) {
            run.push(cmd);
            if run.len() < PIPELINE_TXN_COMMANDS_MAX {
                continue;
            }
            batch_commands += run_pipelined(conn, run, output).await;
        } else {
            batch_commands += run_pipelined(conn, run, output).await;
            let outcome = conn.execute(args).await;
            outcome.reply.encode(conn.proto(), output);
            if outcome.close {
                return Ok(Ok(true));
            }
            batch_commands += 1;
        }
        if batch_commands >= PIPELINE_DEPTH_MAX || output.len() >= REPLY_BUFFER_MAX {
            stream.write_all(output).await?;
            stream.flush().await?;
            output.clear();
            batch_commands = 0;
        }
    }
}

/// After the answer to malformed input: ends our side (the client reads the answer, then
/// end of file) and reads, dropping it, what the client still sends, for at most
/// [`ERROR_DRAIN_MS`] and [`ERROR_DRAIN_BYTES_MAX`]. Closing with its input unread would
/// reset the connection, and a client still writing (a 20 MB `SET` refused at its length)
/// would see a broken pipe instead of the error naming the limit. An unauthenticated
/// connection (`small`) drains through a smaller buffer: a thousand of them refused at
/// once must not cost 16 KiB each.
async fn drain_input<S: AsyncRead + AsyncWrite + Unpin>(stream: &mut S, small: bool) {
    let _ = stream.shutdown().await;
    let len = match small {
        true => PREAUTH_DRAIN_BUFFER_BYTES,
        false => CONN_BUFFER_BYTES,
    };
    let mut buf = vec![0u8; len];
    let mut left = ERROR_DRAIN_BYTES_MAX;
    let drain = async {
        while left > 0 {
            match stream.read(&mut buf).await {
                Ok(n) if n > 0 => left = left.saturating_sub(n),
                _ => break,
            }
        }
    };
    let _ = tokio::time::timeout(Duration::from_millis(ERROR_DRAIN_MS), drain).await;
}

/// The answer to malformed input: its error, and for a client of another protocol where
/// the DC's native endpoint is (`native_addr`), so `causeway cli` pointed here says where
/// to go.
fn protocol_error(e: &ProtocolError, native_addr: Option<std::net::SocketAddr>) -> Reply {
    match native_addr {
        Some(addr) if e.is_foreign() => Reply::err(format!(
            "{e}; Causeway's native clients (causeway cli, causeway load) connect to this \
             DC's client port, {addr}"
        )),
        _ => Reply::err(e.to_string()),
    }
}

/// Runs the pipelined commands gathered in `run` (if any) and encodes their replies;
/// returns how many it answered.
async fn run_pipelined<F: SessionFactory>(
    conn: &mut Conn<F>,
    run: &mut Vec<DataCmd>,
    output: &mut BytesMut,
) -> usize {
    if run.len() <= 1 {
        let Some(cmd) = run.pop() else { return 0 };
        conn.run_one(cmd).await.encode(conn.proto(), output);
        return 1;
    }
    let replies = conn.run_pipelined(std::mem::take(run)).await;
    for reply in &replies {
        reply.encode(conn.proto(), output);
    }
    replies.len()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memory::{MemoryCluster, MemoryOptions};

    /// Most time a test waits for the server, in milliseconds.
    const WAIT_MS_MAX: u64 = 5_000;

    async fn start(
        config: RespConfig,
    ) -> (
        std::net::SocketAddr,
        tokio::task::JoinHandle<io::Result<()>>,
    ) {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        let factory = MemoryCluster::new(MemoryOptions::default()).factory(0);
        (addr, tokio::spawn(serve(listener, factory, config)))
    }

    /// Sends `input` and reads until `want` bytes arrived or the connection closed.
    async fn exchange(stream: &mut TcpStream, input: &[u8], want: usize) -> String {
        stream.write_all(input).await.expect("write");
        let mut out = Vec::new();
        let wait = Duration::from_millis(WAIT_MS_MAX);
        while out.len() < want {
            let mut buf = [0u8; 256];
            match tokio::time::timeout(wait, stream.read(&mut buf))
                .await
                .expect("answer in time")
            {
                Ok(0) | Err(_) => break,
                Ok(n) => out.extend_from_slice(&buf[..n]),
            }
        }
        String::from_utf8_lossy(&out).into_owned()
    }

    #[tokio::test]
    async fn shutdown_stops_accepting_and_closes_connections() {
        let (tx, rx) = watch::channel(false);
        let config = RespConfig {
            shutdown: Some(rx),
            ..RespConfig::default()
        };
        let (addr, server) = start(config).await;
        let mut conn = TcpStream::connect(addr).await.expect("connect");
        assert_eq!(
            exchange(&mut conn, b"*1\r\n$4\r\nPING\r\n", 7).await,
            "+PONG\r\n"
        );
        tx.send(true).expect("signal");
        let wait = Duration::from_millis(WAIT_MS_MAX);
        let result = tokio::time::timeout(wait, server)
            .await
            .expect("serve returns");
        assert!(result.expect("no panic").is_ok());
        assert_eq!(
            exchange(&mut conn, b"*1\r\n$4\r\nPING\r\n", 1).await,
            "",
            "closed"
        );
        assert!(
            TcpStream::connect(addr).await.is_err(),
            "no longer accepting"
        );
    }

    #[tokio::test]
    async fn an_idle_connection_is_closed_and_a_busy_one_is_not() {
        let config = RespConfig {
            idle_timeout_ms: 300,
            ..RespConfig::default()
        };
        let (addr, _server) = start(config).await;
        let ping = b"*1\r\n$4\r\nPING\r\n";
        let mut idle = TcpStream::connect(addr).await.expect("connect");
        let mut busy = TcpStream::connect(addr).await.expect("connect");
        assert_eq!(exchange(&mut idle, ping, 7).await, "+PONG\r\n");
        let started = tokio::time::Instant::now();
        for _ in 0..8 {
            tokio::time::sleep(Duration::from_millis(100)).await;
            assert_eq!(
                exchange(&mut busy, ping, 7).await,
                "+PONG\r\n",
                "busy stays open"
            );
        }
        let mut buf = [0u8; 16];
        let wait = Duration::from_millis(WAIT_MS_MAX);
        let read = tokio::time::timeout(wait, idle.read(&mut buf)).await;
        assert!(
            matches!(read, Ok(Ok(0))),
            "the idle one was closed: {read:?}"
        );
        assert!(
            started.elapsed() >= Duration::from_millis(250),
            "not before its time"
        );
        assert_eq!(
            exchange(&mut busy, ping, 7).await,
            "+PONG\r\n",
            "still open"
        );
    }

    #[test]
    fn an_accepted_socket_gets_keepalive() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        rt.block_on(async {
            let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
            let client = TcpStream::connect(listener.local_addr().expect("addr"));
            let (_client, accepted) = tokio::join!(client, listener.accept());
            let (stream, _) = accepted.expect("accept");
            keepalive(&stream).expect("keepalive");
            let sock = socket2::SockRef::from(&stream);
            assert!(sock.keepalive().expect("read the option"));
        });
    }

    #[tokio::test]
    async fn connections_beyond_the_limit_are_told_and_closed() {
        let config = RespConfig {
            connections_max: 1,
            ..RespConfig::default()
        };
        let (addr, server) = start(config).await;
        let mut first = TcpStream::connect(addr).await.expect("connect");
        assert_eq!(
            exchange(&mut first, b"*1\r\n$4\r\nPING\r\n", 7).await,
            "+PONG\r\n"
        );
        let mut second = TcpStream::connect(addr).await.expect("connect");
        let refused = exchange(&mut second, b"", 64).await;
        assert_eq!(refused, "-ERR max number of clients reached\r\n");
        assert_eq!(
            exchange(&mut first, b"*2\r\n$4\r\nECHO\r\n$1\r\nx\r\n", 7).await,
            "$1\r\nx\r\n"
        );
        server.abort();
    }

    /// A factory counting the sessions it opened.
    struct Counted(crate::memory::MemoryFactory, Arc<AtomicUsize>);

    impl SessionFactory for Counted {
        type Handle = crate::memory::MemorySession;
        fn open(&self) -> Self::Handle {
            self.1.fetch_add(1, Ordering::Relaxed);
            self.0.open()
        }
        fn info(&self) -> crate::session::ServerInfo {
            self.0.info()
        }
    }

    const AUTH: &[u8] = b"*2\r\n$4\r\nAUTH\r\n$2\r\npw\r\n";

    #[tokio::test]
    async fn a_session_is_opened_only_once_a_connection_authenticates() {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        let opened = Arc::new(AtomicUsize::new(0));
        let factory = Counted(
            MemoryCluster::new(MemoryOptions::default()).factory(0),
            opened.clone(),
        );
        let config = RespConfig {
            password: Some("pw".into()),
            ..RespConfig::default()
        };
        let server = tokio::spawn(serve(listener, factory, config));
        let mut conn = TcpStream::connect(addr).await.expect("connect");
        let wrong = b"*2\r\n$4\r\nAUTH\r\n$2\r\nno\r\n*1\r\n$4\r\nPING\r\n";
        let answer = exchange(&mut conn, wrong, 60).await;
        assert!(
            answer.starts_with("-WRONGPASS") && answer.contains("-NOAUTH"),
            "{answer}"
        );
        assert_eq!(opened.load(Ordering::Relaxed), 0, "no session before AUTH");
        assert_eq!(exchange(&mut conn, AUTH, 5).await, "+OK\r\n");
        assert_eq!(opened.load(Ordering::Relaxed), 1, "one session after AUTH");
        server.abort();
    }

    #[tokio::test]
    async fn unauthenticated_connections_are_capped_and_must_authenticate_in_time() {
        let config = RespConfig {
            password: Some("pw".into()),
            unauthenticated_max: 2,
            auth_timeout_ms: 400,
            ..RespConfig::default()
        };
        let (addr, server) = start(config).await;
        let mut first = TcpStream::connect(addr).await.expect("connect");
        let _second = TcpStream::connect(addr).await.expect("connect");
        assert_eq!(
            exchange(&mut first, b"*1\r\n$4\r\nPING\r\n", 34).await,
            "-NOAUTH Authentication required.\r\n"
        );
        let mut third = TcpStream::connect(addr).await.expect("connect");
        let refused = exchange(&mut third, b"", 200).await;
        assert!(
            refused.starts_with("-ERR too many unauthenticated connections (limit 2)"),
            "{refused}"
        );
        assert_eq!(exchange(&mut first, AUTH, 5).await, "+OK\r\n");
        let mut fourth = TcpStream::connect(addr).await.expect("connect");
        assert_eq!(
            exchange(&mut fourth, AUTH, 5).await,
            "+OK\r\n",
            "a slot freed"
        );
        let mut late = TcpStream::connect(addr).await.expect("connect");
        let timed_out = exchange(&mut late, b"", 200).await;
        assert!(
            timed_out.starts_with("-ERR authentication timeout") && timed_out.contains("400 ms"),
            "{timed_out}"
        );
        let ping = b"*1\r\n$4\r\nPING\r\n";
        assert_eq!(
            exchange(&mut first, ping, 7).await,
            "+PONG\r\n",
            "no deadline after AUTH"
        );
        server.abort();
    }

    #[tokio::test]
    async fn before_auth_a_connection_may_send_a_few_kib_in_all() {
        let config = RespConfig {
            password: Some("pw".into()),
            ..RespConfig::default()
        };
        let (addr, server) = start(config).await;
        let mut conn = TcpStream::connect(addr).await.expect("connect");
        let pings = b"*1\r\n$4\r\nPING\r\n".repeat(1000);
        let answer = exchange(&mut conn, &pings, 1 << 20).await;
        assert!(
            answer.contains("sent without authenticating: a connection may send at most 8192 bytes (8 KiB) before AUTH"),
            "{}",
            &answer[answer.len().saturating_sub(300)..]
        );
        server.abort();
    }

    #[tokio::test]
    async fn quit_answers_then_closes() {
        let (addr, server) = start(RespConfig::default()).await;
        let mut conn = TcpStream::connect(addr).await.expect("connect");
        let answer = exchange(&mut conn, b"*1\r\n$4\r\nQUIT\r\n*1\r\n$4\r\nPING\r\n", 64).await;
        assert_eq!(answer, "+OK\r\n", "nothing after QUIT is answered");
        server.abort();
    }

    /// One RESP array command from space-separated words.
    fn command(words: &str) -> Vec<u8> {
        let words: Vec<&str> = words.split(' ').collect();
        let mut out = format!("*{}\r\n", words.len()).into_bytes();
        for w in words {
            out.extend(format!("${}\r\n{w}\r\n", w.len()).bytes());
        }
        out
    }

    #[tokio::test]
    async fn a_pipeline_mixing_groups_multi_and_errors_is_answered_in_order() {
        let (addr, server) = start(RespConfig::default()).await;
        let mut conn = TcpStream::connect(addr).await.expect("connect");
        let cmds = [
            "SET a 1", "INCR n", "GET a", "MULTI", "INCR n", "EXEC", "GET", "SADD a x", "INCR n",
            "GET n", "PING",
        ];
        let input: Vec<u8> = cmds.iter().flat_map(|c| command(c)).collect();
        let want = concat!(
            "+OK\r\n:1\r\n$1\r\n1\r\n",
            "+OK\r\n+QUEUED\r\n*1\r\n:2\r\n",
            "-ERR wrong number of arguments for 'get' command\r\n",
            "-WRONGTYPE operation against a key holding a lww object, not a set\r\n",
            ":3\r\n$1\r\n3\r\n+PONG\r\n",
        );
        let answer = exchange(&mut conn, &input, want.len()).await;
        assert_eq!(answer, want);
        server.abort();
    }
}
