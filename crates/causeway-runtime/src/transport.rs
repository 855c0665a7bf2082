//! Node-to-node transport: reliable FIFO links over TCP with emulated WAN latency.
//!
//! Outgoing: one [`Link`] per peer node. The node task pushes messages synchronously; each
//! gets the next sequence number and a due time (now + the one-way latency between the two
//! DCs) and waits in a bounded queue. The link task dials the peer, handshakes, sends every
//! queued message once it is due, and drops messages the peer acknowledged. After a lost
//! connection it redials and resends what the peer had not delivered (the peer's `Welcome`
//! says how far it got), so a link stays FIFO without loss or duplicates while both ends
//! live. When the peer comes back with a new boot epoch (it crashed), the messages meant
//! for its dead incarnation are dropped, as the simulator drops them. A connection whose
//! sent frames go unacknowledged for [`LINK_ACK_TIMEOUT`] is declared dead and redialed,
//! and a redial's connect gives up after [`CONNECT_TIMEOUT`]: a path a partition
//! black-holed resumes within seconds of the heal, not at TCP's next backed-off retry.
//!
//! Both ends authenticate each other first (`crate::auth`): a peer that cannot prove it
//! knows the cluster secret is refused, logged with its address and the reason, and
//! nothing it sent is delivered.
//!
//! Incoming: one task per accepted connection checks the `Hello` and the dialer's proof,
//! answers `Welcome` with
//! the last sequence number delivered from that sender epoch, delivers each new `Data`
//! frame to the node's inbox in order (duplicates from a resend are skipped), and
//! acknowledges `ACK_DELAY` after the first frame it has not acknowledged, or at once when
//! `ACK_FRAMES_MAX` are waiting. Acks only let the sender drop what it keeps for a resend,
//! so they can wait: an idle 3-DC cluster sends a frame per peer per 5 ms tick, and an ack
//! for each 10 ms was a third of every node's writes (BENCHMARKS.md, eighteenth session).

use crate::auth::{self, Direction, Nonce, Transcript};
use crate::peer::{self, PeerFrame, PEER_WIRE_VERSION};
use crate::throttle::{Throttle, LOG_INTERVAL_MS};
use crate::tls::{self, Stream, Tls};
use bytes::Bytes;
use causeway_core::limits::{FRAME_LEN_MAX, PREAUTH_FRAME_LEN_MAX};
use causeway_core::{Addr, NodeId, Topology};
use causeway_protocols::Msg;
use futures_util::{SinkExt, StreamExt};
use std::collections::{HashMap, VecDeque};
use std::net::SocketAddr;
use std::sync::atomic::AtomicUsize;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, Notify};
use tokio::time::Instant;
use tokio_util::codec::length_delimited::LengthDelimitedCodecError;
use tokio_util::codec::{FramedRead, FramedWrite, LengthDelimitedCodec};

/// How long a receiver waits, after delivering a frame it has not acknowledged, before it
/// acknowledges (with every frame delivered by then).
const ACK_DELAY: Duration = Duration::from_millis(100);
/// Frames delivered and not acknowledged at which a receiver acknowledges at once, so a
/// busy link's resend queue stays short whatever `ACK_DELAY` is.
const ACK_FRAMES_MAX: u64 = 64;
/// How long a dialer or listener waits for the other side's handshake frame.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(5);
/// First and largest pause between redials.
const REDIAL_MIN: Duration = Duration::from_millis(20);
const REDIAL_MAX: Duration = Duration::from_millis(500);
/// How long a redial's TCP connect may take: a SYN into a cut path is otherwise retried by
/// the kernel for about two minutes, so a dial begun during a partition would outlast its
/// heal by that much.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(3);
/// How long frames sent on a connection may go unacknowledged before the link declares the
/// path dead, drops the connection and redials (resending what the peer had not
/// delivered). A receiver acknowledges within [`ACK_DELAY`] of a delivery, so only a path
/// that black-holes traffic, or a peer stalled this long, trips it. Without it a connection
/// that lost its path sits in TCP's retransmission backoff (up to 120 s between tries)
/// long after the partition heals.
pub const LINK_ACK_TIMEOUT: Duration = Duration::from_secs(10);

/// TCP keepalive on every node and client socket: the first probe after this much
/// silence, then one per interval, the connection dropped after `KEEPALIVE_RETRIES`
/// unanswered probes, so a half-open peer (its host gone) is noticed in about a minute.
pub const KEEPALIVE_IDLE_MS: u64 = 30_000;
pub const KEEPALIVE_INTERVAL_MS: u64 = 10_000;
pub const KEEPALIVE_RETRIES: u32 = 3;

/// Turns TCP keepalive on for `stream` (see [`KEEPALIVE_IDLE_MS`]).
pub fn keepalive(stream: &TcpStream) -> std::io::Result<()> {
    let params = socket2::TcpKeepalive::new()
        .with_time(Duration::from_millis(KEEPALIVE_IDLE_MS))
        .with_interval(Duration::from_millis(KEEPALIVE_INTERVAL_MS))
        .with_retries(KEEPALIVE_RETRIES);
    socket2::SockRef::from(stream).set_tcp_keepalive(&params)
}

/// A full link queue logs its drops once per this many.
const DROP_LOG_EVERY: u64 = 10_000;
/// Most bytes of encoded frames waiting on one link (unsent or unacknowledged), beside
/// `limits.link_queue_max` messages: a peer away for minutes must not pin gigabytes of
/// large messages (up to `FRAME_LEN_MAX` each) in its sender.
pub const LINK_QUEUE_BYTES_MAX: usize = 256 << 20;

/// A message delivered by the network to the node task.
pub struct NetMsg {
    pub from: Addr,
    pub to: Addr,
    pub msg: Msg,
}

/// Who this node is, as the handshake states it.
#[derive(Clone, Debug)]
pub struct Identity {
    pub cluster: String,
    pub protocol: String,
    pub node: NodeId,
    pub name: String,
    pub epoch: u64,
    /// The cluster's placement from this node's cluster file (peers must agree on it).
    pub topology: Topology,
    /// The cluster secret both ends of a link prove they know (empty: none configured).
    pub secret: Arc<[u8]>,
    /// TLS on node links (none: plain TCP).
    pub tls: Option<Arc<Tls>>,
}

