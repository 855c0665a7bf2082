//! The protocol registry: the [`Protocol`] trait every protocol implements, the adapters
//! that let drivers hold any protocol's machines behind one wire type, and the
//! `registry!` macro that generates, from one line per protocol, the wire enum, the list
//! of names, the factories and the lookups.

use crate::params::{NodeConfig, Params};
use causeway_core::{
    Addr, ClientSession, Ctx, DcId, Key, Lsn, Nanos, NodeId, Output, PartitionId, Request,
    ServerNode, SessionId, Topology,
};
use serde::de::DeserializeOwned;
use serde::Serialize;
use std::fmt;

/// The consistency guarantee a protocol promises, which the simulator checks its runs
/// against (a stronger one can be asked for, to show a baseline violates it).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Guarantee {
    /// Replicas converge once updates stop; nothing else.
    Convergence,
    /// Transactional causal consistency (which includes convergence).
    Tcc,
    /// UniStore's Partial Order-Restrictions consistency (§3): TCC plus Conflict
    /// Ordering of strong transactions under a conflict relation (the simulator's
    /// `conflicts`). A history without strong transactions is held to TCC exactly.
    Por,
    /// Occult's per-client parallel snapshot isolation (§6.1), judged on the serialization
    /// graph (wr, ww, rw, session edges); needs the masters' version order in the history
    /// for its ww/rw edges. Not comparable with TCC: it sits last only to be listed.
    #[serde(rename = "pc-psi")]
    PcPsi,
}

impl Guarantee {
    pub fn name(self) -> &'static str {
        match self {
            Guarantee::Convergence => "convergence",
            Guarantee::Tcc => "tcc",
            Guarantee::Por => "por",
            Guarantee::PcPsi => "pc-psi",
        }
    }

    pub fn parse(s: &str) -> Result<Guarantee, String> {
        match s {
            "convergence" => Ok(Guarantee::Convergence),
            "tcc" => Ok(Guarantee::Tcc),
            "por" => Ok(Guarantee::Por),
            "pc-psi" => Ok(Guarantee::PcPsi),
            _ => Err(format!(
                "unknown guarantee '{s}'; known: convergence, tcc, por, pc-psi"
            )),
        }
    }
}

/// What a protocol needs of the cluster, and what it promises when a DC fails.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Requirements {
    /// Every DC must replicate every partition.
    pub full_replication: bool,
    /// Writes that originated in a DC that then failed may never become visible elsewhere
    /// (Cure §IV-A); the simulator's liveness checks leave such keys out. When false, the
    /// checks keep those keys: a failed DC's txn that some surviving DC made visible (or
    /// that a completed uniform barrier covered) must become visible at every survivor.
    pub failed_dc_writes_may_vanish: bool,
    /// Answers UNIFORM_BARRIER (UniStore §5.6): the session's past is then stored in
    /// enough DCs to survive the tolerated failures, and it may move to another DC with
    /// ATTACH. The simulator's workload issues barriers and migrations only to these.
    pub uniform_barrier: bool,
    /// Whether a whole DC failing for good is in the protocol's fault model. PaRiS's is
    /// not (§III-C: a DC cut away freezes UST everywhere until it returns); the simulator
    /// draws no DC failure for such a protocol (partitions, crashes and the rest still).
    pub dc_failures: bool,
    /// A session moves to another DC with its token alone, no barrier (Occult §3: clients
    /// need not be sticky; the token is the client's causal timestamp). The simulator's
    /// workload then moves clients: `Token`, then `Attach` on a new session elsewhere.
    pub token_moves: bool,
    /// The simulator's liveness checks hold the final registers to causality: no
    /// register may end showing a write that a committed assignment knowingly overwrote
    /// (`causeway_sim::liveness`). Off for `eventual` (its clocks, not causality, order
    /// its registers). It found PrompTCC's later reads pinned to a stale snapshot
    /// (`promptcc/session.rs` `snapshot_of`, fixed in the fifteenth session).
    pub final_registers: bool,
    /// The simulator counts a txn whose client never heard the outcome as committed, all
    /// of it, once a read observed one of its writes (`causeway_sim::required`). Off for
    /// `eventual` (it writes each key apart). Convergence baselines sharing a module's
    /// requirements (eventual-ms, PrompTCC's eventual) are outside the rule anyway: it
    /// applies only to protocols with atomic transactions (`FinalStateRules::causal`).
    pub atomic_unknowns: bool,
    /// Without faults every causal txn commits: the protocol aborts one only when a fault
    /// (a crash, a partition, a failed DC) costs it state or a reply, never for a conflict,
    /// a validation or a request's shape. The simulator holds every run whose fault plan
    /// drew nothing (and whose CPU model is off: an overloaded coordinator may refuse) to
    /// it (`causeway_sim::liveness::check_fault_free_commits`). Off for Occult (§6.2:
    /// validation or a lock it cannot take aborts a txn) and STRONG (every txn
    /// certified, so conflicts abort). It would have caught PaRiS aborting a request that
    /// read one key twice (fixed in the thirty-eighth session) under `--merge-reads`.
    pub causal_commits_without_faults: bool,
}

