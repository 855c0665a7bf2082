//! Causeway's Rust client library (layer 7 of DESIGN.md) and the native client wire.
//!
//! [`Client::connect`] opens a TCP connection to a DC's client endpoint, which hosts one
//! protocol session for it: begin, read, update, commit, abort, token, attach, barrier.
//! Calls are blocking, one at a time, each bounded by a timeout. Retried where safe:
//! connecting (until the connect timeout), and `begin` when the server answers
//! `Unavailable` (no transaction started yet). Nothing else is retried: after a timeout
//! or a broken connection the outcome of the request is unknown, the session is gone, and
//! the error says so; open a new client (and `attach` a token kept earlier) to go on.
//!
//! ```no_run
//! use causeway_client::Client;
//! let mut c = Client::connect("127.0.0.1:7101").unwrap();
//! c.begin().unwrap();
//! c.set("photo", b"p1".to_vec()).unwrap();
//! c.commit().unwrap();
//! ```

#![forbid(unsafe_code)]

pub mod wire;

use causeway_core::crdt::{ObjType, Update};
use causeway_core::{
    Key, KeyPage, ObjValue, OpId, ReadValue, Request, Response, Secret, TxnId, TxnKind, Value,
};
use std::fmt;
use std::io;
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};
use wire::{ClientFrame, ServerFrame, Welcome, CLIENT_WIRE_VERSION};

/// How many times `begin` is retried on `Unavailable`.
const BEGIN_RETRIES_MAX: u32 = 5;

/// What went wrong, in words a user can act on.
#[derive(Debug)]
pub enum ClientError {
    /// No connection could be made to the address within the connect timeout.
    Connect { addr: String, why: String },
    /// The server refused the session (version, cluster name, limits).
    Refused(String),
    /// The server did not answer in time; the request's outcome is unknown.
    Timeout { what: String, after_ms: u64 },
    /// The connection broke; the request's outcome is unknown.
    ConnectionLost(String),
    /// The transaction was aborted (by the client or the system).
    Aborted(String),
    /// The server answered with an error (wrong type, limits, unsupported, unavailable).
    Server(causeway_core::Error),
    /// The server answered something this client does not expect.
    Protocol(String),
}

impl fmt::Display for ClientError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ClientError::Connect { addr, why } => write!(f, "cannot connect to {addr}: {why}"),
            ClientError::Refused(why) => write!(f, "the server refused the session: {why}"),
            ClientError::Timeout { what, after_ms } => write!(
                f,
                "no answer to {what} within {after_ms} ms; its outcome is unknown and the session is closed"
            ),
            ClientError::ConnectionLost(why) => write!(
                f,
                "connection lost ({why}); the outcome of the last request is unknown"
            ),
            ClientError::Aborted(why) => write!(f, "transaction aborted: {why}"),
            ClientError::Server(e) => write!(f, "{e}"),
            ClientError::Protocol(why) => write!(f, "unexpected answer from the server: {why}"),
        }
    }
}

impl std::error::Error for ClientError {}

pub type Result<T> = std::result::Result<T, ClientError>;

/// Connection settings.
#[derive(Clone, Debug)]
pub struct Options {
    /// How long to keep trying to connect.
    pub connect_timeout_ms: u64,
    /// How long to wait for each answer (the server's own request timeout is 10 s).
    pub request_timeout_ms: u64,
    /// The cluster the client expects (`None`: any).
    pub cluster: Option<String>,
    /// The server's password, when it has one (the cluster file's `password`).
    pub password: Option<Secret>,
    /// Speak TLS, trusting the CA certificates of this PEM file (the cluster file's
    /// `tls.ca_file`; `causeway up --tls` writes DIR/tls/ca.pem). `None`: plain TCP.
    pub tls_ca_file: Option<std::path::PathBuf>,
    /// Keep trying when the connection is refused (nothing listens yet: a server still
    /// starting). `false` reports a refusal at once (`causeway cli`).
    pub retry_refused: bool,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            connect_timeout_ms: 10_000,
            request_timeout_ms: 15_000,
            cluster: None,
            password: None,
            tls_ca_file: None,
            retry_refused: true,
        }
    }
}

/// The connection under a session: plain TCP or TLS over it.
enum Conn {
    Plain(TcpStream),
    Tls(Box<rustls::StreamOwned<rustls::ClientConnection, TcpStream>>),
}

impl Conn {
    fn tcp(&self) -> &TcpStream {
        match self {
            Conn::Plain(s) => s,
            Conn::Tls(s) => &s.sock,
        }
    }
}

impl io::Read for Conn {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Conn::Plain(s) => s.read(buf),
            Conn::Tls(s) => s.read(buf),
        }
    }
}