impl Identity {
    /// The handshake transcript of a link from `dialer` to `listener`.
    fn transcript<'a>(
        &'a self,
        dialer: (NodeId, &'a Nonce),
        listener: (NodeId, &'a Nonce),
    ) -> Transcript<'a> {
        Transcript {
            cluster: &self.cluster,
            dialer: dialer.0 .0,
            dialer_nonce: dialer.1,
            listener: listener.0 .0,
            listener_nonce: listener.1,
        }
    }
}

struct Queued {
    seq: u64,
    /// When it may go: now + the emulated latency; None without one (within a DC, or no
    /// emulation), so a push and a send read no clock.
    due: Option<Instant>,
    frame: Bytes,
}

#[derive(Default)]
struct LinkQueue {
    next_seq: u64,
    /// Contiguous sequence numbers: sent-but-unacknowledged first, then unsent.
    queue: VecDeque<Queued>,
    /// The frames' bytes in `queue`.
    bytes: usize,
    peer_epoch: Option<u64>,
    dropped: u64,
}

/// The sending end of the link to one peer node.
#[derive(Clone)]
pub struct Link {
    peer: NodeId,
    state: Arc<Mutex<LinkQueue>>,
    notify: Arc<Notify>,
    latency: Duration,
    queue_max: usize,
    /// How many times the peer came back as a new incarnation (`adopt`).
    restarts: Arc<AtomicU64>,
    /// [`LINK_ACK_TIMEOUT`], shorter in tests.
    ack_timeout: Duration,
    /// [`LINK_QUEUE_BYTES_MAX`], smaller in tests.
    bytes_max: usize,
}

impl Link {
    /// The peer this link sends to.
    pub fn peer(&self) -> NodeId {
        self.peer
    }

    /// How many times this link met a new incarnation of the peer: what was sent to the
    /// earlier one is lost, and its answers will not come (the node task tells the
    /// sessions, `ClientSession::peer_restarted`).
    pub fn restarts(&self) -> u64 {
        self.restarts.load(Ordering::Acquire)
    }

    /// Messages waiting on this link: unsent, or sent and not yet acknowledged.
    pub fn depth(&self) -> usize {
        self.state.lock().expect("link lock").queue.len()
    }

    /// Queues `msg` for the peer; it leaves once the emulated latency has passed. A full
    /// queue (by messages or bytes) drops it, logged.
    pub fn push(&self, from: Addr, to: Addr, msg: Msg) {
        let mut s = self.state.lock().expect("link lock");
        let seq = s.next_seq + 1;
        let frame = match peer::encode(&PeerFrame::Data { seq, from, to, msg }) {
            Ok(frame) => frame,
            Err(e) => {
                tracing::error!(peer = self.peer.0, "cannot send a message: {e}");
                return;
            }
        };
        if s.queue.len() >= self.queue_max || s.bytes + frame.len() > self.bytes_max {
            self.drop_one(&mut s);
            return;
        }
        s.next_seq = seq;
        s.bytes += frame.len();
        let due = (!self.latency.is_zero()).then(|| Instant::now() + self.latency);
        s.queue.push_back(Queued { seq, due, frame });
        drop(s);
        self.notify.notify_one();
    }

    /// Counts a message dropped by a full queue: one line for the first drop and then one
    /// per DROP_LOG_EVERY (a peer away for minutes would otherwise write a line per message).
    fn drop_one(&self, s: &mut LinkQueue) {
        s.dropped += 1;
        if s.dropped % DROP_LOG_EVERY == 1 {
            tracing::error!(
                peer = self.peer.0,
                dropped = s.dropped,
                "link queue full ({} messages, {} bytes of at most {} and {}): dropping messages (logged once per {DROP_LOG_EVERY}); the peer is too slow or down, and the protocol's catch-up resends what matters when it is back",
                s.queue.len(),
                s.bytes,
                self.queue_max,
                self.bytes_max
            );
        }
    }

    /// Messages dropped because the queue was full.
    pub fn dropped(&self) -> u64 {
        self.state.lock().expect("link lock").dropped
    }
}

/// Creates the link to `peer` at `addr` and spawns its task.
pub fn spawn_link(
    me: Identity,
    peer: NodeId,
    addr: SocketAddr,
    latency: Duration,
    queue_max: usize,
) -> Link {
    let limits = (queue_max, LINK_QUEUE_BYTES_MAX);
    spawn_link_timed(me, peer, addr, (latency, LINK_ACK_TIMEOUT), limits)
}

/// [`spawn_link`] with the emulated latency and the acknowledgement timeout given, and the
/// queue's limits in messages and bytes.
fn spawn_link_timed(
    me: Identity,
    peer: NodeId,
    addr: SocketAddr,
    (latency, ack_timeout): (Duration, Duration),
    (queue_max, bytes_max): (usize, usize),
) -> Link {
    assert!(!ack_timeout.is_zero(), "a link needs an ack timeout");
    assert!(
        bytes_max >= FRAME_LEN_MAX,
        "a link queue holds a largest frame"
    );
    let link = Link {
        peer,
        state: Arc::new(Mutex::new(LinkQueue::default())),
        notify: Arc::new(Notify::new()),
        latency,
        queue_max,
        restarts: Arc::new(AtomicU64::new(0)),
        ack_timeout,
        bytes_max,
    };
    let task = link.clone();
    tokio::spawn(async move { run_link(me, task, addr).await });
    link
}

async fn run_link(me: Identity, link: Link, addr: SocketAddr) {
    let mut pause = REDIAL_MIN;
    let mut was_up = false;
    // A refused redial every REDIAL_MAX would write a line each: one per interval.
    let refusals = Throttle::new(LOG_INTERVAL_MS);
    loop {
        match dial(&me, link.peer, addr).await {
            Ok((stream, epoch, delivered)) => {
                pause = REDIAL_MIN;
                adopt(&link, epoch, delivered);
                tracing::info!(peer = link.peer.0, %addr, epoch, "link up");
                was_up = true;
                let e = pump(&link, stream).await;
                tracing::warn!(peer = link.peer.0, %addr, "link down: {e}");
            }
            Err(DialError::Refused(reason)) => {
                crate::throttled!(error, refusals, peer = link.peer.0, %addr, "peer refused our connection: {reason}");
                pause = REDIAL_MAX;
            }
            Err(DialError::Auth(reason)) => {
                crate::throttled!(error, refusals, peer = link.peer.0, %addr, "refused the peer: it failed authentication: {reason}");
                pause = REDIAL_MAX;
            }
            Err(DialError::Io(e)) => {
                if was_up {
                    tracing::debug!(peer = link.peer.0, %addr, "redial failed: {e}");
                }
            }
        }
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(REDIAL_MAX);
    }
}