/// Defines a registry entry for one flavor of a module's shared code (PaRiS with BPR and
/// NoCC, PrompTCC with its baselines, Occult with eventual-ms). The calling module
/// provides `Msg`, `Config`, `Node`, `Client`, `const fn requirements(flavor)`, and
/// `recover(flavor, config, section, records)` and
/// `new_session(flavor, id, dc, topology, params, section)`; `$flavor.name()` must be a
/// `const fn`.
#[doc(hidden)]
#[macro_export]
macro_rules! flavor_protocol {
    ($(#[$doc:meta])* $ty:ident, $flavor:expr, $guarantee:expr, $mutations:expr, $sweeps:expr
     $(, partition_of_key = $placement:path)?) => {
        $(#[$doc])*
        pub struct $ty;

        impl $crate::registry::Protocol for $ty {
            const NAME: &'static str = $flavor.name();
            const GUARANTEE: $crate::registry::Guarantee = $guarantee;
            const MUTATIONS: &'static [&'static str] = $mutations;
            const SWEEPS: &'static [$crate::sweep::Sweep] = $sweeps;
            const REQUIREMENTS: $crate::registry::Requirements = requirements($flavor);
            type Msg = Msg;
            type Config = Config;
            type Node = Node;
            type Session = $crate::kit::session::Session<Client>;

            fn recover(
                config: &$crate::params::NodeConfig,
                section: &Config,
                records: &[Vec<u8>],
            ) -> Result<Node, String> {
                recover($flavor, config, section, records)
            }

            fn session(
                id: causeway_core::SessionId,
                dc: causeway_core::DcId,
                topology: &causeway_core::Topology,
                params: &$crate::params::Params,
                section: &Config,
            ) -> Result<$crate::kit::session::Session<Client>, String> {
                new_session($flavor, id, dc, topology, params, section)
            }

            $(
                fn partition_of_key(
                    section: &Config,
                    topology: &causeway_core::Topology,
                    key: &causeway_core::Key,
                ) -> causeway_core::PartitionId {
                    $placement(section, topology, key)
                }
            )?
        }
    };
}

/// A protocol: one module and one `registry!` line.
pub trait Protocol: 'static {
    const NAME: &'static str;
    const GUARANTEE: Guarantee;
    /// Deliberately broken variants, which the simulator and checker must catch.
    const MUTATIONS: &'static [&'static str];
    /// The simulator runs the test loop makes of it ([`crate::sweep`]): its fault shapes,
    /// and a run catching each of its mutations.
    const SWEEPS: &'static [crate::sweep::Sweep];
    const REQUIREMENTS: Requirements;
    /// The protocol's own messages (node to node and session to node).
    type Msg: Clone + fmt::Debug + Serialize + DeserializeOwned + Send + 'static;
    /// The protocol's config section (`[protocol.NAME]`), every field with a default.
    type Config: Clone + fmt::Debug + Default + Serialize + DeserializeOwned + Send + 'static;
    type Node: ServerNode<Msg = Self::Msg> + Send + 'static;
    type Session: ClientSession<Msg = Self::Msg> + Send + 'static;

    /// Builds a node and replays its persisted records (oldest first).
    fn recover(
        config: &NodeConfig,
        section: &Self::Config,
        records: &[Vec<u8>],
    ) -> Result<Self::Node, String>;

    /// How many DC failures the protocol tolerates with `section` on `dcs` DCs: its
    /// completed uniform barriers survive that many (0 where nothing is promised).
    fn tolerated_failures(_section: &Self::Config, _dcs: u16) -> usize {
        0
    }

    /// Builds a client session living in `dc`; a mutation the protocol does not know is
    /// an error, as for a node.
    fn session(
        id: SessionId,
        dc: DcId,
        topology: &Topology,
        params: &Params,
        section: &Self::Config,
    ) -> Result<Self::Session, String>;

    /// Appends `msg`'s postcard bytes, exactly as serde writes them, if the protocol
    /// writes this message by hand (its hottest messages on the peer wire), and says
    /// whether it did; if not, `out` is untouched and serde writes it.
    fn encode_msg_by_hand(_msg: &Self::Msg, _out: &mut Vec<u8>) -> bool {
        false
    }

    /// The partition storing `key` under `section` (its node in a DC is
    /// `Topology::node_of`): the slot ranges of `Topology::partition_of`, unless the
    /// protocol places keys its own way (Occult's shards). The simulator finds the nodes
    /// holding the hottest keys by it (`SimConfig::slow_hot_replication`).
    fn partition_of_key(_section: &Self::Config, topology: &Topology, key: &Key) -> PartitionId {
        topology.partition_of(key)
    }
}

