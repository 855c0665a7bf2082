//! Node-to-node transport: reliable FIFO links over TCP with emulated WAN latency.
//!
//! Outgoing: one [`Link`] per peer node. The node task pushes messages synchronously; each
//! gets the next sequence number and a due time (now + the one-way latency between the two
//! DCs) and waits in a bounded queue. The link task dials the peer, handshakes, sends every
//! queued message once it is due, and drops messages the peer acknowledged. After a lost
//! connection it redials and resends what the peer had not delivered (the peer's `Welcome`
//! says how far it got), so a link stays FIFO without loss or duplicates while both ends
//! live. When the peer comes back with a new boot epoch (it crashed), the messages meant
//! for its dead incarnation are dropped, as the simulator drops them.
//!
//! Dead paths: a connection whose sent frames go unacknowledged for the link's
//! `dead_after` (`limits.link_dead_after_ms`) is declared dead, counted ([`Link::dead`])
//! and redialed; a redial's connect gives up after [`CONNECT_TIMEOUT`] and each handshake
//! answer after `dead_after`. So a path a partition black-holed resumes within seconds of
//! the heal, whatever the cut's length, not at TCP's next backed-off retry (up to 120 s
//! apart). The listener's sockets carry `dead_after` as their `TCP_USER_TIMEOUT`, so its
//! end of a dead connection closes too ([`user_timeout`] says why not the dialer's).
//!
//! Both ends authenticate each other first (`crate::auth`): a peer that cannot prove it
//! knows the cluster secret is refused, logged with its address and the reason, and
//! nothing it sent is delivered.
//!
//! Incoming: one task per accepted connection checks the `Hello` and the dialer's proof,
//! answers `Welcome` with
//! the last sequence number delivered from that sender epoch, delivers each new `Data`
//! frame to the node's [`Inbox`] in order (duplicates from a resend are skipped), and
//! acknowledges `ACK_DELAY` after the first frame it has not acknowledged, or at once when
//! `ACK_FRAMES_MAX` are waiting. Acks only let the sender drop what it keeps for a resend,
//! so they can wait: an idle 3-DC cluster sends a frame per peer per 5 ms tick, and an ack
//! for each 10 ms was a third of every node's writes (BENCHMARKS.md, eighteenth session).
//!
//! Flow control: the inbox is bounded in messages and in bytes (`limits.inbox_max`,
//! `limits.inbox_bytes_max`). A receiver whose inbox is full stops reading its socket until
//! there is room, so TCP's flow control slows the sender; nothing is dropped. While it
//! holds a frame back, or while a frame is arriving but not whole, it repeats its last
//! acknowledgement every quarter of `dead_after` (a heartbeat), so a slow peer on a live
//! path is not mistaken for a dead path.

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
use tokio::sync::{mpsc, Notify, OwnedSemaphorePermit, Semaphore};
use tokio::time::Instant;
use tokio_util::codec::length_delimited::LengthDelimitedCodecError;
use tokio_util::codec::{FramedRead, FramedWrite, LengthDelimitedCodec};

/// How long a receiver waits, after delivering a frame it has not acknowledged, before it
/// acknowledges (with every frame delivered by then).
const ACK_DELAY: Duration = Duration::from_millis(100);
/// Frames delivered and not acknowledged at which a receiver acknowledges at once, so a
/// busy link's resend queue stays short whatever `ACK_DELAY` is.
const ACK_FRAMES_MAX: u64 = 64;
/// How long a listener waits for the dialer's next handshake frame (a dialer waits for
/// each answer its link's `dead_after`).
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(5);
/// First and largest pause between redials.
const REDIAL_MIN: Duration = Duration::from_millis(20);
const REDIAL_MAX: Duration = Duration::from_millis(500);
/// How long a redial's TCP connect may take: a SYN into a cut path is otherwise retried by
/// the kernel for about two minutes, so a dial begun during a partition would outlast its
/// heal by that much.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(3);

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