enum DialError {
    Refused(String),
    /// The listener could not prove it knows the cluster secret.
    Auth(String),
    Io(String),
}

async fn dial(
    me: &Identity,
    peer: NodeId,
    addr: SocketAddr,
) -> Result<(Stream, u64, u64), DialError> {
    let io = |e: std::io::Error| DialError::Io(e.to_string());
    let tcp = match tokio::time::timeout(CONNECT_TIMEOUT, TcpStream::connect(addr)).await {
        Ok(tcp) => tcp.map_err(io)?,
        Err(_) => {
            return Err(DialError::Io(format!(
                "no answer within {CONNECT_TIMEOUT:?}"
            )))
        }
    };
    tcp.set_nodelay(true).map_err(io)?;
    keepalive(&tcp).map_err(io)?;
    let mut stream = match &me.tls {
        None => Stream::Plain(tcp),
        // A certificate the CA did not sign is refused like a wrong secret (logged as an
        // error, redialed slowly); other failures are the network's.
        Some(t) => tls::connect(t, addr, tcp)
            .await
            .map_err(|e| match e.kind() {
                std::io::ErrorKind::InvalidData => DialError::Auth(format!("TLS: {e}")),
                _ => DialError::Io(format!("TLS: {e}")),
            })?,
    };
    let nonce = auth::nonce().map_err(DialError::Io)?;
    let hello = PeerFrame::Hello {
        cluster: me.cluster.clone(),
        protocol: me.protocol.clone(),
        wire_version: PEER_WIRE_VERSION,
        from: me.node,
        from_epoch: me.epoch,
        to: peer,
        topology: me.topology.clone(),
        nonce,
    };
    let (r, w) = tokio::io::split(&mut stream);
    let mut sink = FramedWrite::new(w, peer::codec());
    let mut source = FramedRead::new(r, peer::codec());
    send(&mut sink, &hello).await?;
    let peer_nonce = match answer(&mut source).await? {
        PeerFrame::Challenge { nonce } => nonce,
        other => return Err(unexpected(other)),
    };
    // The dialer proves first: the listener's proof comes only to a dialer that knows the
    // secret, so a stranger who connects collects nothing to guess it from offline.
    let t = me.transcript((me.node, &nonce), (peer, &peer_nonce));
    let proof = auth::proof(&me.secret, Direction::Dialer, &t);
    send(&mut sink, &PeerFrame::Proof { proof }).await?;
    let welcome = answer(&mut source).await?;
    drop(source);
    drop(sink);
    match welcome {
        PeerFrame::Welcome {
            epoch,
            delivered,
            proof,
        } => {
            if !auth::verify(&me.secret, Direction::Listener, &t, &proof) {
                return Err(DialError::Auth(
                    "wrong proof of the cluster secret (the cluster files disagree on `secret`)"
                        .into(),
                ));
            }
            Ok((stream, epoch, delivered))
        }
        other => Err(unexpected(other)),
    }
}

async fn send<W: tokio::io::AsyncWrite + Unpin>(
    sink: &mut FramedWrite<W, tokio_util::codec::LengthDelimitedCodec>,
    frame: &PeerFrame,
) -> Result<(), DialError> {
    let bytes = peer::encode(frame).map_err(DialError::Io)?;
    sink.send(bytes)
        .await
        .map_err(|e| DialError::Io(e.to_string()))
}

/// The listener's next handshake frame.
async fn answer<R: tokio::io::AsyncRead + Unpin>(
    source: &mut FramedRead<R, tokio_util::codec::LengthDelimitedCodec>,
) -> Result<PeerFrame, DialError> {
    let bytes = match tokio::time::timeout(HANDSHAKE_TIMEOUT, source.next()).await {
        Ok(Some(Ok(b))) => b,
        Ok(Some(Err(e))) => return Err(DialError::Io(e.to_string())),
        Ok(None) => return Err(DialError::Io("closed during the handshake".into())),
        Err(_) => return Err(DialError::Io("no handshake answer".into())),
    };
    peer::decode(&bytes).map_err(DialError::Io)
}

/// A handshake answer out of place: the listener's refusal, or a protocol error.
fn unexpected(frame: PeerFrame) -> DialError {
    match frame {
        PeerFrame::Refused { reason } => DialError::Refused(reason),
        other => DialError::Io(format!("unexpected handshake answer {other:?}")),
    }
}

/// Applies the peer's handshake answer to the queue: a new peer epoch drops what was meant
/// for the dead incarnation; otherwise what the peer delivered is acknowledged.
fn adopt(link: &Link, epoch: u64, delivered: u64) {
    let mut s = link.state.lock().expect("link lock");
    match s.peer_epoch {
        Some(old) if old != epoch => {
            let lost = s.queue.len();
            s.queue.clear();
            s.bytes = 0;
            link.restarts.fetch_add(1, Ordering::Release);
            tracing::warn!(
                peer = link.peer.0,
                old,
                epoch,
                lost,
                "peer restarted: dropping messages meant for its previous incarnation"
            );
        }
        _ => ack(&mut s, delivered),
    }
    s.peer_epoch = Some(epoch);
}

fn ack(s: &mut LinkQueue, delivered: u64) {
    while s.queue.front().is_some_and(|q| q.seq <= delivered) {
        let q = s.queue.pop_front().expect("a front");
        s.bytes -= q.frame.len();
    }
    assert!(
        !s.queue.is_empty() || s.bytes == 0,
        "an empty queue holds no bytes"
    );
}

/// Sends queued messages and processes acknowledgements until the connection fails.
async fn pump(link: &Link, stream: Stream) -> String {
    // Plain TCP keeps tokio's lock-free owned halves; TLS needs the generic split.
    match stream {
        Stream::Plain(tcp) => {
            let (r, w) = tcp.into_split();
            pump_halves(link, r, w).await
        }
        Stream::Tls(tls) => {
            let (r, w) = tokio::io::split(tls);
            pump_halves(link, r, w).await
        }
    }
}

