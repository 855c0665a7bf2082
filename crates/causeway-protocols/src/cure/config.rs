//! Cure's engine configuration: the flavor (which snapshot rules), `[protocol.cure]`'s
//! tunables with their defaults, and the mutation table. A ground floor of the folder:
//! it imports none of the engine's parts, which all take these from here.

use causeway_core::clock::Nanos;
use serde::{Deserialize, Serialize};

/// Which snapshot rules the engine runs: Cure's, or the fault-tolerant ones of
/// UniStore's Alg. 1 l.2-7 (CureFt, and UniStore's extension on top of them).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Flavor {
    /// Cure (Akkoorath et al.): snapshots from the GSS and the clock, START waits.
    Cure,
    /// UniStore's `CUREFT` baseline (§8.3): UniStore without uniformity tracking, i.e.
    /// snapshots from the stable vector (the GSS) under Alg. 1's rules, with forwarding.
    CureFt,
}

impl Flavor {
    /// Snapshots follow UniStore's Alg. 1 l.2-7 (no START wait): the fault-tolerant rules.
    pub fn ft_rules(self) -> bool {
        !matches!(self, Flavor::Cure)
    }

    pub fn name(self) -> &'static str {
        match self {
            Flavor::Cure => "cure",
            Flavor::CureFt => "cureft",
        }
    }

    /// The mutations this flavor runs: Cure's.
    pub fn mutations(self) -> &'static [&'static str] {
        MUTATIONS
    }

    /// The mutation `name`, refused unless this flavor runs it.
    pub fn mutation(self, name: Option<&str>) -> Result<Mutation, String> {
        Mutation::parse_among(name, self.mutations(), self.name())
    }
}

/// `[protocol.cure]`: Cure's tunables, in nanoseconds of the node's clock. Every field
/// defaults to the constant of the same name.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// How far ahead of the clock the persisted lease on claimed timestamps reaches.
    pub lease_ns: Nanos,
    /// When a participant inquires about, and a coordinator re-sends, an old decision.
    pub inquire_after_ns: Nanos,
    /// A coordinator aborts a txn whose votes do not all arrive within this time.
    pub prepare_timeout_ns: Nanos,
    /// A coordinator drops an open txn idle this long.
    pub txn_idle_ns: Nanos,
    /// How long a sibling's acknowledgement may lag before we re-send or relay.
    pub lag_grace_ns: Nanos,
    /// A sibling silent this long is presumed failed for log GC, once an origin's log
    /// holds more than `silent_sibling_log_max` txns (0: at once, the behavior before
    /// catch-up from the log was kept for long outages; for the simulator's negative test).
    pub silent_sibling_ns: Nanos,
    pub silent_sibling_log_max: usize,
    /// A state transfer to a sibling is not started again for this long (`transfer.rs`).
    pub transfer_retry_ns: Nanos,
    /// Commit single-partition txns in one phase (the partition alone, one record), and
    /// txns whose partitions are all on their coordinator's node with one record.
    pub one_phase: bool,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            lease_ns: LEASE_NS,
            inquire_after_ns: INQUIRE_AFTER_NS,
            prepare_timeout_ns: PREPARE_TIMEOUT_NS,
            txn_idle_ns: TXN_IDLE_NS,
            lag_grace_ns: LAG_GRACE_NS,
            silent_sibling_ns: SILENT_SIBLING_NS,
            silent_sibling_log_max: crate::kit::repl::SILENT_SIBLING_LOG_MAX,
            transfer_retry_ns: crate::kit::transfer::TRANSFER_RETRY_NS,
            one_phase: true,
        }
    }
}