/// A message handed to a machine of another protocol (a misconfigured peer, say).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WrongProtocol {
    pub expected: &'static str,
    pub got: &'static str,
}

impl fmt::Display for WrongProtocol {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "a {} message reached a {} machine",
            self.got, self.expected
        )
    }
}

impl std::error::Error for WrongProtocol {}

/// A server node of any protocol, speaking the wire enum `M` (the crate's `Msg`, which
/// `registry!` generates on the floor above; generic here so this file imports none of it).
pub trait AnyNode<M>: Send {
    fn protocol(&self) -> &'static str;
    fn start(&mut self, ctx: &mut Ctx<M>);
    fn handle_message(&mut self, ctx: &mut Ctx<M>, from: Addr, msg: M)
        -> Result<(), WrongProtocol>;
    fn handle_timeout(&mut self, ctx: &mut Ctx<M>);
    fn handle_persisted(&mut self, ctx: &mut Ctx<M>, lsn: Lsn);
    fn poll_timeout(&self) -> Option<Nanos>;
    fn check_invariants(&self) -> Result<(), String>;
    /// [`causeway_core::ServerNode::checkpoint`].
    fn checkpoint(&self) -> Option<Vec<u8>>;
    fn can_checkpoint(&self) -> bool;
    fn gauges(&self, clock: Nanos) -> Vec<(&'static str, f64)>;
    fn take_samples(&mut self) -> Vec<(&'static str, u64)>;
    fn take_work(&mut self) -> u64;
}

/// A client session of any protocol, speaking the wire enum `M` (as [`AnyNode`]).
pub trait AnySession<M>: Send {
    fn protocol(&self) -> &'static str;
    fn submit(&mut self, ctx: &mut Ctx<M>, request: Request);
    /// [`causeway_core::ClientSession::submit_ahead`].
    fn submit_ahead(&mut self, ctx: &mut Ctx<M>, request: Request, ahead: &[Request]);
    /// [`causeway_core::ClientSession::running`].
    fn running(&self) -> bool;
    fn handle_message(&mut self, ctx: &mut Ctx<M>, from: Addr, msg: M)
        -> Result<(), WrongProtocol>;
    fn handle_timeout(&mut self, ctx: &mut Ctx<M>);
    fn poll_timeout(&self) -> Option<Nanos>;
    /// [`causeway_core::ClientSession::peer_restarted`].
    fn peer_restarted(&mut self, ctx: &mut Ctx<M>, node: NodeId);
    fn check_invariants(&self) -> Result<(), String>;
    fn take_overwrites(&mut self) -> Vec<(causeway_core::OpId, Option<causeway_core::OpId>)>;
    /// [`causeway_core::ClientSession::skip_observed`].
    fn skip_observed(&mut self);
    /// [`causeway_core::ClientSession::join_past`]: `other` must be a session of the same
    /// protocol (a driver's sessions all are).
    fn join_past(&mut self, other: &dyn AnySession<M>) -> bool;
    /// For [`AnySession::join_past`]'s downcast.
    fn as_any(&self) -> &dyn std::any::Any;
}

pub type BoxedNode<M> = Box<dyn AnyNode<M>>;
pub type BoxedSession<M> = Box<dyn AnySession<M>>;

/// The wire enum carries protocol `P`'s messages (generated by `registry!`).
pub trait Carries<P: Protocol>: Sized {
    fn wrap(msg: P::Msg) -> Self;
    fn unwrap(self) -> Result<P::Msg, WrongProtocol>;
}

/// Runs `f` on a context of the protocol's own message type and moves its outputs, wrapped,
/// into the driver's context. The protocol's context borrows `scratch`, the adapter's
/// buffer, and hands it back empty ([`Ctx::with_buffer`]).
fn with_own_ctx<P: Protocol, M: Carries<P>, R>(
    ctx: &mut Ctx<M>,
    scratch: &mut Vec<Output<P::Msg>>,
    f: impl FnOnce(&mut Ctx<P::Msg>) -> R,
) -> R {
    let mut own = Ctx::with_buffer(ctx.now, ctx.clock, std::mem::take(scratch));
    let r = f(&mut own);
    ctx.outputs.extend(own.drain().map(|o| o.map(M::wrap)));
    *scratch = own.into_buffer();
    r
}

/// Adapts a protocol's node to [`AnyNode`]: the node and its output buffer.
pub struct NodeOf<P: Protocol>(pub P::Node, Vec<Output<P::Msg>>);

impl<P: Protocol, M: Carries<P>> AnyNode<M> for NodeOf<P> {
    fn protocol(&self) -> &'static str {
        P::NAME
    }
    fn start(&mut self, ctx: &mut Ctx<M>) {
        with_own_ctx::<P, M, _>(ctx, &mut self.1, |c| self.0.start(c))
    }
    fn handle_message(
        &mut self,
        ctx: &mut Ctx<M>,
        from: Addr,
        msg: M,
    ) -> Result<(), WrongProtocol> {
        let msg = <M as Carries<P>>::unwrap(msg)?;
        with_own_ctx::<P, M, _>(ctx, &mut self.1, |c| self.0.handle_message(c, from, msg));
        Ok(())
    }
    fn handle_timeout(&mut self, ctx: &mut Ctx<M>) {
        with_own_ctx::<P, M, _>(ctx, &mut self.1, |c| self.0.handle_timeout(c))
    }
    fn handle_persisted(&mut self, ctx: &mut Ctx<M>, lsn: Lsn) {
        with_own_ctx::<P, M, _>(ctx, &mut self.1, |c| self.0.handle_persisted(c, lsn))
    }
    fn poll_timeout(&self) -> Option<Nanos> {
        self.0.poll_timeout()
    }
    fn check_invariants(&self) -> Result<(), String> {
        self.0.check_invariants()
    }
    fn checkpoint(&self) -> Option<Vec<u8>> {
        self.0.checkpoint()
    }
    fn can_checkpoint(&self) -> bool {
        self.0.can_checkpoint()
    }
    fn gauges(&self, clock: Nanos) -> Vec<(&'static str, f64)> {
        self.0.gauges(clock)
    }
    fn take_samples(&mut self) -> Vec<(&'static str, u64)> {
        self.0.take_samples()
    }
    fn take_work(&mut self) -> u64 {
        self.0.take_work()
    }
}

/// Adapts a protocol's session to [`AnySession`]: the session and its output buffer.
pub struct SessionOf<P: Protocol>(pub P::Session, Vec<Output<P::Msg>>);

impl<P: Protocol, M: Carries<P>> AnySession<M> for SessionOf<P> {
    fn protocol(&self) -> &'static str {
        P::NAME
    }
    fn submit(&mut self, ctx: &mut Ctx<M>, request: Request) {
        with_own_ctx::<P, M, _>(ctx, &mut self.1, |c| self.0.submit(c, request))
    }
    fn submit_ahead(&mut self, ctx: &mut Ctx<M>, request: Request, ahead: &[Request]) {
        with_own_ctx::<P, M, _>(ctx, &mut self.1, |c| self.0.submit_ahead(c, request, ahead))
    }