/// [`pump`] over one connection's two halves: sends, acknowledgements and the watchdog
/// that ends a connection whose sent frames go unacknowledged for the link's ack timeout.
async fn pump_halves<R: AsyncRead + Unpin, W: AsyncWrite + Unpin>(
    link: &Link,
    r: R,
    w: W,
) -> String {
    let mut source = FramedRead::new(r, peer::codec());
    let mut sink = FramedWrite::new(w, peer::codec());
    let watch = AckWatch::new();
    let acks = async {
        while let Some(frame) = source.next().await {
            match frame
                .map_err(|e| e.to_string())
                .and_then(|b| peer::decode(&b))
            {
                Ok(PeerFrame::Ack { delivered }) => {
                    let mut s = link.state.lock().expect("link lock");
                    ack(&mut s, delivered);
                    watch.acked(s.queue.front().map(|q| q.seq));
                }
                Ok(other) => return format!("unexpected frame from the receiver: {other:?}"),
                Err(e) => return e,
            }
        }
        "closed by the peer".to_string()
    };
    let sends = async {
        loop {
            let next = next_frame(link, watch.cursor());
            let Some((seq, due, frame)) = next else {
                if let Err(e) = SinkExt::<Bytes>::flush(&mut sink).await {
                    return e.to_string();
                }
                link.notify.notified().await;
                continue;
            };
            if let Some(due) = due.filter(|due| *due > Instant::now()) {
                if let Err(e) = SinkExt::<Bytes>::flush(&mut sink).await {
                    return e.to_string();
                }
                tokio::time::sleep_until(due).await;
            }
            if let Err(e) = SinkExt::<Bytes>::feed(&mut sink, frame).await {
                return e.to_string();
            }
            watch.sent(seq);
        }
    };
    tokio::select! {
        e = acks => e,
        e = sends => e,
        e = watch.expire(link.ack_timeout) => e,
    }
}

/// What one connection of a link has sent and since when it waits for an acknowledgement:
/// atomics, because the pump's futures share it by reference and must stay `Send`.
struct AckWatch {
    start: Instant,
    /// The next sequence number to send.
    cursor: AtomicU64,
    /// Milliseconds after `start`, plus one, since which sent frames wait for an ack
    /// without progress; 0 while nothing sent is unacknowledged.
    waiting_since: AtomicU64,
}

impl AckWatch {
    fn new() -> AckWatch {
        AckWatch {
            start: Instant::now(),
            cursor: AtomicU64::new(0),
            waiting_since: AtomicU64::new(0),
        }
    }

    fn cursor(&self) -> u64 {
        self.cursor.load(Ordering::Relaxed)
    }

    fn now(&self) -> u64 {
        self.start.elapsed().as_millis() as u64 + 1
    }

    /// Frame `seq` went out: the wait starts if nothing else was waiting.
    fn sent(&self, seq: u64) {
        self.cursor.store(seq + 1, Ordering::Relaxed);
        let _ = self.waiting_since.compare_exchange(
            0,
            self.now(),
            Ordering::Relaxed,
            Ordering::Relaxed,
        );
    }

    /// An ack arrived; `front` is the oldest frame still queued. Progress restarts the
    /// wait for what is still unacknowledged, or ends it when everything sent is.
    fn acked(&self, front: Option<u64>) {
        let all = front.is_none_or(|seq| seq >= self.cursor());
        let since = if all { 0 } else { self.now() };
        self.waiting_since.store(since, Ordering::Relaxed);
    }

    /// Resolves once sent frames have waited `timeout` without an ack.
    async fn expire(&self, timeout: Duration) -> String {
        let timeout_ms = timeout.as_millis() as u64;
        loop {
            tokio::time::sleep(timeout / 4).await;
            let since = self.waiting_since.load(Ordering::Relaxed);
            if since != 0 && self.now().saturating_sub(since) >= timeout_ms {
                return format!(
                    "no acknowledgement for {timeout_ms} ms: the path is dead or the peer stalled; redialing"
                );
            }
        }
    }
}

/// The first queued frame with sequence number at least `cursor`.
fn next_frame(link: &Link, cursor: u64) -> Option<(u64, Option<Instant>, Bytes)> {
    let s = link.state.lock().expect("link lock");
    let front = s.queue.front()?.seq;
    let index = cursor.saturating_sub(front) as usize;
    let q = s.queue.get(index)?;
    debug_assert_eq!(q.seq, front + index as u64, "queued seqs are contiguous");
    Some((q.seq, q.due, q.frame.clone()))
}

/// Why a listener refuses a dialer: what its log says, and what the dialer is told.
struct Refusal {
    logged: String,
    told: String,
}

impl Refusal {
    /// A refusal the dialer may read whole: about its own frames, or after its proof.
    fn plain(reason: String) -> Refusal {
        Refusal {
            told: reason.clone(),
            logged: reason,
        }
    }

    /// A `Hello` that does not match this node, before the dialer proved it knows the
    /// secret: a stranger learns only a wire-version mismatch (which an operator needs to
    /// read on the dialer's side); the cluster name, protocol and placement stay in the log.
    fn unproven(reason: String) -> Refusal {
        let told = if reason.starts_with("wire version") {
            reason.clone()
        } else {
            "the Hello does not match this node's cluster file (this node's log names the \
             difference)"
                .to_string()
        };
        Refusal {
            logged: format!("it announced {reason}"),
            told,
        }
    }
}

/// What a frame longer than its reader's limit is told, from the start.
const OVERSIZED: &str = "oversized";

/// The next frame of a handshake, `None` when none came in time.
async fn next_frame_in_time<R: AsyncRead + Unpin>(
    source: &mut FramedRead<R, LengthDelimitedCodec>,
) -> Result<Option<PeerFrame>, String> {
    match tokio::time::timeout(HANDSHAKE_TIMEOUT, source.next()).await {
        Ok(Some(Ok(bytes))) => peer::decode(&bytes).map(Some),
        Ok(Some(Err(e)))
            if e.get_ref()
                .is_some_and(|e| e.is::<LengthDelimitedCodecError>()) =>
        {
            let max = source.decoder().max_frame_length();
            Err(format!("{OVERSIZED}: a handshake frame over {max} bytes (before authentication a frame is at most that)"))
        }
        Ok(Some(Err(e))) => Err(e.to_string()),
        Ok(None) => Err("closed during the handshake".into()),
        Err(_) => Ok(None),
    }
}

