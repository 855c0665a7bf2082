//! The client gateway: how applications reach the protocol's client sessions hosted on
//! this node.
//!
//! [`Gateway::open_session`] gives a [`GatewaySession`], an in-process handle whose
//! [`GatewaySession::call`] runs one `Request` on a protocol `ClientSession` machine living
//! in the node task and returns its `Response`. The native TCP endpoint
//! ([`serve_clients`]) and the RESP front end both sit on it: one connection, one session.
//!
//! Session ids are unique cluster-wide and across restarts (layout in
//! [`crate::control::session_prefix`]). The gateway talks to the node task only through
//! [`crate::control`].

use crate::control::{
    session_prefix, stops, Control, SharedGauges, BATCH_REQUESTS_MAX, SESSIONS_PER_BOOT_MAX,
};
use crate::peer;
use crate::throttle::{Throttle, LOG_INTERVAL_MS};
use crate::tls::Stream;
use causeway_client::wire::{self, ClientFrame, ServerFrame, Welcome, CLIENT_WIRE_VERSION};
use causeway_core::limits::{FRAME_LEN_MAX, PREAUTH_FRAME_LEN_MAX};
pub use causeway_core::SessionScope;
use causeway_core::{DcId, Error, NodeId, Request, Response, Secret, SessionId};
use futures_util::{SinkExt, StreamExt};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio::sync::{mpsc, oneshot};
use tokio_util::codec::{Framed, FramedParts};

/// Facts about the node and DC a gateway serves.
#[derive(Clone, Debug)]
pub struct GatewayInfo {
    pub cluster: String,
    pub protocol: String,
    pub node_name: String,
    pub dc: DcId,
    pub dc_names: Vec<String>,
    pub password: Option<Secret>,
    /// The scope a new session shares its past with ([`SessionScope`]).
    pub session_scope: SessionScope,
}

/// The one user a node knows today (Redis's `default`): every authenticated client is it.
pub const DEFAULT_USER: &str = "default";

struct Inner {
    info: GatewayInfo,
    control: mpsc::UnboundedSender<Control>,
    prefix: u64,
    next: AtomicU64,
    live: Arc<AtomicUsize>,
    /// Native client connections open now (for the metrics).
    connections: Arc<AtomicUsize>,
    sessions_max: usize,
    gauges: SharedGauges,
    /// The name of the endpoint scope of [`DEFAULT_USER`].
    endpoint: Arc<str>,
}

/// Opens client sessions on this node. Cheap to clone.
#[derive(Clone)]
pub struct Gateway {
    inner: Arc<Inner>,
}

impl Gateway {
    pub fn new(
        info: GatewayInfo,
        node: NodeId,
        epoch: u64,
        control: mpsc::UnboundedSender<Control>,
        sessions_max: usize,
        gauges: SharedGauges,
    ) -> Gateway {
        let prefix = session_prefix(node, epoch);
        Gateway {
            inner: Arc::new(Inner {
                info,
                control,
                prefix,
                next: AtomicU64::new(1),
                live: Arc::new(AtomicUsize::new(0)),
                connections: Arc::new(AtomicUsize::new(0)),
                sessions_max,
                gauges,
                endpoint: Arc::from(DEFAULT_USER),
            }),
        }
    }

    pub fn info(&self) -> &GatewayInfo {
        &self.inner.info
    }

    /// The node's latest gauges (`name`, value, sorted by name), refreshed by the node
    /// task about twice a second: the machine's own gauges and its latest samples (see
    /// `crate::samples` for the naming rule).
    pub fn gauges(&self) -> Vec<(String, f64)> {
        self.inner.gauges.read()
    }

    /// Sessions open now.
    pub fn live_sessions(&self) -> usize {
        self.inner.live.load(Ordering::Relaxed)
    }

    /// Native client connections open now on this node's endpoint.
    pub fn client_connections(&self) -> usize {
        self.inner.connections.load(Ordering::Relaxed)
    }