    fn running(&self) -> bool {
        self.0.running()
    }
    fn handle_message(
        &mut self,
        ctx: &mut Ctx<M>,
        from: Addr,
        msg: M,
    ) -> Result<(), WrongProtocol> {
        let msg = <M as Carries<P>>::unwrap(msg)?;
        with_own_ctx::<P, M, _>(ctx, &mut self.1, |c| self.0.handle_message(c, from, msg));
        Ok(())
    }
    fn handle_timeout(&mut self, ctx: &mut Ctx<M>) {
        with_own_ctx::<P, M, _>(ctx, &mut self.1, |c| self.0.handle_timeout(c))
    }
    fn poll_timeout(&self) -> Option<Nanos> {
        self.0.poll_timeout()
    }
    fn peer_restarted(&mut self, ctx: &mut Ctx<M>, node: NodeId) {
        with_own_ctx::<P, M, _>(ctx, &mut self.1, |c| self.0.peer_restarted(c, node))
    }
    fn check_invariants(&self) -> Result<(), String> {
        self.0.check_invariants()
    }
    fn take_overwrites(&mut self) -> Vec<(causeway_core::OpId, Option<causeway_core::OpId>)> {
        self.0.take_overwrites()
    }
    fn skip_observed(&mut self) {
        self.0.skip_observed()
    }
    fn join_past(&mut self, other: &dyn AnySession<M>) -> bool {
        let other = other
            .as_any()
            .downcast_ref::<SessionOf<P>>()
            .expect("pasts join within one protocol");
        self.0.join_past(&other.0)
    }
    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}