/// Sets `TCP_USER_TIMEOUT` on a socket: data the kernel sent that goes unacknowledged
/// this long ends the connection with an error, rather than after TCP's retransmissions
/// (about 15 minutes on Linux's defaults). Only on a listener's accepted peer sockets,
/// which send nothing but acknowledgements to a dialer that always reads them: Linux also
/// ends a connection whose peer advertised a zero window for that long, even while it
/// answers the window probes, so on a dialer it would cut the back-pressure of a full inbox.
/// The dialer's own acknowledgement watchdog notices a dead path instead. Off Linux, a
/// no-op.
pub fn user_timeout(stream: &TcpStream, timeout: Duration) -> std::io::Result<()> {
    #[cfg(target_os = "linux")]
    return socket2::SockRef::from(stream).set_tcp_user_timeout(Some(timeout));
    #[cfg(not(target_os = "linux"))]
    {
        let _ = (stream, timeout);
        Ok(())
    }
}

/// Nagle off and keepalive on: every node-to-node socket, both ends; and
/// [`user_timeout`] when given (a listener's).
fn tune(stream: &TcpStream, user_timeout_after: Option<Duration>) -> std::io::Result<()> {
    stream.set_nodelay(true)?;
    keepalive(stream)?;
    match user_timeout_after {
        Some(after) => user_timeout(stream, after),
        None => Ok(()),
    }
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
    /// Its share of the inbox's byte budget, given back when the node task drops it.
    pub held: InboxShare,
}

/// Bytes of an [`Inbox`]'s budget a message holds (none: a message the node sent itself).
#[derive(Debug, Default)]
pub struct InboxShare(Option<OwnedSemaphorePermit>);

impl InboxShare {
    /// The bytes of the budget this message holds.
    pub fn bytes(&self) -> usize {
        self.0.as_ref().map_or(0, |p| p.num_permits())
    }
}

/// The sending side of a node's inbox: at most `count_max` messages and `bytes_max` bytes
/// of their frames wait for the node task. A sender waits for room; nothing is dropped.
#[derive(Clone)]
pub struct Inbox {
    tx: mpsc::Sender<NetMsg>,
    budget: Arc<Semaphore>,
    bytes_max: usize,
}

impl Inbox {
    /// A new inbox and the node task's end of it.
    pub fn new(count_max: usize, bytes_max: usize) -> (Inbox, mpsc::Receiver<NetMsg>) {
        assert!(count_max > 0, "an inbox holds a message");
        assert!(
            (1..=Semaphore::MAX_PERMITS).contains(&bytes_max),
            "an inbox holds a byte and at most the semaphore's permits"
        );
        let (tx, rx) = mpsc::channel(count_max);
        let budget = Arc::new(Semaphore::new(bytes_max));
        (
            Inbox {
                tx,
                budget,
                bytes_max,
            },
            rx,
        )
    }

    /// Bytes of frames waiting for the node task now.
    pub fn bytes(&self) -> usize {
        self.bytes_max - self.budget.available_permits()
    }

    /// Queues a message whose frame was `frame_bytes` long, once there is room for it (a
    /// frame over the whole budget waits for an empty inbox). Err: the node stopped.
    pub async fn send(
        &self,
        from: Addr,
        to: Addr,
        msg: Msg,
        frame_bytes: usize,
    ) -> Result<(), String> {
        let share = frame_bytes.clamp(1, self.bytes_max);
        let share = u32::try_from(share).unwrap_or(u32::MAX);
        let held = self.budget.clone().acquire_many_owned(share).await;
        let held = held.map_err(|_| "inbox closed")?;
        let slot = self.tx.reserve().await.map_err(|_| "node stopped")?;
        slot.send(NetMsg {
            from,
            to,
            msg,
            held: InboxShare(Some(held)),
        });
        Ok(())
    }
}

/// Who this node is, as the handshake states it. `Debug` leaves the secret out.
#[derive(Clone)]
pub struct Identity {
    pub cluster: String,
    pub protocol: String,
    pub node: NodeId,
    pub name: String,
    pub epoch: u64,
    /// The cluster's placement from this node's cluster file (peers must agree on it).
    pub topology: Topology,
    /// The keys this node proves its links with (the cluster secret, or its keyring).
    pub keys: auth::Keys,
    /// TLS on node links (none: plain TCP).
    pub tls: Option<Arc<Tls>>,
}

impl std::fmt::Debug for Identity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Identity")
            .field("cluster", &self.cluster)
            .field("protocol", &self.protocol)
            .field("node", &self.node)
            .field("name", &self.name)
            .field("epoch", &self.epoch)
            .field("topology", &self.topology)
            .field("keys", &self.keys)
            .field("tls", &self.tls.is_some())
            .finish()
    }
}