impl io::Write for Conn {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Conn::Plain(s) => s.write(buf),
            Conn::Tls(s) => s.write(buf),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match self {
            Conn::Plain(s) => s.flush(),
            Conn::Tls(s) => s.flush(),
        }
    }
}

/// Most bytes of the CA file a client reads.
const CA_FILE_BYTES_MAX: u64 = 1 << 20;

/// A TLS session to `addr` trusting the CA certificates of `ca_file` (the certificate
/// must name `addr`'s IP address). The handshake runs on the first exchange.
fn tls_conn(
    tcp: TcpStream,
    addr: SocketAddr,
    ca_file: &std::path::Path,
) -> std::result::Result<Conn, String> {
    use rustls::pki_types::{pem::PemObject, CertificateDer, ServerName};
    let at = |e: &dyn fmt::Display| format!("TLS CA file {}: {e}", ca_file.display());
    let len = std::fs::metadata(ca_file).map_err(|e| at(&e))?.len();
    if len > CA_FILE_BYTES_MAX {
        return Err(at(&format!("{len} bytes, over {CA_FILE_BYTES_MAX}")));
    }
    let pem = std::fs::read(ca_file).map_err(|e| at(&e))?;
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(&pem) {
        roots.add(cert.map_err(|e| at(&e))?).map_err(|e| at(&e))?;
    }
    if roots.is_empty() {
        return Err(at(&"no certificate in it"));
    }
    let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("TLS: {e}"))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    let name = ServerName::IpAddress(addr.ip().into());
    let conn = rustls::ClientConnection::new(std::sync::Arc::new(config), name)
        .map_err(|e| format!("TLS: {e}"))?;
    Ok(Conn::Tls(Box::new(rustls::StreamOwned::new(conn, tcp))))
}

/// One session with a DC.
pub struct Client {
    stream: Conn,
    welcome: Welcome,
    options: Options,
    broken: Option<String>,
}

/// TCP keepalive of a client connection: the first probe after this much silence, in
/// milliseconds, then one per interval; a server gone without closing (its host died) is
/// noticed after `KEEPALIVE_RETRIES` unanswered probes.
pub const KEEPALIVE_IDLE_MS: u64 = 30_000;
pub const KEEPALIVE_INTERVAL_MS: u64 = 10_000;
pub const KEEPALIVE_RETRIES: u32 = 3;

fn keepalive(stream: &TcpStream) -> io::Result<()> {
    let params = socket2::TcpKeepalive::new()
        .with_time(Duration::from_millis(KEEPALIVE_IDLE_MS))
        .with_interval(Duration::from_millis(KEEPALIVE_INTERVAL_MS))
        .with_retries(KEEPALIVE_RETRIES);
    socket2::SockRef::from(stream).set_tcp_keepalive(&params)
}

fn connect_once(addrs: &[SocketAddr], timeout: Duration) -> io::Result<TcpStream> {
    let mut last = io::Error::new(io::ErrorKind::NotFound, "the address resolved to nothing");
    for a in addrs {
        match TcpStream::connect_timeout(a, timeout) {
            Ok(s) => return Ok(s),
            Err(e) => last = e,
        }
    }
    Err(last)
}

impl Client {
    /// Connects with default options, retrying for up to 10 s.
    pub fn connect(addr: impl ToSocketAddrs + fmt::Display) -> Result<Client> {
        Client::connect_with(addr, Options::default())
    }

    pub fn connect_with(
        addr: impl ToSocketAddrs + fmt::Display,
        options: Options,
    ) -> Result<Client> {
        let name = addr.to_string();
        let fail = |why: String| ClientError::Connect {
            addr: name.clone(),
            why,
        };
        let addrs: Vec<SocketAddr> = addr
            .to_socket_addrs()
            .map_err(|e| fail(e.to_string()))?
            .collect();
        let deadline = Instant::now() + Duration::from_millis(options.connect_timeout_ms);
        let mut pause = Duration::from_millis(20);
        let stream = loop {
            match connect_once(
                &addrs,
                Duration::from_millis(options.connect_timeout_ms.max(1)),
            ) {
                Ok(s) => break s,
                Err(e)
                    if e.kind() == io::ErrorKind::ConnectionRefused && !options.retry_refused =>
                {
                    return Err(fail(format!(
                        "{e}: nothing listens there; is the cluster up, and is this a DC's \
                         native client port?"
                    )))
                }
                Err(e) if Instant::now() + pause > deadline => return Err(fail(e.to_string())),
                Err(_) => std::thread::sleep(pause),
            }
            pause = (pause * 2).min(Duration::from_millis(500));
        };
        stream.set_nodelay(true).map_err(|e| fail(e.to_string()))?;
        keepalive(&stream).map_err(|e| fail(e.to_string()))?;
        let stream = match &options.tls_ca_file {
            None => Conn::Plain(stream),
            Some(ca) => {
                let peer = stream.peer_addr().map_err(|e| fail(e.to_string()))?;
                tls_conn(stream, peer, ca).map_err(fail)?
            }
        };
        Client::handshake(stream, options).map_err(|e| match e {
            ClientError::ConnectionLost(why) | ClientError::Protocol(why) => fail(why),
            other => other,
        })
    }