/// A frame's kind, as a refusal names it (never its content).
fn frame_name(frame: &PeerFrame) -> &'static str {
    match frame {
        PeerFrame::Hello { .. } => "Hello",
        PeerFrame::Welcome { .. } => "Welcome",
        PeerFrame::Refused { .. } => "Refused",
        PeerFrame::Data { .. } => "a Data frame",
        PeerFrame::Ack { .. } => "Ack",
        PeerFrame::Challenge { .. } => "Challenge",
        PeerFrame::Proof { .. } => "Proof",
    }
}

/// Per-sender delivery state of the receiving side.
#[derive(Default)]
struct RecvState {
    epoch: u64,
    delivered: u64,
}

/// The peer port's limits before a connection has authenticated (from the cluster
/// file's `[limits]`).
#[derive(Clone, Copy, Debug)]
pub struct PeerPort {
    /// Most connections open at once that have not completed the handshake; one more is
    /// refused at once.
    pub unauthenticated_max: usize,
    /// How long a connection may take, from its accept, to complete its TLS handshake (if
    /// any) and prove the cluster secret, in milliseconds.
    pub auth_timeout_ms: u64,
}

/// Refused peer connection lines: at most one per interval (see [`crate::throttle`]).
static REFUSED_PEERS: Throttle = Throttle::new(LOG_INTERVAL_MS);
static FAILED_PEER_ACCEPTS: Throttle = Throttle::new(LOG_INTERVAL_MS);

/// Counts a connection that has not authenticated yet, until it does or closes.
struct Pending(Arc<AtomicUsize>);

impl Drop for Pending {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

/// The receiving side: accepts peer connections and delivers their messages in order.
/// Before a connection has proved the cluster secret it may send frames of at most
/// [`PREAUTH_FRAME_LEN_MAX`] bytes (no buffer is reserved for a larger declared length),
/// and must prove it within `PeerPort::auth_timeout_ms`; at most
/// `PeerPort::unauthenticated_max` such connections are open at once.
pub struct Inbound {
    me: Identity,
    inbox: mpsc::Sender<NetMsg>,
    senders: Mutex<HashMap<NodeId, Arc<tokio::sync::Mutex<RecvState>>>>,
    port: PeerPort,
    unauthenticated: Arc<AtomicUsize>,
}

impl Inbound {
    pub fn new(me: Identity, inbox: mpsc::Sender<NetMsg>, port: PeerPort) -> Arc<Inbound> {
        Arc::new(Inbound {
            me,
            inbox,
            senders: Mutex::new(HashMap::new()),
            port,
            unauthenticated: Arc::new(AtomicUsize::new(0)),
        })
    }

    /// Accepts connections forever.
    pub async fn serve(self: Arc<Inbound>, listener: TcpListener) {
        loop {
            match listener.accept().await {
                Ok((stream, addr)) => {
                    let n = self.unauthenticated.fetch_add(1, Ordering::Relaxed) + 1;
                    let pending = Pending(self.unauthenticated.clone());
                    let this = self.clone();
                    tokio::spawn(async move {
                        if n > this.port.unauthenticated_max {
                            return this.refuse_at_once(addr, stream).await;
                        }
                        if let Err(e) = this.handle(stream, pending).await {
                            tracing::debug!(%addr, "peer connection closed: {e}");
                        }
                    });
                }
                Err(e) => {
                    crate::throttled!(
                        warn,
                        FAILED_PEER_ACCEPTS,
                        "accepting a peer connection failed: {e}"
                    );
                    tokio::time::sleep(REDIAL_MIN).await;
                }
            }
        }
    }

    /// Refuses a connection over the unauthenticated limit without reading from it.
    async fn refuse_at_once(&self, addr: SocketAddr, stream: TcpStream) {
        let max = self.port.unauthenticated_max;
        let reason = format!("too many unauthenticated peer connections (limit {max})");
        crate::throttled!(error, REFUSED_PEERS, %addr, "refused a peer connection: {reason}");
        // Under TLS only closed: the refusal costs no handshake.
        if self.me.tls.is_some() {
            return;
        }
        if let Ok(frame) = peer::encode(&PeerFrame::Refused { reason }) {
            let mut sink = FramedWrite::new(stream, peer::codec());
            let _ = sink.send(frame).await;
        }
    }

    async fn handle(&self, tcp: TcpStream, pending: Pending) -> Result<(), String> {
        let addr = tcp.peer_addr().map_err(|e| e.to_string())?;
        tcp.set_nodelay(true).map_err(|e| e.to_string())?;
        keepalive(&tcp).map_err(|e| e.to_string())?;
        let deadline = Instant::now() + Duration::from_millis(self.port.auth_timeout_ms);
        let stream = match &self.me.tls {
            None => Stream::Plain(tcp),
            Some(t) => tls::accept(&t.peers, tcp).await.map_err(|e| {
                crate::throttled!(error, REFUSED_PEERS, %addr, "refused a peer connection: TLS: {e}");
                e.to_string()
            })?,
        };
        let pre = (pending, deadline);
        match stream {
            Stream::Plain(tcp) => {
                let (r, w) = tcp.into_split();
                self.serve_halves(addr, r, w, pre).await
            }
            Stream::Tls(tls) => {
                let (r, w) = tokio::io::split(tls);
                self.serve_halves(addr, r, w, pre).await
            }
        }
    }