    /// A fresh session with an empty causal past. When the node cannot host one more,
    /// the session is refused: [`GatewaySession::refusal`] says why and every call
    /// answers `Error::Unavailable`.
    pub fn open_session(&self) -> GatewaySession {
        let inner = &self.inner;
        let count = inner.next.fetch_add(1, Ordering::Relaxed);
        let live = inner.live.fetch_add(1, Ordering::Relaxed) + 1;
        let refusal = if count > SESSIONS_PER_BOOT_MAX {
            Some("this node opened all the sessions one boot may; restart it".to_string())
        } else if live > inner.sessions_max {
            Some(format!(
                "too many sessions on this node (limit {})",
                inner.sessions_max
            ))
        } else {
            None
        };
        let mut session = GatewaySession {
            id: SessionId(inner.prefix | (count & SESSIONS_PER_BOOT_MAX)),
            control: inner.control.clone(),
            live: inner.live.clone(),
            refusal,
            used: false,
            observed: true,
            scope: None,
            endpoint: inner.endpoint.clone(),
        };
        session.set_scope(inner.info.session_scope);
        session
    }
}

/// One client session on a node; dropping it closes the session.
pub struct GatewaySession {
    id: SessionId,
    control: mpsc::UnboundedSender<Control>,
    live: Arc<AtomicUsize>,
    refusal: Option<String>,
    used: bool,
    /// Whether its reads carry `ReadValue::observed` ([`GatewaySession::skip_observed`]).
    observed: bool,
    /// The scope it shares its past with now; `None`: its own.
    scope: Option<Arc<str>>,
    /// The name of its endpoint user's scope.
    endpoint: Arc<str>,
}

impl GatewaySession {
    pub fn id(&self) -> SessionId {
        self.id
    }

    /// Its reads answer without the ids of the writes they observed
    /// (`ReadValue::observed` empty; `ClientSession::skip_observed`), sparing the nodes
    /// that work. Only before the session's first call, which creates its machine.
    pub fn skip_observed(&mut self) {
        assert!(!self.used, "skip_observed before the session's first call");
        self.observed = false;
    }

    /// Shares the session's past with its endpoint's other sessions, or stops sharing it
    /// (from its next request on; what it took stays in its past).
    pub fn set_scope(&mut self, scope: SessionScope) {
        self.scope = match scope {
            SessionScope::Endpoint => Some(self.endpoint.clone()),
            SessionScope::Connection => None,
        };
    }

    /// The scope the session shares its past with now.
    pub fn scope(&self) -> SessionScope {
        match self.scope {
            Some(_) => SessionScope::Endpoint,
            None => SessionScope::Connection,
        }
    }

    /// Why the node refused this session, if it did.
    pub fn refusal(&self) -> Option<&str> {
        self.refusal.as_deref()
    }

    /// Runs one request on the session and returns its answer.
    pub async fn call(&mut self, request: Request) -> Response {
        let mut answers = self.submit(vec![request]).await;
        answers.pop().unwrap_or_else(|| {
            Response::Error(Error::Unavailable("the node gave no answer".into()))
        })
    }

    /// Runs `requests` in order and answers each, stopping after the first
    /// `Response::Error` or `Response::Aborted` (then the last answer). The node task runs
    /// up to [`BATCH_REQUESTS_MAX`] of them per round trip.
    pub async fn call_batch(&mut self, requests: Vec<Request>) -> Vec<Response> {
        let mut out = Vec::with_capacity(requests.len());
        let mut rest = requests.into_iter().peekable();
        while rest.peek().is_some() {
            let chunk: Vec<Request> = rest.by_ref().take(BATCH_REQUESTS_MAX).collect();
            let len = chunk.len();
            let answers = self.submit(chunk).await;
            let stopped = answers.len() < len || answers.last().is_some_and(stops);
            out.extend(answers);
            if stopped {
                break;
            }
        }
        out
    }

    /// One round trip to the node task for at most [`BATCH_REQUESTS_MAX`] requests.
    async fn submit(&mut self, requests: Vec<Request>) -> Vec<Response> {
        debug_assert!(requests.len() <= BATCH_REQUESTS_MAX);
        if let Some(why) = &self.refusal {
            return vec![Response::Error(Error::Unavailable(why.clone()))];
        }
        let (tx, rx) = oneshot::channel();
        let submit = Control::Submit {
            session: self.id,
            requests,
            reply: tx,
            observed: self.observed,
            scope: self.scope.clone(),
        };
        self.used = true;
        if self.control.send(submit).is_err() {
            let why = "the node is shutting down".to_string();
            return vec![Response::Error(Error::Unavailable(why))];
        }
        rx.await.unwrap_or_else(|_| {
            let why = "the node stopped before answering".to_string();
            vec![Response::Error(Error::Unavailable(why))]
        })
    }
}