    fn handshake(stream: Conn, options: Options) -> Result<Client> {
        let mut client = Client {
            stream,
            welcome: Welcome {
                cluster: String::new(),
                protocol: String::new(),
                node: String::new(),
                dc: String::new(),
                session: causeway_core::SessionId(0),
            },
            options,
            broken: None,
        };
        let hello = ClientFrame::Hello {
            wire_version: CLIENT_WIRE_VERSION,
            cluster: client.options.cluster.clone(),
            password: client.options.password.clone(),
        };
        match client.exchange(&hello, "the handshake")? {
            ServerFrame::Welcome(w) => client.welcome = w,
            ServerFrame::Refused { reason } => return Err(ClientError::Refused(reason)),
            other => {
                return Err(ClientError::Protocol(format!(
                    "{other:?} instead of Welcome"
                )))
            }
        }
        Ok(client)
    }

    /// What the server said about this session (cluster, protocol, node, DC, session id).
    pub fn welcome(&self) -> &Welcome {
        &self.welcome
    }

    fn exchange(&mut self, frame: &ClientFrame, what: &str) -> Result<ServerFrame> {
        if let Some(why) = &self.broken {
            return Err(ClientError::ConnectionLost(format!(
                "{why}; open a new client"
            )));
        }
        let timeout = Duration::from_millis(self.options.request_timeout_ms);
        let result = (|| {
            self.stream.tcp().set_read_timeout(Some(timeout))?;
            self.stream.tcp().set_write_timeout(Some(timeout))?;
            wire::write_frame(&mut self.stream, &wire::encode(frame)?)?;
            wire::read_frame(&mut self.stream)
        })();
        let bytes = match result {
            Ok(b) => b,
            Err(e) => {
                let timed_out = matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                );
                self.broken = Some(format!("{what} failed: {e}"));
                return Err(if timed_out {
                    ClientError::Timeout {
                        what: what.to_string(),
                        after_ms: self.options.request_timeout_ms,
                    }
                } else {
                    ClientError::ConnectionLost(e.to_string())
                });
            }
        };
        wire::decode(&bytes).map_err(|e| ClientError::Protocol(e.to_string()))
    }

    /// Runs one raw request and returns the raw response (errors only for transport).
    pub fn call(&mut self, request: Request) -> Result<Response> {
        let what = format!("{request:?}").chars().take(60).collect::<String>();
        match self.exchange(&ClientFrame::Request(request), &what)? {
            ServerFrame::Response(r) => Ok(r),
            other => Err(ClientError::Protocol(format!(
                "{other:?} instead of a Response"
            ))),
        }
    }

    fn expect(&mut self, request: Request) -> Result<Response> {
        match self.call(request)? {
            Response::Error(e) => Err(ClientError::Server(e)),
            Response::Aborted { reason } => Err(ClientError::Aborted(reason)),
            r => Ok(r),
        }
    }

    /// Starts a causal transaction.
    pub fn begin(&mut self) -> Result<TxnId> {
        self.begin_kind(TxnKind::Causal)
    }

    /// Starts a transaction of `kind`; retried while the server is unavailable.
    pub fn begin_kind(&mut self, kind: TxnKind) -> Result<TxnId> {
        let mut attempt = 0;
        loop {
            match self.expect(Request::Begin { kind, label: None }) {
                Ok(Response::Begun { txn }) => return Ok(txn),
                Ok(other) => return Err(ClientError::Protocol(format!("{other:?} to Begin"))),
                Err(ClientError::Server(causeway_core::Error::Unavailable(_)))
                    if attempt < BEGIN_RETRIES_MAX =>
                {
                    attempt += 1;
                    std::thread::sleep(Duration::from_millis(50 << attempt));
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// Reads keys, each with the type it is expected to hold.
    pub fn read(&mut self, keys: Vec<(Key, ObjType)>) -> Result<Vec<ReadValue>> {
        match self.expect(Request::Read { keys })? {
            Response::Values(v) => Ok(v),
            other => Err(ClientError::Protocol(format!("{other:?} to Read"))),
        }
    }

    /// Reads one register.
    pub fn get(&mut self, key: impl Into<Key>) -> Result<Option<Value>> {
        let mut values = self.read(vec![(key.into(), ObjType::Lww)])?;
        match values.pop().map(|v| v.value) {
            Some(ObjValue::Lww(v)) => Ok(v),
            other => Err(ClientError::Protocol(format!("{other:?} for a register"))),
        }
    }

    /// Reads one set's members.
    pub fn members(&mut self, key: impl Into<Key>) -> Result<Vec<Value>> {
        let mut values = self.read(vec![(key.into(), ObjType::Set)])?;
        match values.pop().map(|v| v.value) {
            Some(ObjValue::Set(v)) => Ok(v),
            other => Err(ClientError::Protocol(format!("{other:?} for a set"))),
        }
    }

    /// Buffers an update in the open transaction; returns its op id.
    pub fn update(&mut self, key: impl Into<Key>, update: Update) -> Result<OpId> {
        match self.expect(Request::Update {
            key: key.into(),
            update,
        })? {
            Response::Updated { op } => Ok(op),
            other => Err(ClientError::Protocol(format!("{other:?} to Update"))),
        }
    }

    /// Assigns a register.
    pub fn set(&mut self, key: impl Into<Key>, value: Value) -> Result<OpId> {
        self.update(key, Update::Assign(value))
    }

    /// Commits the open transaction.
    pub fn commit(&mut self) -> Result<()> {
        match self.expect(Request::Commit)? {
            Response::Committed => Ok(()),
            other => Err(ClientError::Protocol(format!("{other:?} to Commit"))),
        }
    }

    /// Aborts the open transaction.
    pub fn abort(&mut self) -> Result<()> {
        match self.call(Request::Abort)? {
            Response::Aborted { .. } => Ok(()),
            Response::Error(e) => Err(ClientError::Server(e)),
            other => Err(ClientError::Protocol(format!("{other:?} to Abort"))),
        }
    }

    /// The session's causal past, to hand to another session's `attach`.
    pub fn token(&mut self) -> Result<Vec<u8>> {
        match self.expect(Request::Token)? {
            Response::Token(t) => Ok(t),
            other => Err(ClientError::Protocol(format!("{other:?} to Token"))),
        }
    }

    /// Adopts a causal past exported by another session.
    pub fn attach(&mut self, token: Vec<u8>) -> Result<()> {
        match self.expect(Request::Attach { token })? {
            Response::Attached => Ok(()),
            other => Err(ClientError::Protocol(format!("{other:?} to Attach"))),
        }
    }

    /// Waits until everything the session has seen is durable in enough DCs.
    pub fn barrier(&mut self) -> Result<()> {
        match self.expect(Request::Barrier)? {
            Response::BarrierDone => Ok(()),
            other => Err(ClientError::Protocol(format!("{other:?} to Barrier"))),
        }
    }

    /// One page of a partition's keys as the node of the session's DC holding it stores
    /// them now (`Request::ListKeys`: no snapshot), from key position `from`
    /// (`causeway_core::keyorder`); at most `max` keys (and `LIST_KEYS_MAX`).
    pub fn list_keys(&mut self, partition: u32, from: u64, max: u32) -> Result<KeyPage> {
        let partition = causeway_core::PartitionId(partition);
        match self.expect(Request::ListKeys {
            partition,
            from,
            max,
        })? {
            Response::Keys(page) => Ok(page),
            other => Err(ClientError::Protocol(format!("{other:?} to ListKeys"))),
        }
    }
}

/// Token bytes as lowercase hex (how the CLI prints them).
pub fn to_hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Parses lowercase or uppercase hex.
pub fn from_hex(text: &str) -> Option<Vec<u8>> {
    let text = text.trim();
    if !text.len().is_multiple_of(2) {
        return None;
    }
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(text.get(i..i + 2)?, 16).ok())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_round_trips_and_connect_errors_name_the_address() {
        assert_eq!(from_hex(&to_hex(&[0, 255, 16])), Some(vec![0, 255, 16]));
        assert_eq!(from_hex("abc"), None);
        let options = Options {
            connect_timeout_ms: 50,
            ..Options::default()
        };
        let e = Client::connect_with("127.0.0.1:1", options).err().unwrap();
        assert!(
            e.to_string().contains("cannot connect to 127.0.0.1:1"),
            "{e}"
        );
    }

    #[test]
    fn a_refused_connection_is_reported_at_once_when_asked() {
        let free = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = free.local_addr().unwrap();
        drop(free);
        let options = Options {
            connect_timeout_ms: 10_000,
            retry_refused: false,
            ..Options::default()
        };
        let began = Instant::now();
        let e = Client::connect_with(addr, options).err().unwrap();
        assert!(
            began.elapsed() < Duration::from_millis(2_000),
            "not retried: {:?}",
            began.elapsed()
        );
        assert!(e.to_string().contains("nothing listens there"), "{e}");
    }
}