    /// The handshake (by `deadline`, frames of at most [`PREAUTH_FRAME_LEN_MAX`]) and then
    /// the data of one accepted connection, over its halves.
    async fn serve_halves<R: AsyncRead + Unpin, W: AsyncWrite + Unpin>(
        &self,
        addr: SocketAddr,
        r: R,
        w: W,
        (pending, deadline): (Pending, Instant),
    ) -> Result<(), String> {
        let mut codec = peer::codec();
        codec.set_max_frame_length(PREAUTH_FRAME_LEN_MAX);
        let mut source = FramedRead::new(r, codec);
        let mut sink = FramedWrite::new(w, peer::codec());
        let handshake = self.handshake(&mut source, &mut sink);
        let outcome = match tokio::time::timeout_at(deadline, handshake).await {
            Ok(outcome) => outcome?,
            Err(_) => Err(Refusal::plain(format!(
                "no proof of the cluster secret within {} ms",
                self.port.auth_timeout_ms
            ))),
        };
        let (from, from_epoch, proof) = match outcome {
            Ok(v) => v,
            Err(refusal) => {
                crate::throttled!(error, REFUSED_PEERS, %addr, "refused a peer connection: {}", refusal.logged);
                let refused = peer::encode(&PeerFrame::Refused {
                    reason: refusal.told,
                })?;
                let _ = sink.send(refused).await;
                return Ok(());
            }
        };
        drop(pending);
        source.decoder_mut().set_max_frame_length(FRAME_LEN_MAX);
        let state = self.sender_state(from);
        let delivered = {
            let mut s = state.lock().await;
            if s.epoch != from_epoch {
                *s = RecvState {
                    epoch: from_epoch,
                    delivered: 0,
                };
            }
            s.delivered
        };
        let welcome = PeerFrame::Welcome {
            epoch: self.me.epoch,
            delivered,
            proof,
        };
        sink.send(peer::encode(&welcome)?)
            .await
            .map_err(|e| e.to_string())?;
        self.receive((from_epoch, delivered), &state, source, sink)
            .await
    }

    /// Checks the dialer's `Hello`, challenges it and checks its proof; the dialer's id
    /// and epoch and this node's proof for its `Welcome`. The outer `Err` is a broken
    /// connection; the inner one why the peer is refused.
    async fn handshake<R: AsyncRead + Unpin, W: AsyncWrite + Unpin>(
        &self,
        source: &mut FramedRead<R, LengthDelimitedCodec>,
        sink: &mut FramedWrite<W, LengthDelimitedCodec>,
    ) -> Result<Result<(NodeId, u64, auth::Proof), Refusal>, String> {
        let me = &self.me;
        let hello = match next_frame_in_time(source).await {
            Ok(Some(hello)) => hello,
            Ok(None) => return Ok(Err(Refusal::plain("no Hello in time".into()))),
            // Refused and logged as an error, not dropped quietly: the usual cause is a
            // node of another causeway version (peer wire version 4 and up decode here).
            Err(e) if e.starts_with(OVERSIZED) => return Ok(Err(Refusal::plain(e))),
            Err(e) if e.starts_with("undecodable") => {
                let why = format!("{e} (a node of another causeway version, or not a causeway node; this one speaks peer wire version {PEER_WIRE_VERSION})");
                return Ok(Err(Refusal::plain(why)));
            }
            Err(e) => return Err(e),
        };
        let checked = peer::check_hello(&hello, &me.cluster, &me.protocol, me.node, &me.topology);
        let (from, from_epoch) = match checked {
            Ok(v) => v,
            Err(reason) => return Ok(Err(Refusal::unproven(reason))),
        };
        let PeerFrame::Hello {
            nonce: dialer_nonce,
            ..
        } = hello
        else {
            return Ok(Err(Refusal::plain("the first frame is not a Hello".into())));
        };
        let nonce = auth::nonce()?;
        let challenge = peer::encode(&PeerFrame::Challenge { nonce })?;
        sink.send(challenge).await.map_err(|e| e.to_string())?;
        let t = me.transcript((from, &dialer_nonce), (me.node, &nonce));
        let refuse = |why: String| Ok(Err(Refusal::plain(why)));
        match next_frame_in_time(source).await? {
            Some(PeerFrame::Proof { proof }) => {
                if auth::verify(&me.secret, Direction::Dialer, &t, &proof) {
                    let mine = auth::proof(&me.secret, Direction::Listener, &t);
                    Ok(Ok((from, from_epoch, mine)))
                } else {
                    refuse(format!("node {} failed authentication: wrong proof of the cluster secret (the cluster files disagree on `secret`)", from.0))
                }
            }
            Some(other) => refuse(format!(
                "node {} sent {} instead of its proof of the cluster secret",
                from.0,
                frame_name(&other)
            )),
            None => refuse(format!("node {} sent no proof in time", from.0)),
        }
    }

    fn sender_state(&self, from: NodeId) -> Arc<tokio::sync::Mutex<RecvState>> {
        let mut senders = self.senders.lock().expect("senders lock");
        senders.entry(from).or_default().clone()
    }

    async fn receive<R: AsyncRead + Unpin, W: AsyncWrite + Unpin>(
        &self,
        (epoch, mut acked): (u64, u64),
        state: &tokio::sync::Mutex<RecvState>,
        mut source: FramedRead<R, LengthDelimitedCodec>,
        mut sink: FramedWrite<W, LengthDelimitedCodec>,
    ) -> Result<(), String> {
        // One timer, armed at the first unacknowledged frame: a timer made anew on every
        // turn of the loop would enter and leave tokio's wheel once per frame.
        let ack_timer = tokio::time::sleep(ACK_DELAY);
        tokio::pin!(ack_timer);
        let mut armed = false;
        loop {
            let ack_now = tokio::select! {
                frame = source.next() => {
                    let bytes = match frame {
                        Some(b) => b.map_err(|e| e.to_string())?,
                        None => return Ok(()),
                    };
                    let delivered = self.deliver(epoch, state, &bytes).await?;
                    if delivered.saturating_sub(acked) >= ACK_FRAMES_MAX {
                        true
                    } else {
                        if delivered != acked && !armed {
                            ack_timer.as_mut().reset(Instant::now() + ACK_DELAY);
                            armed = true;
                        }
                        false
                    }
                }
                _ = &mut ack_timer, if armed => true,
            };
            if ack_now {
                armed = false;
                let delivered = state.lock().await.delivered;
                if delivered != acked {
                    acked = delivered;
                    let frame = peer::encode(&PeerFrame::Ack { delivered })?;
                    sink.send(frame).await.map_err(|e| e.to_string())?;
                }
            }
        }
    }