/// One registered protocol, object-safe, for lookups by name; its machines speak the
/// wire enum `M`.
pub trait Entry<M>: Sync {
    fn name(&self) -> &'static str;
    fn guarantee(&self) -> Guarantee;
    fn mutations(&self) -> &'static [&'static str];
    fn sweeps(&self) -> &'static [crate::sweep::Sweep];
    fn requirements(&self) -> Requirements;
    /// Checks a config section (unknown fields and bad values are errors naming them).
    fn check_section(&self, section: &serde_json::Value) -> Result<(), String>;
    /// DC failures tolerated under `section` on `dcs` DCs (see `Protocol`).
    fn tolerated_failures(&self, section: &serde_json::Value, dcs: u16) -> Result<usize, String>;
    /// The partition storing `key` under `section` ([`Protocol::partition_of_key`]).
    fn partition_of_key(
        &self,
        section: &serde_json::Value,
        topology: &Topology,
        key: &Key,
    ) -> Result<PartitionId, String>;
    fn new_node(&self, config: &NodeConfig, records: &[Vec<u8>]) -> Result<BoxedNode<M>, String>;
    fn new_session(
        &self,
        id: SessionId,
        dc: DcId,
        topology: &Topology,
        params: &Params,
        section: &serde_json::Value,
    ) -> Result<BoxedSession<M>, String>;
}

/// The registry entry of protocol `P`.
pub struct EntryOf<P>(pub std::marker::PhantomData<fn() -> P>);