/// Why a link key's proof can be wrong, for the log.
const WHY_WRONG: &str = "the nodes' `secret`s differ, a keyring is from another secret, or \
                         the peer is not the node it claims to be";

impl Identity {
    /// The key of this node's link to `peer` (none when its keyring lacks one).
    fn link_key(&self, peer: NodeId) -> Option<auth::LinkKey> {
        self.keys.link(&self.cluster, self.node.0, peer.0)
    }

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

/// How one outgoing link behaves (from the cluster file).
#[derive(Clone, Copy, Debug)]
pub struct LinkSettings {
    /// The emulated one-way latency to the peer's DC (zero: none, within a DC).
    pub latency: Duration,
    /// Most messages waiting on the link, unsent or unacknowledged (`limits.link_queue_max`).
    pub queue_max: usize,
    /// Most bytes of their frames ([`LINK_QUEUE_BYTES_MAX`]).
    pub queue_bytes_max: usize,
    /// How long sent frames may go unacknowledged before the path is declared dead and the
    /// link redials (`limits.link_dead_after_ms`); also each handshake answer's wait.
    pub dead_after: Duration,
}

/// The sending end of the link to one peer node.
#[derive(Clone)]
pub struct Link {
    peer: NodeId,
    state: Arc<Mutex<LinkQueue>>,
    notify: Arc<Notify>,
    settings: LinkSettings,
    /// How many times the peer came back as a new incarnation (`adopt`).
    restarts: Arc<AtomicU64>,
    /// How many connections were declared dead for want of acknowledgements.
    dead: Arc<AtomicU64>,
    /// How many connections completed their handshake.
    connects: Arc<AtomicU64>,
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
        let limits = &self.settings;
        if s.queue.len() >= limits.queue_max || s.bytes + frame.len() > limits.queue_bytes_max {
            self.drop_one(&mut s);
            return;
        }
        s.next_seq = seq;
        s.bytes += frame.len();
        let latency = self.settings.latency;
        let due = (!latency.is_zero()).then(|| Instant::now() + latency);
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
                self.settings.queue_max,
                self.settings.queue_bytes_max
            );
        }
    }

    /// Messages dropped because the queue was full.
    pub fn dropped(&self) -> u64 {
        self.state.lock().expect("link lock").dropped
    }

    /// Connections of this link declared dead because what they sent went unacknowledged
    /// for `dead_after`.
    pub fn dead(&self) -> u64 {
        self.dead.load(Ordering::Acquire)
    }

    /// Connections of this link that completed their handshake (1 while it never broke).
    pub fn connects(&self) -> u64 {
        self.connects.load(Ordering::Acquire)
    }
}