    /// Delivers one `Data` frame to the inbox unless a resend already did; the last
    /// sequence number delivered from this sender after it.
    async fn deliver(
        &self,
        epoch: u64,
        state: &tokio::sync::Mutex<RecvState>,
        bytes: &[u8],
    ) -> Result<u64, String> {
        let PeerFrame::Data { seq, from, to, msg } = peer::decode(bytes)? else {
            return Err("expected a Data frame".into());
        };
        let mut s = state.lock().await;
        if s.epoch != epoch {
            return Err("superseded by a newer connection".into());
        }
        if seq > s.delivered {
            self.inbox
                .send(NetMsg { from, to, msg })
                .await
                .map_err(|_| "node stopped")?;
            s.delivered = seq;
        }
        Ok(s.delivered)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use causeway_core::SessionId;
    use causeway_protocols::eventual;

    const TEST_PORT: PeerPort = PeerPort {
        unauthenticated_max: 16,
        auth_timeout_ms: 10_000,
    };

    fn identity(node: u32) -> Identity {
        Identity {
            cluster: "t".into(),
            protocol: "eventual".into(),
            node: NodeId(node),
            name: format!("n{node}"),
            epoch: 1,
            topology: Topology::full(2, 1, 2),
            secret: Arc::from(&b"test secret 0123456789"[..]),
            tls: None,
        }
    }

    fn msg(i: u64) -> (Addr, Addr, Msg) {
        let m = Msg::Eventual(eventual::Msg::Read {
            req: i,
            keys: Vec::new(),
        });
        (Addr::Client(SessionId(i)), Addr::Node(NodeId(0)), m)
    }

    /// A TCP relay whose connections the test can cut.
    async fn relay(to: SocketAddr) -> (SocketAddr, Arc<Mutex<Vec<tokio::task::JoinHandle<()>>>>) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let conns = Arc::new(Mutex::new(Vec::new()));
        let list = conns.clone();
        tokio::spawn(async move {
            while let Ok((mut a, _)) = listener.accept().await {
                let mut b = TcpStream::connect(to).await.unwrap();
                let task = tokio::spawn(async move {
                    let _ = tokio::io::copy_bidirectional(&mut a, &mut b).await;
                });
                list.lock().unwrap().push(task);
            }
        });
        (addr, conns)
    }

    async fn expect(inbox: &mut mpsc::Receiver<NetMsg>, range: std::ops::RangeInclusive<u64>) {
        for i in range {
            let m = tokio::time::timeout(Duration::from_secs(10), inbox.recv()).await;
            let m = m.expect("delivered in time").expect("inbox open");
            assert_eq!(
                m.from,
                Addr::Client(SessionId(i)),
                "FIFO without loss or duplicates"
            );
        }
    }

    /// Node 0's inbound side on a fresh port: its address and the inbox it delivers to.
    async fn inbound(inbox_max: usize) -> (SocketAddr, mpsc::Receiver<NetMsg>) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (tx, inbox) = mpsc::channel(inbox_max);
        tokio::spawn(Inbound::new(identity(0), tx, TEST_PORT).serve(listener));
        (addr, inbox)
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_link_stays_fifo_without_loss_or_duplicates_across_a_cut_connection() {
        let (inbound_addr, mut inbox) = inbound(1024).await;
        let (relay_addr, conns) = relay(inbound_addr).await;
        let link = spawn_link(
            identity(1),
            NodeId(0),
            relay_addr,
            Duration::from_millis(1),
            1024,
        );
        for i in 1..=200 {
            let (from, to, m) = msg(i);
            link.push(from, to, m);
        }
        expect(&mut inbox, 1..=200).await;
        for task in conns.lock().unwrap().drain(..) {
            task.abort();
        }
        for i in 201..=400 {
            let (from, to, m) = msg(i);
            link.push(from, to, m);
        }
        expect(&mut inbox, 201..=400).await;
        assert!(inbox.try_recv().is_err(), "no duplicates after the resend");
    }

    /// Copies `r` to `w` until the path is cut, then holds both ends open and silent.
    async fn pipe(
        mut r: tokio::net::tcp::OwnedReadHalf,
        mut w: tokio::net::tcp::OwnedWriteHalf,
        cut: Arc<std::sync::atomic::AtomicBool>,
    ) {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let mut buf = vec![0u8; 4096];
        while let Ok(n) = r.read(&mut buf).await {
            if n == 0 || cut.load(Ordering::Acquire) || w.write_all(&buf[..n]).await.is_err() {
                break;
            }
        }
        std::future::pending::<()>().await
    }

    /// A relay whose path the test can cut: once `cut` is set, every connection stops
    /// forwarding for good (as a black-holed path leaves a TCP connection in its
    /// retransmission backoff long after the heal) and new ones are accepted and never
    /// forwarded; after the heal, new connections forward again.
    async fn black_hole_relay(to: SocketAddr) -> (SocketAddr, Arc<std::sync::atomic::AtomicBool>) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let cut = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let flag = cut.clone();
        tokio::spawn(async move {
            while let Ok((a, _)) = listener.accept().await {
                let cut = flag.clone();
                tokio::spawn(async move {
                    if cut.load(Ordering::Acquire) {
                        let _held = a;
                        std::future::pending::<()>().await;
                        return;
                    }
                    let b = TcpStream::connect(to).await.unwrap();
                    let ((ar, aw), (br, bw)) = (a.into_split(), b.into_split());
                    tokio::spawn(pipe(ar, bw, cut.clone()));
                    pipe(br, aw, cut).await
                });
            }
        });
        (addr, cut)
    }

    /// A path that black-holes traffic (no reset, no acknowledgement) is declared dead
    /// after the link's ack timeout, and the link redials until it gets through: after the
    /// heal, what was pushed during the cut arrives within a handshake timeout and a
    /// redial pause, in order, once. Without the watchdog it never arrives.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_link_redials_when_its_path_black_holes_and_resumes_after_the_heal() {
        let (inbound_addr, mut inbox) = inbound(1024).await;
        let (relay_addr, cut) = black_hole_relay(inbound_addr).await;
        let timing = (Duration::ZERO, Duration::from_millis(300));
        let limits = (1024, LINK_QUEUE_BYTES_MAX);
        let link = spawn_link_timed(identity(1), NodeId(0), relay_addr, timing, limits);
        let push = |range: std::ops::RangeInclusive<u64>| {
            for i in range {
                let (from, to, m) = msg(i);
                link.push(from, to, m);
            }
        };
        push(1..=50);
        expect(&mut inbox, 1..=50).await;
        cut.store(true, Ordering::Release);
        push(51..=100);
        tokio::time::sleep(Duration::from_secs(1)).await;
        assert!(inbox.try_recv().is_err(), "nothing crosses the cut");
        cut.store(false, Ordering::Release);
        let healed = Instant::now();
        expect(&mut inbox, 51..=100).await;
        let resumed = healed.elapsed();
        assert!(
            resumed < HANDSHAKE_TIMEOUT + REDIAL_MAX + Duration::from_secs(1),
            "resumed {resumed:?} after the heal"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert!(inbox.try_recv().is_err(), "no duplicates after the resend");
    }