fn section_of<P: Protocol>(section: &serde_json::Value) -> Result<P::Config, String> {
    if section.is_null() {
        return Ok(P::Config::default());
    }
    serde_json::from_value(section.clone()).map_err(|e| format!("[protocol.{}]: {e}", P::NAME))
}

fn check_topology<P: Protocol>(topology: &Topology) -> Result<(), String> {
    if P::REQUIREMENTS.full_replication && topology.replication_factor != topology.dcs {
        return Err(format!(
            "{} needs full replication (replication factor = dcs = {}), got {}",
            P::NAME,
            topology.dcs,
            topology.replication_factor
        ));
    }
    Ok(())
}

impl<P: Protocol, M: Carries<P> + 'static> Entry<M> for EntryOf<P> {
    fn name(&self) -> &'static str {
        P::NAME
    }
    fn guarantee(&self) -> Guarantee {
        P::GUARANTEE
    }
    fn mutations(&self) -> &'static [&'static str] {
        P::MUTATIONS
    }
    fn sweeps(&self) -> &'static [crate::sweep::Sweep] {
        P::SWEEPS
    }
    fn requirements(&self) -> Requirements {
        P::REQUIREMENTS
    }
    fn check_section(&self, section: &serde_json::Value) -> Result<(), String> {
        section_of::<P>(section).map(|_| ())
    }
    fn tolerated_failures(&self, section: &serde_json::Value, dcs: u16) -> Result<usize, String> {
        section_of::<P>(section).map(|s| P::tolerated_failures(&s, dcs))
    }
    fn partition_of_key(
        &self,
        section: &serde_json::Value,
        topology: &Topology,
        key: &Key,
    ) -> Result<PartitionId, String> {
        section_of::<P>(section).map(|s| P::partition_of_key(&s, topology, key))
    }
    fn new_node(&self, config: &NodeConfig, records: &[Vec<u8>]) -> Result<BoxedNode<M>, String> {
        check_topology::<P>(&config.topology)?;
        check_mutation(P::NAME, P::MUTATIONS, &config.params)?;
        let section = section_of::<P>(&config.section)?;
        let node = P::recover(config, &section, records)?;
        Ok(Box::new(NodeOf::<P>(node, Vec::new())))
    }
    fn new_session(
        &self,
        id: SessionId,
        dc: DcId,
        topology: &Topology,
        params: &Params,
        section: &serde_json::Value,
    ) -> Result<BoxedSession<M>, String> {
        check_topology::<P>(topology)?;
        check_mutation(P::NAME, P::MUTATIONS, params)?;
        let section = section_of::<P>(section)?;
        let session = P::session(id, dc, topology, params, &section)?;
        Ok(Box::new(SessionOf::<P>(session, Vec::new())))
    }
}

fn check_mutation(name: &str, known: &[&str], params: &Params) -> Result<(), String> {
    match &params.mutation {
        Some(m) if !known.contains(&m.as_str()) => Err(crate::mutation::unknown(name, m, known)),
        _ => Ok(()),
    }
}