/// Creates the link to `peer` at `addr` and spawns its task.
pub fn spawn_link(me: Identity, peer: NodeId, addr: SocketAddr, settings: LinkSettings) -> Link {
    assert!(
        !settings.dead_after.is_zero(),
        "a link needs an acknowledgement timeout"
    );
    assert!(
        settings.queue_bytes_max >= FRAME_LEN_MAX,
        "a link queue holds a largest frame"
    );
    assert!(settings.queue_max > 0, "a link queue holds a message");
    let link = Link {
        peer,
        state: Arc::new(Mutex::new(LinkQueue::default())),
        notify: Arc::new(Notify::new()),
        settings,
        restarts: Arc::new(AtomicU64::new(0)),
        dead: Arc::new(AtomicU64::new(0)),
        connects: Arc::new(AtomicU64::new(0)),
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
        match dial(&me, link.peer, addr, link.settings.dead_after).await {
            Ok((stream, epoch, delivered)) => {
                pause = REDIAL_MIN;
                adopt(&link, epoch, delivered);
                link.connects.fetch_add(1, Ordering::AcqRel);
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

/// Connects to `peer` at `addr` and runs the dialer's handshake, waiting at most
/// `dead_after` for each answer: the stream, the peer's epoch and what it delivered.
async fn dial(
    me: &Identity,
    peer: NodeId,
    addr: SocketAddr,
    dead_after: Duration,
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
    tune(&tcp, None).map_err(io)?;
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
    let peer_nonce = match answer(&mut source, dead_after).await? {
        PeerFrame::Challenge { nonce } => nonce,
        other => return Err(unexpected(other)),
    };
    // The dialer proves first: the listener's proof comes only to a dialer that knows the
    // secret, so a stranger who connects collects nothing to guess it from offline.
    let t = me.transcript((me.node, &nonce), (peer, &peer_nonce));
    let Some(key) = me.link_key(peer) else {
        return Err(DialError::Auth(format!(
            "this node's keyring has no key for node {} (run `causeway keyring` again)",
            peer.0
        )));
    };
    let proof = auth::proof(&key, Direction::Dialer, &t);
    send(&mut sink, &PeerFrame::Proof { proof }).await?;
    let welcome = answer(&mut source, dead_after).await?;
    drop(source);
    drop(sink);
    match welcome {
        PeerFrame::Welcome {
            epoch,
            delivered,
            proof,
        } => {
            if !auth::verify(&key, Direction::Listener, &t, &proof) {
                return Err(DialError::Auth(format!(
                    "wrong proof of the link key ({WHY_WRONG})"
                )));
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
    timeout: Duration,
) -> Result<PeerFrame, DialError> {
    let bytes = match tokio::time::timeout(timeout, source.next()).await {
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
        e = watch.expire(link.settings.dead_after) => {
            link.dead.fetch_add(1, Ordering::AcqRel);
            e
        }
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
                    "no acknowledgement for {timeout_ms} ms: the path is dead or the peer's process stalled; redialing"
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
    /// The links' `dead_after` (`limits.link_dead_after_ms`): the accepted sockets'
    /// `TCP_USER_TIMEOUT`, and four times the receiver's heartbeat interval.
    pub link_dead_after_ms: u64,
}

impl PeerPort {
    fn dead_after(&self) -> Duration {
        Duration::from_millis(self.link_dead_after_ms)
    }

    /// How often a receiver that holds a frame back, or reads one not yet whole, repeats
    /// its acknowledgement: four beats per `dead_after`, so one late beat does not make
    /// the sender declare a live path dead.
    fn heartbeat(&self) -> Duration {
        (self.dead_after() / 4).max(Duration::from_millis(1))
    }
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
    inbox: Inbox,
    senders: Mutex<HashMap<NodeId, Arc<tokio::sync::Mutex<RecvState>>>>,
    port: PeerPort,
    unauthenticated: Arc<AtomicUsize>,
}

impl Inbound {
    pub fn new(me: Identity, inbox: Inbox, port: PeerPort) -> Arc<Inbound> {
        assert!(port.link_dead_after_ms > 0, "links need a dead_after");
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
        let dead_after = Some(self.port.dead_after());
        tune(&tcp, dead_after).map_err(|e| e.to_string())?;
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
        let mut source = FramedRead::new(Counted::new(r), codec);
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
                let key = me.link_key(from);
                match key.filter(|k| auth::verify(k, Direction::Dialer, &t, &proof)) {
                    Some(key) => {
                        let mine = auth::proof(&key, Direction::Listener, &t);
                        Ok(Ok((from, from_epoch, mine)))
                    }
                    None => refuse(format!(
                        "node {} failed authentication: wrong proof of the link key ({WHY_WRONG})",
                        from.0
                    )),
                }
            }
            Some(other) => refuse(format!(
                "node {} sent {} instead of its proof of the link key",
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

    /// Delivers the connection's `Data` frames and acknowledges them (see the module doc):
    /// `ACK_DELAY` after the first unacknowledged one, at once after `ACK_FRAMES_MAX`, and
    /// on each heartbeat while a frame is arriving but not whole.
    async fn receive<R: AsyncRead + Unpin, W: AsyncWrite + Unpin>(
        &self,
        (epoch, mut acked): (u64, u64),
        state: &tokio::sync::Mutex<RecvState>,
        mut source: FramedRead<Counted<R>, LengthDelimitedCodec>,
        mut sink: FramedWrite<W, LengthDelimitedCodec>,
    ) -> Result<(), String> {
        // One timer, armed at the first unacknowledged frame: a timer made anew on every
        // turn of the loop would enter and leave tokio's wheel once per frame.
        let ack_timer = tokio::time::sleep(ACK_DELAY);
        tokio::pin!(ack_timer);
        let mut armed = false;
        let mut beat = tokio::time::interval(self.port.heartbeat());
        beat.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        // Bytes read when the last acknowledgement went out.
        let mut read_at_ack = source.get_ref().read_bytes;
        loop {
            let ack = tokio::select! {
                frame = source.next() => {
                    let bytes = match frame {
                        Some(b) => b.map_err(|e| e.to_string())?,
                        None => return Ok(()),
                    };
                    let delivered = self.deliver(epoch, state, &bytes, &mut sink).await?;
                    if delivered.saturating_sub(acked) >= ACK_FRAMES_MAX {
                        Ack::Progress
                    } else {
                        if delivered != acked && !armed {
                            ack_timer.as_mut().reset(Instant::now() + ACK_DELAY);
                            armed = true;
                        }
                        Ack::No
                    }
                }
                _ = &mut ack_timer, if armed => Ack::Progress,
                // A frame is arriving but not whole (no ack is armed): the path is alive.
                _ = beat.tick() => match source.get_ref().read_bytes != read_at_ack && !armed {
                    true => Ack::Heartbeat,
                    false => Ack::No,
                },
            };
            if ack == Ack::No {
                continue;
            }
            armed = false;
            let delivered = state.lock().await.delivered;
            if delivered != acked || ack == Ack::Heartbeat {
                acked = delivered;
                read_at_ack = source.get_ref().read_bytes;
                let frame = peer::encode(&PeerFrame::Ack { delivered })?;
                sink.send(frame).await.map_err(|e| e.to_string())?;
            }
        }
    }

    /// Delivers one `Data` frame to the inbox unless a resend already did; the last
    /// sequence number delivered from this sender after it. While the inbox has no room
    /// the connection's socket is not read (TCP's flow control holds the sender back) and
    /// the last acknowledgement is repeated each heartbeat.
    async fn deliver<W: AsyncWrite + Unpin>(
        &self,
        epoch: u64,
        state: &tokio::sync::Mutex<RecvState>,
        bytes: &[u8],
        sink: &mut FramedWrite<W, LengthDelimitedCodec>,
    ) -> Result<u64, String> {
        let PeerFrame::Data { seq, from, to, msg } = peer::decode(bytes)? else {
            return Err("expected a Data frame".into());
        };
        let mut s = state.lock().await;
        if s.epoch != epoch {
            return Err("superseded by a newer connection".into());
        }
        if seq > s.delivered {
            let queued = self.inbox.send(from, to, msg, bytes.len());
            self.beating(queued, s.delivered, sink).await??;
            s.delivered = seq;
        }
        Ok(s.delivered)
    }

    /// Runs `work`, sending `Ack { delivered }` each heartbeat until it is done.
    async fn beating<F: std::future::Future, W: AsyncWrite + Unpin>(
        &self,
        work: F,
        delivered: u64,
        sink: &mut FramedWrite<W, LengthDelimitedCodec>,
    ) -> Result<F::Output, String> {
        tokio::pin!(work);
        loop {
            tokio::select! {
                out = &mut work => return Ok(out),
                _ = tokio::time::sleep(self.port.heartbeat()) => {
                    let frame = peer::encode(&PeerFrame::Ack { delivered })?;
                    sink.send(frame).await.map_err(|e| e.to_string())?;
                }
            }
        }
    }
}

/// Why a receiver sends an acknowledgement.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Ack {
    No,
    /// Frames were delivered since the last one.
    Progress,
    /// Whether or not any were: the sender learns that the path is alive.
    Heartbeat,
}

/// A reader that counts what it read, so a receiver can tell that a frame is arriving
/// before it is whole (a large frame on a slow path takes longer than a heartbeat).
struct Counted<R> {
    inner: R,
    read_bytes: u64,
}

impl<R> Counted<R> {
    fn new(inner: R) -> Counted<R> {
        Counted {
            inner,
            read_bytes: 0,
        }
    }
}

impl<R: AsyncRead + Unpin> AsyncRead for Counted<R> {
    fn poll_read(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let polled = std::pin::Pin::new(&mut self.inner).poll_read(cx, buf);
        self.read_bytes += (buf.filled().len() - before) as u64;
        polled
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
        link_dead_after_ms: 10_000,
    };

    /// Settings of a test link: `latency`, `queue_max` messages, a long `dead_after`.
    fn settings(latency: Duration, queue_max: usize) -> LinkSettings {
        LinkSettings {
            latency,
            queue_max,
            queue_bytes_max: LINK_QUEUE_BYTES_MAX,
            dead_after: Duration::from_secs(10),
        }
    }

    fn identity(node: u32) -> Identity {
        Identity {
            cluster: "t".into(),
            protocol: "eventual".into(),
            node: NodeId(node),
            name: format!("n{node}"),
            epoch: 1,
            topology: Topology::full(2, 1, 2),
            keys: auth::Keys::Secret(Arc::from(&b"test secret 0123456789"[..])),
            tls: None,
        }
    }

    #[test]
    fn an_identity_debugs_without_its_secret() {
        let shown = format!("{:?}", identity(3));
        assert!(!shown.contains("test secret"), "{shown}");
        assert!(
            shown.contains("n3") && shown.contains("<redacted>"),
            "{shown}"
        );
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
        let (tx, inbox) = Inbox::new(inbox_max, FRAME_LEN_MAX);
        tokio::spawn(Inbound::new(identity(0), tx, TEST_PORT).serve(listener));
        (addr, inbox)
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_link_stays_fifo_without_loss_or_duplicates_across_a_cut_connection() {
        let (inbound_addr, mut inbox) = inbound(1024).await;
        let (relay_addr, conns) = relay(inbound_addr).await;
        let timing = settings(Duration::from_millis(1), 1024);
        let link = spawn_link(identity(1), NodeId(0), relay_addr, timing);
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

    /// A link to a peer that never answers holds at most its byte limit of frames and
    /// drops (counting) the rest; the message limit alone would have kept them all.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_link_queue_is_bounded_in_bytes() {
        let nobody = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = nobody.local_addr().unwrap();
        drop(nobody);
        let mut timing = settings(Duration::ZERO, 1024);
        timing.queue_bytes_max = FRAME_LEN_MAX;
        let link = spawn_link(identity(1), NodeId(0), addr, timing);
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
        let link = spawn_link(identity(1), NodeId(0), addr, settings(latency, 1024));
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
        let link = spawn_link(identity(1), NodeId(0), addr, settings(Duration::ZERO, 1024));
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
        let link = spawn_link(identity(1), NodeId(0), addr, settings(Duration::ZERO, 4096));
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

    /// Every node-to-node socket gets Nagle off and keepalive; a listener's accepted one
    /// also the links' dead_after as its TCP_USER_TIMEOUT, a dialer's none.
    #[cfg(target_os = "linux")]
    #[tokio::test]
    async fn a_peer_socket_gives_up_on_unacknowledged_data_after_dead_after() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let stream = TcpStream::connect(listener.local_addr().unwrap())
            .await
            .unwrap();
        let sock = socket2::SockRef::from(&stream);
        assert_eq!(sock.tcp_user_timeout().unwrap(), None, "off by default");
        tune(&stream, None).unwrap();
        assert_eq!(sock.tcp_user_timeout().unwrap(), None, "a dialer's");
        assert!(sock.keepalive().unwrap() && stream.nodelay().unwrap());
        tune(&stream, Some(Duration::from_millis(1500))).unwrap();
        let timeout = sock.tcp_user_timeout().unwrap();
        assert_eq!(timeout, Some(Duration::from_millis(1500)));
        assert!(sock.keepalive().unwrap() && stream.nodelay().unwrap());
    }

    #[tokio::test]
    async fn a_hello_this_version_cannot_decode_is_refused_with_the_reason() {
        use tokio::io::AsyncWriteExt;
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (tx, _inbox) = Inbox::new(16, FRAME_LEN_MAX);
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
        let (tx, _inbox) = Inbox::new(16, FRAME_LEN_MAX);
        tokio::spawn(Inbound::new(identity(0), tx, TEST_PORT).serve(listener));
        let mut other = identity(1);
        other.protocol = "cure".into();
        let mut elsewhere = identity(1);
        elsewhere.topology = Topology::partial(2, 1, 2, 1);
        for peer in [other, elsewhere] {
            match dial(&peer, NodeId(0), addr, Duration::from_secs(5)).await {
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