    /// A link to a peer that never answers holds at most its byte limit of frames and
    /// drops (counting) the rest; the message limit alone would have kept them all.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_link_queue_is_bounded_in_bytes() {
        let nobody = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = nobody.local_addr().unwrap();
        drop(nobody);
        let timing = (Duration::ZERO, LINK_ACK_TIMEOUT);
        let link = spawn_link_timed(identity(1), NodeId(0), addr, timing, (1024, FRAME_LEN_MAX));
        let key = causeway_core::Key::new(vec![7u8; 1 << 20]);
        for i in 0..40 {
            let m = Msg::Eventual(eventual::Msg::Read {
                req: i,
                keys: vec![(key.clone(), causeway_core::ObjType::Lww)],
            });
            link.push(Addr::Client(SessionId(i)), Addr::Node(NodeId(0)), m);
        }
        let (depth, dropped) = (link.depth(), link.dropped());
        assert_eq!(depth as u64 + dropped, 40, "each message kept or dropped");
        assert!((1..16).contains(&depth), "{depth} frames of 1 MiB held");
        let bytes = link.state.lock().unwrap().bytes;
        assert!(bytes <= FRAME_LEN_MAX, "{bytes} bytes held");
    }

    /// A link with an emulated latency delivers no message sooner than that after its push,
    /// in order; one without (within a DC) at once.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_message_leaves_once_its_emulated_latency_has_passed() {
        let latency = Duration::from_millis(60);
        let (addr, mut inbox) = inbound(1024).await;
        let link = spawn_link(identity(1), NodeId(0), addr, latency, 1024);
        for round in 0..2u64 {
            let start = Instant::now();
            for i in 1..=3 {
                let (from, to, m) = msg(round * 3 + i);
                link.push(from, to, m);
            }
            expect(&mut inbox, round * 3 + 1..=round * 3 + 3).await;
            let waited = start.elapsed();
            assert!(waited >= latency, "delivered after {waited:?}");
        }
        let (addr, mut inbox) = inbound(1024).await;
        let link = spawn_link(identity(1), NodeId(0), addr, Duration::ZERO, 1024);
        let (from, to, m) = msg(1);
        link.push(from, to, m);
        expect(&mut inbox, 1..=1).await;
    }

    /// Waits until `link` holds at most `depth_max` messages; how long that took.
    async fn drained(link: &Link, depth_max: usize) -> Duration {
        let start = Instant::now();
        while link.depth() > depth_max {
            assert!(
                start.elapsed() < Duration::from_secs(10),
                "never acknowledged"
            );
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        start.elapsed()
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_receiver_acknowledges_a_few_frames_late_and_many_at_once() {
        let (addr, mut inbox) = inbound(4096).await;
        let link = spawn_link(identity(1), NodeId(0), addr, Duration::ZERO, 4096);
        let mut pushed = 0;
        let mut push = |n: u64| {
            for _ in 0..n {
                pushed += 1;
                let (from, to, m) = msg(pushed);
                link.push(from, to, m);
            }
        };
        let start = Instant::now();
        push(3);
        expect(&mut inbox, 1..=3).await;
        drained(&link, 0).await;
        let waited = start.elapsed();
        assert!(
            waited >= ACK_DELAY,
            "a few frames acknowledged after {waited:?}"
        );
        push(2 * ACK_FRAMES_MAX);
        expect(&mut inbox, 4..=3 + 2 * ACK_FRAMES_MAX).await;
        let waited = drained(&link, ACK_FRAMES_MAX as usize).await;
        assert!(
            waited < ACK_DELAY,
            "a full batch acknowledged at once: {waited:?}"
        );
        drained(&link, 0).await;
    }

    #[tokio::test]
    async fn keepalive_is_on_for_a_socket() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let stream = TcpStream::connect(listener.local_addr().unwrap())
            .await
            .unwrap();
        let sock = socket2::SockRef::from(&stream);
        assert!(!sock.keepalive().unwrap(), "off by default");
        keepalive(&stream).unwrap();
        assert!(sock.keepalive().unwrap());
        let idle = sock.tcp_keepalive_time().unwrap();
        assert_eq!(idle, Duration::from_millis(KEEPALIVE_IDLE_MS));
    }

    #[tokio::test]
    async fn a_hello_this_version_cannot_decode_is_refused_with_the_reason() {
        use tokio::io::AsyncWriteExt;
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (tx, _inbox) = mpsc::channel(16);
        tokio::spawn(Inbound::new(identity(0), tx, TEST_PORT).serve(listener));
        let mut stream = TcpStream::connect(addr).await.unwrap();
        let garbage = [0xffu8; 9]; // an enum tag no PeerFrame has
        stream
            .write_all(&(garbage.len() as u32).to_be_bytes())
            .await
            .unwrap();
        stream.write_all(&garbage).await.unwrap();
        let mut source = FramedRead::new(stream, peer::codec());
        let frame = tokio::time::timeout(Duration::from_secs(5), source.next())
            .await
            .expect("an answer in time")
            .expect("a frame")
            .unwrap();
        match peer::decode(&frame).unwrap() {
            PeerFrame::Refused { reason } => {
                assert!(reason.contains("another causeway version"), "{reason}")
            }
            other => panic!("refused, not {other:?}"),
        }
    }

    /// A peer of another protocol or placement is refused; before it proved it knows the
    /// secret it is told only that its Hello does not match (the listener logs which part).
    #[tokio::test]
    async fn a_peer_of_another_protocol_is_refused() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (tx, _inbox) = mpsc::channel(16);
        tokio::spawn(Inbound::new(identity(0), tx, TEST_PORT).serve(listener));
        let mut other = identity(1);
        other.protocol = "cure".into();
        let mut elsewhere = identity(1);
        elsewhere.topology = Topology::partial(2, 1, 2, 1);
        for peer in [other, elsewhere] {
            match dial(&peer, NodeId(0), addr).await {
                Err(DialError::Refused(reason)) => {
                    assert!(reason.contains("does not match"), "{reason}");
                    assert!(
                        !reason.contains("eventual"),
                        "discloses the protocol: {reason}"
                    );
                }
                _ => panic!("a mismatch must be refused"),
            }
        }
    }
}