/// Registers the protocols: `registry! { Variant => module::ProtocolType, ... }`, one line
/// each. Generates the wire enum `Msg`, `PROTOCOLS`, `entry`, `mutations`, `new_node`,
/// `new_session`.
#[macro_export]
macro_rules! registry {
    ($($variant:ident => $proto:ty),+ $(,)?) => {
        /// Every message any protocol sends, node to node or client to node.
        #[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
        pub enum Msg {
            $($variant(<$proto as $crate::registry::Protocol>::Msg)),+
        }

        impl Msg {
            /// The protocol this message belongs to.
            pub fn protocol(&self) -> &'static str {
                match self {
                    $(Msg::$variant(_) => <$proto as $crate::registry::Protocol>::NAME),+
                }
            }

            /// Appends the message's postcard bytes (its variant's index, then the
            /// protocol's message) if its protocol writes it by hand
            /// ([`Protocol::encode_msg_by_hand`]); else `out` is untouched.
            pub fn encode_by_hand(&self, out: &mut Vec<u8>) -> bool {
                let mark = out.len();
                // Variants are numbered in the order they are listed, as serde does.
                let mut index = 0u64;
                $(
                    if let Msg::$variant(m) = self {
                        $crate::kit::postcard_form::Writer(out).varint(index);
                        if <$proto as $crate::registry::Protocol>::encode_msg_by_hand(m, out) {
                            return true;
                        }
                        out.truncate(mark);
                        return false;
                    }
                    index += 1;
                )+
                let _ = index;
                false
            }
        }

        $(
            impl $crate::registry::Carries<$proto> for Msg {
                fn wrap(msg: <$proto as $crate::registry::Protocol>::Msg) -> Msg {
                    Msg::$variant(msg)
                }
                #[allow(irrefutable_let_patterns, unreachable_patterns)]
                fn unwrap(self) -> Result<<$proto as $crate::registry::Protocol>::Msg, $crate::registry::WrongProtocol> {
                    let got = self.protocol();
                    match self {
                        Msg::$variant(m) => Ok(m),
                        _ => Err($crate::registry::WrongProtocol {
                            expected: <$proto as $crate::registry::Protocol>::NAME,
                            got,
                        }),
                    }
                }
            }
        )+

        /// A server node of any registered protocol, speaking [`Msg`].
        pub type BoxedNode = $crate::registry::BoxedNode<Msg>;
        /// A client session of any registered protocol, speaking [`Msg`].
        pub type BoxedSession = $crate::registry::BoxedSession<Msg>;

        /// Protocol names this build can run.
        pub const PROTOCOLS: &[&str] = &[$(<$proto as $crate::registry::Protocol>::NAME),+];

        static ENTRIES: &[&dyn $crate::registry::Entry<Msg>] = &[
            $(&$crate::registry::EntryOf::<$proto>(std::marker::PhantomData)),+
        ];

        /// The registered protocol called `name`, or an error listing the known ones.
        pub fn entry(name: &str) -> Result<&'static dyn $crate::registry::Entry<Msg>, String> {
            ENTRIES.iter().copied().find(|e| e.name() == name).ok_or_else(|| {
                format!("unknown protocol '{name}'; known: {}", PROTOCOLS.join(", "))
            })
        }

        /// Mutations (broken variants) of `protocol` (none for an unknown one).
        pub fn mutations(protocol: &str) -> &'static [&'static str] {
            entry(protocol).map_or(&[], |e| e.mutations())
        }

        /// Builds a server node, recovering it from its persisted records (oldest first).
        pub fn new_node(
            protocol: &str,
            config: $crate::params::NodeConfig,
            records: &[Vec<u8>],
        ) -> Result<BoxedNode, String> {
            entry(protocol)?.new_node(&config, records)
        }

        /// Builds a client session of `protocol` living in `dc`; `section` is the
        /// protocol's config section (`Null` for defaults).
        pub fn new_session(
            protocol: &str,
            session: causeway_core::SessionId,
            dc: causeway_core::DcId,
            topology: &causeway_core::Topology,
            params: &$crate::params::Params,
            section: &serde_json::Value,
        ) -> Result<BoxedSession, String> {
            entry(protocol)?.new_session(session, dc, topology, params, section)
        }
    };
}

#[cfg(test)]
mod tests {
    use super::Guarantee;

    #[test]
    fn guarantees_parse_their_names() {
        for g in [
            Guarantee::Convergence,
            Guarantee::Tcc,
            Guarantee::Por,
            Guarantee::PcPsi,
        ] {
            assert_eq!(Guarantee::parse(g.name()), Ok(g));
        }
        assert_eq!(Guarantee::parse("por"), Ok(Guarantee::Por));
        let e = Guarantee::parse("serializable").expect_err("unknown");
        assert!(e.contains("known: convergence, tcc, por, pc-psi"), "{e}");
        assert_eq!(Guarantee::parse("pc-psi"), Ok(Guarantee::PcPsi));
        assert!(Guarantee::Por > Guarantee::Tcc, "PoR is the stronger");
    }
}