mutations! {
    /// Which mutation is active, decoded once from `Params::mutation`.
    pub struct Mutation for "cure" {
        /// READ_KEY does not wait for `pvc[d] >= svc[d]` (breaks Alg. 2 l.2).
        no_read_wait = "no-read-wait",
        /// `pvc[d]` is the clock even with prepared txns (breaks Alg. 2 l.19-20).
        pvc_ignores_prepared = "pvc-ignores-prepared",
        /// CommitTime is the min of the prepare times (breaks Alg. 1 l.31).
        commit_time_min = "commit-time-min",
        /// No relaying of a third DC's txns to a lagging sibling (breaks UniStore §5.5).
        no_forwarding = "no-forwarding",
        /// `uniformVec` is the local stable vector: remote txns are visible and barriers
        /// return before f+1 DCs store them (breaks UniStore Alg. 2 l.33-36).
        visible_before_uniform = "visible-before-uniform",
        /// ATTACH answers at once (breaks UniStore Alg. 1 l.52).
        attach_no_wait = "attach-no-wait",
        /// COMMIT_STRONG certifies without the uniform barrier (breaks UniStore Alg. 3 l.2,
        /// the liveness failure of §4, Figure 2).
        no_uniform_barrier = "no-uniform-barrier",
        /// Certification votes commit whatever conflicts (breaks §6.3's OCC).
        certify_ignores_conflicts = "certify-ignores-conflicts",
        /// The certification groups decide with n/2 votes, not a majority.
        paxos_no_majority = "paxos-no-majority",
        /// A strong decision heard ahead of the log raises the certifier's `last` (breaks
        /// unistore/early.rs: a Prepare further down the log proposes below a commit
        /// already delivered, and `knownVec[strong]` goes back).
        early_raises_last = "early-raises-last",
        /// A checkpoint leaves out the txns prepared here: one committed after it loses its
        /// writes on this partition after a restart from it (breaks checkpoint.rs).
        checkpoint_drops_prepared = "checkpoint-drops-prepared",
        /// A sibling that returns after our log dropped txns it lacks gets no state transfer
        /// (breaks transfer.rs: it never converges).
        no_state_transfer = "no-state-transfer",
        /// A read-then-commit served in place waits for no prepared txn, two-phase ones
        /// included (breaks Alg. 2 l.2 beyond what `Part::pvc_two_phase` allows).
        read_commit_no_wait = "read-commit-no-wait",
        /// A txn's record keeps each key's first assignment and drops the later ones it
        /// overwrites (breaks `kit::txn::coalesce_txn_ops`: other txns read an
        /// intermediate value).
        keeps_overwritten_assign = "keeps-overwritten-assign",
        /// A one-node commit's partitions commit when its record is written, not once it is
        /// durable (breaks the one-node commit: a crash loses a txn others already read).
        node_commit_early = "node-commit-early",
        /// A replica writes a received piece as the bytes it came in even when it took only
        /// part of it (breaks `Record::RemotePiece`: a restart applies the txns it had
        /// already a second time).
        piece_record_whole = "piece-record-whole",
    }
    /// Deliberately broken variants, for showing that the simulator and checker catch them.
    /// (A `no-start-wait` variant is not listed: a session's coordinators share the DC's GSS
    /// within a few ms, so skipping START's wait is rarely observable in the simulator; the
    /// wait is covered by a unit test instead.)
    /// (`checkpoint-drops-prepared` shows only after a crash: scripts/test sweeps it with
    /// crashes; UniStore does not list it.
    /// `no-state-transfer` shows only when a log drops txns a returning sibling lacks:
    /// scripts/test sweeps it with a long outage and `silent_sibling_log_max = 0`.
    /// `read-commit-no-wait` shows only when a two-phase txn's commit reaches a partition
    /// after a read-then-commit whose snapshot covers it (the client heard of the commit and
    /// went on faster than the coordinator's message): scripts/test sweeps it with
    /// `--faults slow-links --txn-ops 2 --keys 10` (seeds 2 and 3 of 1..10 caught); 30 seeds
    /// each of four sweeps without slowed links (1.4 million txns) did not produce it. A unit
    /// test (`read_commit_tests`) shows the read it lets through.
    /// `piece-record-whole` shows only when a replica writes a piece of which it had some txns
    /// (a rewound stream), then restarts and replays that record, then a counter those txns
    /// wrote is read (a register's second assignment changes nothing): scripts/test sweeps
    /// it with `--objects counter --faults all --checkpoint-records 0` (a restart replays
    /// every record; a checkpoint taken after the piece would hold the state instead), where
    /// seeds 8 and 16 of 1..20 diverge; 5 seeds of the default sweep did not produce it. A
    /// unit test (`cure::tests`) shows the restart that applies a txn twice.
    /// `node-commit-early` shows only when a crash falls between a one-node commit's record
    /// write and its fsync: scripts/test sweeps it with crashes, which the simulator often
    /// precedes by a disk stall of milliseconds per write (`causeway_sim`'s disk), and one
    /// node per DC, where most multi-key txns commit on one node. The txn it loses was
    /// replicated or read before its record was durable: the DCs diverge, or the final
    /// state misses a txn whose client never heard the outcome but that a read observed.)
    pub const MUTATIONS = [
        no_read_wait,
        pvc_ignores_prepared,
        commit_time_min,
        checkpoint_drops_prepared,
        no_state_transfer,
        keeps_overwritten_assign,
        node_commit_early,
        piece_record_whole,
        read_commit_no_wait,
    ];
    /// UniStore's deliberately broken variants: Cure's (they break the engine UniStore
    /// shares), then UniStore's own (its extension's `mutations`).
    pub const UNISTORE_MUTATIONS = [
        no_read_wait,
        pvc_ignores_prepared,
        commit_time_min,
        no_forwarding,
        visible_before_uniform,
        attach_no_wait,
        no_uniform_barrier,
        certify_ignores_conflicts,
        paxos_no_majority,
        early_raises_last,
        no_state_transfer,
        keeps_overwritten_assign,
    ];
}

/// How far ahead of the clock the persisted lease on claimed timestamps reaches.
pub const LEASE_NS: Nanos = 200_000_000;
/// A participant asks the coordinator of a txn prepared for this long what became of it;
/// a coordinator re-sends COMMIT to participants that have not acknowledged it this long.
pub const INQUIRE_AFTER_NS: Nanos = 1_000_000_000;
/// A coordinator aborts a txn whose prepare votes do not all arrive within this time.
pub const PREPARE_TIMEOUT_NS: Nanos = 2_000_000_000;
/// A coordinator drops an open txn with no request from its session for this long.
pub const TXN_IDLE_NS: Nanos = 30_000_000_000;
/// How long a sibling's acknowledgement may lag behind before we re-send or relay.
pub const LAG_GRACE_NS: Nanos = 500_000_000;
/// A sibling partition silent for this long is presumed failed for log GC.
pub const SILENT_SIBLING_NS: Nanos = 60_000_000_000;