impl Drop for GatewaySession {
    fn drop(&mut self) {
        self.live.fetch_sub(1, Ordering::Relaxed);
        if self.used {
            let _ = self.control.send(Control::Close { session: self.id });
        }
    }
}

/// How the native client endpoint runs (from the cluster file's `[limits]`).
#[derive(Clone)]
pub struct ClientPort {
    /// Most connections open at once; one more is refused at once.
    pub connections_max: usize,
    /// Most connections open at once that have not said an accepted Hello yet; one more
    /// is refused at once.
    pub unauthenticated_max: usize,
    /// How long a connection may take, from its accept, to complete its TLS handshake
    /// (if any) and say an accepted Hello, in milliseconds.
    pub auth_timeout_ms: u64,
    /// A connection idle (no request) this long after its Hello is closed; 0 never.
    pub idle_timeout_ms: u64,
    pub tls: Option<tokio_rustls::TlsAcceptor>,
    /// The DC's RESP endpoint, named to a Redis client that comes here.
    pub resp_addr: Option<std::net::SocketAddr>,
}

/// Counts a connection among those of its kind while it lives.
struct Slot(Arc<AtomicUsize>);

impl Slot {
    /// Counts one more; also how many there are with it.
    fn take(count: &Arc<AtomicUsize>) -> (Slot, usize) {
        let n = count.fetch_add(1, Ordering::Relaxed) + 1;
        (Slot(count.clone()), n)
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Refused client lines: at most one per interval (see [`crate::throttle`]).
static REFUSED_CLIENTS: Throttle = Throttle::new(LOG_INTERVAL_MS);
static FAILED_ACCEPTS: Throttle = Throttle::new(LOG_INTERVAL_MS);

/// Serves the native client protocol on `listener` forever. Before its Hello is
/// accepted a connection has no session, may send one frame of at most
/// `PREAUTH_FRAME_LEN_MAX` bytes (no buffer is reserved for a larger declared length),
/// and must do so within `auth_timeout_ms`; at most `unauthenticated_max` such
/// connections are open. A connection idle (no request) for `idle_timeout_ms` is closed;
/// 0 never closes one. A client of another protocol is told where it belongs
/// ([`foreign_client`]) and closed.
pub async fn serve_clients(listener: TcpListener, gateway: Gateway, port: ClientPort) {
    let open = gateway.inner.connections.clone();
    let unauthenticated = Arc::new(AtomicUsize::new(0));
    loop {
        let (stream, addr) = match listener.accept().await {
            Ok(v) => v,
            Err(e) => {
                crate::throttled!(warn, FAILED_ACCEPTS, "accepting a client failed: {e}");
                tokio::time::sleep(Duration::from_millis(20)).await;
                continue;
            }
        };
        let gateway = gateway.clone();
        let (slot, n_open) = Slot::take(&open);
        let (pending, n_pending) = Slot::take(&unauthenticated);
        let port = port.clone();
        tokio::spawn(async move {
            let _slot = slot;
            let full = if n_open > port.connections_max {
                Some("too many client connections on this endpoint".to_string())
            } else if n_pending > port.unauthenticated_max {
                Some(format!(
                    "too many unauthenticated connections on this endpoint (limit {})",
                    port.unauthenticated_max
                ))
            } else {
                None
            };
            let served = async {
                stream.set_nodelay(true).map_err(|e| e.to_string())?;
                crate::transport::keepalive(&stream).map_err(|e| e.to_string())?;
                if let Some(reason) = full {
                    return refuse_at_once(stream, reason, port.tls.is_some()).await;
                }
                client_connection(stream, &gateway, &port, pending).await
            };
            if let Err(e) = served.await {
                tracing::debug!(%addr, "client connection ended: {e}");
            }
        });
    }
}

/// Refuses a connection before reading anything from it: a `Refused` frame with
/// `reason`, what the client sent in the next moment read and dropped (closing with it
/// unread resets the connection, and the client may lose the answer), then close. On a
/// TLS port (`tls`) it only closes: a refusal costs no handshake, and a plaintext frame
/// would reach a TLS client as a garbled handshake anyway.
async fn refuse_at_once(
    mut stream: tokio::net::TcpStream,
    reason: String,
    tls: bool,
) -> Result<(), String> {
    crate::throttled!(warn, REFUSED_CLIENTS, "refused a client: {reason}");
    if tls {
        return Err(format!("refused at once: {reason}"));
    }
    let frame = wire::encode(&ServerFrame::Refused { reason }).map_err(|e| e.to_string())?;
    let mut bytes = (frame.len() as u32).to_be_bytes().to_vec();
    bytes.extend(frame);
    let _ = stream.write_all(&bytes).await;
    drain_briefly(&mut stream).await;
    Err("refused at once".into())
}

/// Ends our side and reads, dropping it, what the client still sends, for at most
/// [`FOREIGN_DRAIN`], through a small buffer.
async fn drain_briefly<S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin>(stream: &mut S) {
    let _ = stream.shutdown().await;
    let mut rest = [0u8; 1024];
    let drain = async { while matches!(stream.read(&mut rest).await, Ok(n) if n > 0) {} };
    let _ = tokio::time::timeout(FOREIGN_DRAIN, drain).await;
}

/// Why a client's first frame is refused by the endpoint of cluster `cluster` with
/// password `password`, before the node's own limits are asked: `None` for a Hello of
/// this wire version that gives the password (when there is one; compared in constant
/// time) and expects this cluster (or any).
pub fn hello_refusal(first: &ClientFrame, cluster: &str, password: Option<&str>) -> Option<String> {
    match first {
        ClientFrame::Hello { wire_version, .. } if *wire_version != CLIENT_WIRE_VERSION => {
            Some(format!(
                "client wire version {wire_version}, this server speaks {CLIENT_WIRE_VERSION}: upgrade the client"
            ))
        }
        ClientFrame::Hello { password: given, .. } if password.is_some() => {
            let ok = given.as_deref().zip(password).is_some_and(|(given, expected)| {
                crate::auth::same_secret(given.as_bytes(), expected.as_bytes())
            });
            if ok {
                cluster_refusal(first, cluster)
            } else if given.is_none() {
                Some("NOAUTH this server requires a password: pass --password or set CAUSEWAY_PASSWORD".into())
            } else {
                Some("WRONGPASS invalid password".into())
            }
        }
        _ => cluster_refusal(first, cluster),
    }
}

/// [`hello_refusal`]'s cluster check.
fn cluster_refusal(first: &ClientFrame, cluster: &str) -> Option<String> {
    match first {
        ClientFrame::Hello {
            cluster: Some(c), ..
        } if c != cluster => Some(format!("this is cluster '{cluster}', not '{c}'")),
        ClientFrame::Hello { .. } => None,
        ClientFrame::Request(_) => Some("the first frame must be Hello".to_string()),
    }
}

type ClientFramed = Framed<Stream, tokio_util::codec::LengthDelimitedCodec>;

/// The client's next frame; `None` when it closed, an error when it stayed idle for
/// `idle_timeout_ms` (0: forever) or the connection failed.
async fn next_request(
    framed: &mut ClientFramed,
    idle_timeout_ms: u64,
) -> Result<Option<bytes::BytesMut>, String> {
    let next = if idle_timeout_ms == 0 {
        framed.next().await
    } else {
        let idle = Duration::from_millis(idle_timeout_ms);
        match tokio::time::timeout(idle, framed.next()).await {
            Ok(next) => next,
            Err(_) => return Err(format!("idle for {idle_timeout_ms} ms: closed")),
        }
    };
    next.transpose().map_err(|e| e.to_string())
}

async fn send(framed: &mut ClientFramed, frame: &ServerFrame) -> Result<(), String> {
    let bytes = wire::encode(frame).map_err(|e| e.to_string())?;
    framed
        .send(bytes::Bytes::from(bytes))
        .await
        .map_err(|e: std::io::Error| e.to_string())
}

/// How long a client of another protocol, once answered, may take to close.
const FOREIGN_DRAIN: Duration = Duration::from_millis(500);

/// How many bytes of a new connection are looked at before framing it: a frame's length.
const HEAD_LEN: usize = 4;

// A frame is at most 2^24 bytes, so a native client's first byte is 0 or 1.
const _: () = assert!(causeway_core::limits::FRAME_LEN_MAX <= 1 << 24);

/// What a client whose first bytes are `head` is told when it speaks another protocol
/// (a frame's length opens with 0 or 1; a Redis client's with `*` or a letter, an HTTP
/// client's with its method): where it belongs, as an HTTP answer to an HTTP client and a
/// RESP error to any other (which `redis-cli` shows). `None`: a native client.
pub fn foreign_client(
    head: &[u8; HEAD_LEN],
    resp_addr: Option<std::net::SocketAddr>,
) -> Option<String> {
    if head[0] <= 1 {
        return None;
    }
    let what = match head {
        [b'*', ..] => "the Redis protocol (RESP)",
        b"GET " | b"POST" | b"HEAD" | b"PUT " => "HTTP",
        [0x16, 0x03, ..] => "TLS, which this port does not",
        [c, ..] if c.is_ascii_alphabetic() => "the Redis protocol (inline commands)",
        _ => "another protocol",
    };
    let mut line = format!("this is Causeway's native client port, and the client speaks {what}");
    if let Some(addr) = resp_addr {
        line.push_str(&format!(
            "; Redis clients connect to this DC's RESP port, {addr}"
        ));
    }
    Some(match what {
        "HTTP" => format!(
            "HTTP/1.1 400 Bad Request\r\nContent-Type: text/plain\r\nContent-Length: {}\r\n\
             Connection: close\r\n\r\n{line}\n",
            line.len() + 1
        ),
        _ => format!("-ERR {line}\r\n"),
    })
}

/// One connection from its accept: the pre-authentication phase (TLS, the Hello, all by
/// the deadline and within the pre-auth frame limit), then its requests under the full
/// limits. `pending` counts it among the unauthenticated connections until its Hello is
/// accepted.
async fn client_connection(
    stream: tokio::net::TcpStream,
    gateway: &Gateway,
    port: &ClientPort,
    pending: Slot,
) -> Result<(), String> {
    let deadline = tokio::time::Instant::now() + Duration::from_millis(port.auth_timeout_ms);
    let hello = tokio::time::timeout_at(deadline, read_hello(stream, port));
    let (mut framed, hello) = match hello.await {
        Ok(Ok(Some(v))) => v,
        Ok(Ok(None)) => return Ok(()),
        Ok(Err(e)) => return Err(e),
        Err(_) => return Err(format!("no Hello within {} ms", port.auth_timeout_ms)),
    };
    let info = gateway.info();
    if let Some(reason) = hello_refusal(&hello, &info.cluster, info.password.as_deref()) {
        crate::throttled!(warn, REFUSED_CLIENTS, "refused a client: {reason}");
        return send(&mut framed, &ServerFrame::Refused { reason }).await;
    }
    // Authenticated: the session is opened only now, and the full frame limit applies.
    drop(pending);
    framed.codec_mut().set_max_frame_length(FRAME_LEN_MAX);
    let mut session = gateway.open_session();
    if let Some(reason) = session.refusal().map(str::to_string) {
        crate::throttled!(warn, REFUSED_CLIENTS, "refused a client: {reason}");
        return send(&mut framed, &ServerFrame::Refused { reason }).await;
    }
    let welcome = Welcome {
        cluster: info.cluster.clone(),
        protocol: info.protocol.clone(),
        node: info.node_name.clone(),
        dc: info.dc_names[usize::from(info.dc.0)].clone(),
        session: session.id(),
    };
    send(&mut framed, &ServerFrame::Welcome(welcome)).await?;
    while let Some(bytes) = next_request(&mut framed, port.idle_timeout_ms).await? {
        let request = match wire::decode::<ClientFrame>(&bytes).map_err(|e| e.to_string())? {
            ClientFrame::Request(r) => r,
            ClientFrame::Hello { .. } => return Err("a second Hello".into()),
        };
        let response = session.call(request).await;
        send(&mut framed, &ServerFrame::Response(response)).await?;
    }
    Ok(())
}

/// The pre-authentication reads: the TLS handshake (if any), the first bytes (a client
/// of another protocol is told where it belongs: `Ok(None)`), the Hello. A Hello longer
/// than [`PREAUTH_FRAME_LEN_MAX`] is refused at its length, before its bytes are read.
async fn read_hello(
    stream: tokio::net::TcpStream,
    port: &ClientPort,
) -> Result<Option<(ClientFramed, ClientFrame)>, String> {
    let mut stream = match &port.tls {
        None => Stream::Plain(stream),
        Some(t) => crate::tls::accept(t, stream)
            .await
            .map_err(|e| format!("TLS: {e}"))?,
    };
    let mut head = [0u8; HEAD_LEN];
    stream
        .read_exact(&mut head)
        .await
        .map_err(|_| "no Hello".to_string())?;
    if let Some(answer) = foreign_client(&head, port.resp_addr) {
        let _ = stream.write_all(answer.as_bytes()).await;
        drain_briefly(&mut stream).await;
        return Ok(None);
    }
    let mut codec = peer::codec();
    codec.set_max_frame_length(PREAUTH_FRAME_LEN_MAX);
    let mut parts = FramedParts::new::<bytes::Bytes>(stream, codec);
    parts.read_buf = bytes::BytesMut::from(&head[..]);
    let mut framed = Framed::from_parts(parts);
    let declared = u32::from_be_bytes(head) as usize;
    if declared > PREAUTH_FRAME_LEN_MAX {
        let reason = format!(
            "a Hello of {declared} bytes: before authentication a frame is at most {PREAUTH_FRAME_LEN_MAX} bytes"
        );
        crate::throttled!(warn, REFUSED_CLIENTS, "refused a client: {reason}");
        send(&mut framed, &ServerFrame::Refused { reason }).await?;
        drain_briefly(framed.get_mut()).await;
        return Ok(None);
    }
    let hello = match framed.next().await {
        Some(Ok(bytes)) => wire::decode::<ClientFrame>(&bytes).map_err(|e| e.to_string())?,
        _ => return Err("no Hello".into()),
    };
    Ok(Some((framed, hello)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hello_is_refused_for_its_version_or_cluster_and_a_request_first_always() {
        let hello = |wire_version, cluster: Option<&str>| ClientFrame::Hello {
            wire_version,
            cluster: cluster.map(str::to_string),
            password: None,
        };
        assert_eq!(
            hello_refusal(&hello(CLIENT_WIRE_VERSION, None), "c", None),
            None
        );
        assert_eq!(
            hello_refusal(&hello(CLIENT_WIRE_VERSION, Some("c")), "c", None),
            None
        );
        let e = hello_refusal(&hello(CLIENT_WIRE_VERSION, Some("d")), "c", None).unwrap();
        assert_eq!(e, "this is cluster 'c', not 'd'");
        let e = hello_refusal(&hello(CLIENT_WIRE_VERSION + 1, Some("c")), "c", None).unwrap();
        assert!(e.contains("upgrade the client"), "{e}");
        let e = hello_refusal(&ClientFrame::Request(Request::Commit), "c", None).unwrap();
        assert_eq!(e, "the first frame must be Hello");
    }

    #[test]
    fn a_client_of_another_protocol_is_told_where_it_belongs() {
        let resp = Some(std::net::SocketAddr::from(([127, 0, 0, 1], 7001)));
        assert_eq!(foreign_client(&[0, 0, 0, 9], resp), None, "a frame length");
        assert_eq!(
            foreign_client(&[1, 0, 0, 0], resp),
            None,
            "the longest frame"
        );
        let redis = foreign_client(b"*1\r\n", resp).expect("RESP");
        assert_eq!(
            redis,
            "-ERR this is Causeway's native client port, and the client speaks the Redis \
             protocol (RESP); Redis clients connect to this DC's RESP port, 127.0.0.1:7001\r\n"
        );
        let http = foreign_client(b"GET ", None).expect("HTTP");
        assert!(http.starts_with("HTTP/1.1 400 Bad Request\r\n"), "{http}");
        assert!(http.ends_with("the client speaks HTTP\n"), "{http}");
        let inline = foreign_client(b"PING", resp).expect("inline");
        assert!(
            inline.contains("inline commands") && inline.contains("7001"),
            "{inline}"
        );
    }

    #[test]
    fn a_hello_must_give_the_password_when_the_server_has_one() {
        let hello = |password: Option<&str>| ClientFrame::Hello {
            wire_version: CLIENT_WIRE_VERSION,
            cluster: Some("c".into()),
            password: password.map(Into::into),
        };
        let pw = Some("s3cret");
        assert_eq!(hello_refusal(&hello(Some("s3cret")), "c", pw), None);
        let e = hello_refusal(&hello(Some("s3creT")), "c", pw).unwrap();
        assert!(e.starts_with("WRONGPASS"), "{e}");
        let e = hello_refusal(&hello(Some("s3cret ")), "c", pw).unwrap();
        assert!(e.starts_with("WRONGPASS"), "{e}");
        let e = hello_refusal(&hello(None), "c", pw).unwrap();
        assert!(e.starts_with("NOAUTH") && e.contains("--password"), "{e}");
        let e = hello_refusal(&hello(Some("s3cret")), "d", pw).unwrap();
        assert!(e.contains("cluster 'd'"), "{e}");
        assert_eq!(hello_refusal(&hello(Some("any")), "c", None), None);
    }
}
