//! The closed-loop clients of `causeway load`: one thread per client, each with its own
//! session (begin, the planned requests, commit, again until the deadline), timing every
//! committed transaction into an HDR histogram and, with `--history`, recording every
//! transaction it began as the checker reads it.
//!
//! Outcomes follow the checker's rules (docs/HISTORY.md): `committed` when the commit was
//! acknowledged; `aborted` when the server aborted or refused the transaction before its
//! commit was sent (nothing of it can be visible); `unknown` after a timeout, a lost
//! connection or an error answer to the commit itself, since it may have committed. After an
//! unknown outcome the client opens a fresh session: the old one is closed (the client
//! library says so) and a new session id keeps session order to what the client knew.

use super::plan::{KeySpace, Planner, Step};
use causeway_check::{HOp, Outcome, TxnRecord};
use causeway_client::{Client, ClientError, Options};
use causeway_core::abort_reasons::{self, AbortReasons};
use causeway_core::crdt::{ObjType, Update};
use causeway_core::{DcId, TxnKind};
use hdrhistogram::Histogram;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

/// Largest latency the histograms hold, in µs (one hour; longer ones saturate).
const LATENCY_US_MAX: u64 = 3_600_000_000;

/// A latency histogram in µs with 3 significant digits.
pub fn new_histogram() -> Histogram<u64> {
    Histogram::new_with_max(LATENCY_US_MAX, 3).expect("valid histogram bounds")
}

/// Wall-clock nanoseconds for the history, read monotonically: the wall time at the start
/// plus a monotonic offset, so times never go back when the system clock is set.
pub struct WallClock {
    base: Instant,
    base_ns: u64,
}

impl WallClock {
    pub fn new() -> WallClock {
        let since_epoch = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .unwrap_or_default();
        WallClock {
            base: Instant::now(),
            base_ns: since_epoch.as_nanos() as u64,
        }
    }

    pub fn now_ns(&self) -> u64 {
        self.base_ns + self.base.elapsed().as_nanos() as u64
    }
}

/// What the clients of a run share.
pub struct Shared {
    /// Committed transactions so far (for the progress line).
    pub committed: AtomicU64,
    /// Transactions a client may still begin while recording; `None`: no history, no cap.
    history_slots: Option<AtomicU64>,
    /// Set once the history is full: every client stops after its transaction.
    pub history_full: AtomicBool,
}

impl Shared {
    pub fn new(history_slots: Option<u64>) -> Shared {
        Shared {
            committed: AtomicU64::new(0),
            history_slots: history_slots.map(AtomicU64::new),
            history_full: AtomicBool::new(false),
        }
    }

    /// Takes a history slot for the next transaction; false once none is left, so the
    /// history never outgrows what `causeway check` takes.
    fn take_slot(&self) -> bool {
        let Some(slots) = &self.history_slots else {
            return true;
        };
        let taken = slots.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1));
        if taken.is_err() {
            self.history_full.store(true, Ordering::Relaxed);
        }
        taken.is_ok()
    }
}

/// One client's (or a whole step's) counts, latencies and records.
pub struct Tally {
    pub latency_us: Histogram<u64>,
    pub committed: u64,
    pub aborted: u64,
    pub unknown: u64,
    pub records: Vec<TxnRecord>,
    pub errors: Vec<String>,
    /// Aborted transactions by kind of reason (`causeway_core::abort_reasons`).
    pub abort_reasons: AbortReasons,
}

impl Tally {
    pub fn new() -> Tally {
        Tally {
            latency_us: new_histogram(),
            committed: 0,
            aborted: 0,
            unknown: 0,
            records: Vec::new(),
            errors: Vec::new(),
            abort_reasons: AbortReasons::new(),
        }
    }

    pub fn merge(&mut self, other: Tally) {
        self.latency_us
            .add(&other.latency_us)
            .expect("histograms of the same bounds");
        self.committed += other.committed;
        self.aborted += other.aborted;
        self.unknown += other.unknown;
        self.records.extend(other.records);
        self.errors.extend(other.errors);
        abort_reasons::merge(&mut self.abort_reasons, &other.abort_reasons);
    }

    fn count(&mut self, outcome: Outcome, took: Duration) {
        match outcome {
            Outcome::Committed => {
                self.committed += 1;
                self.latency_us.saturating_record(took.as_micros() as u64);
            }
            Outcome::Aborted => self.aborted += 1,
            Outcome::Unknown => self.unknown += 1,
        }
    }
}

/// First and longest pause before a client connects again after a failed attempt.
const CONNECT_PAUSE_MIN: Duration = Duration::from_millis(100);
const CONNECT_PAUSE_MAX: Duration = Duration::from_secs(1);

/// A client's failed connection attempts: the first error, how many, the next pause.
struct ConnectFailures {
    first: Option<String>,
    count: u64,
    pause: Duration,
}

impl Default for ConnectFailures {
    fn default() -> ConnectFailures {
        ConnectFailures {
            first: None,
            count: 0,
            pause: CONNECT_PAUSE_MIN,
        }
    }
}

impl ConnectFailures {
    /// Notes `error` and sleeps the pause (never past `deadline`), doubling it.
    fn wait(&mut self, error: String, deadline: Instant) {
        self.first.get_or_insert(error);
        self.count += 1;
        let left = deadline.saturating_duration_since(Instant::now());
        std::thread::sleep(self.pause.min(left));
        self.pause = (self.pause * 2).min(CONNECT_PAUSE_MAX);
    }

    /// One line for the run's report, if any attempt failed.
    fn report(self) -> Option<String> {
        let first = self.first?;
        Some(match self.count {
            1 => first,
            n => format!("{first} (and {} more failed attempts; it retried)", n - 1),
        })
    }
}

/// How one transaction ended, with its record when it began.
pub struct Done {
    pub outcome: Outcome,
    pub record: Option<TxnRecord>,
    /// The server's reason, when it aborted the transaction.
    pub abort_reason: Option<String>,
}

/// A client: where it connects, which DC that is, and what it runs.
pub struct Worker {
    /// A name for values and error messages, e.g. `c3` (client 3).
    pub name: String,
    pub addr: String,
    pub dc: DcId,
    pub options: Options,
    pub space: Arc<KeySpace>,
    pub clock: Arc<WallClock>,
    pub record: bool,
    /// Writes so far, to tag values.
    pub writes: u64,
}

/// Why the server aborted a transaction: its words, for `aborts by reason`.
fn abort_reason(error: &ClientError) -> String {
    match error {
        ClientError::Aborted(reason) => reason.clone(),
        other => other.to_string(),
    }
}

/// An error's outcome for the transaction; `committing`: the error answered the commit.
fn outcome_of(error: &ClientError, committing: bool) -> Outcome {
    match error {
        ClientError::Aborted(_) => Outcome::Aborted,
        ClientError::Server(_) if !committing => Outcome::Aborted,
        _ => Outcome::Unknown,
    }
}

impl Worker {
    pub fn connect(&self) -> Result<Client, String> {
        Client::connect_with(self.addr.as_str(), self.options.clone())
            .map_err(|e| format!("client {}: {e}", self.name))
    }

    /// The closed loop: transactions until the deadline or until the history is full. A
    /// client that cannot connect (its DC's node restarting) tries again after a pause,
    /// until the deadline; the first failure and their count are reported as one error.
    pub fn run(mut self, mut planner: Planner, deadline: Instant, shared: &Shared) -> Tally {
        let mut tally = Tally::new();
        let mut session: Option<Client> = None;
        let mut failed = ConnectFailures::default();
        while Instant::now() < deadline && shared.take_slot() {
            let client = match session.take().map_or_else(|| self.connect(), Ok) {
                Ok(c) => {
                    failed.pause = CONNECT_PAUSE_MIN;
                    session.insert(c)
                }
                Err(e) => {
                    failed.wait(e, deadline);
                    continue;
                }
            };
            let began = Instant::now();
            let (done, keep) = self.run_txn(client, &planner.plan());
            tally.count(done.outcome, began.elapsed());
            if let Some(why) = &done.abort_reason {
                abort_reasons::count(&mut tally.abort_reasons, why);
            }
            if done.outcome == Outcome::Committed {
                shared.committed.fetch_add(1, Ordering::Relaxed);
            }
            if !keep {
                session = None;
            }
            tally.records.extend(done.record.filter(|_| self.record));
        }
        tally.errors.extend(failed.report());
        tally
    }

    /// Runs one transaction; returns how it ended and whether the session is still usable.
    pub fn run_txn(&mut self, client: &mut Client, plan: &[Step]) -> (Done, bool) {
        let start_ns = self.clock.now_ns();
        let txn = match client.begin() {
            Ok(t) => t,
            Err(e) => {
                // No transaction began, so there is nothing to record.
                let outcome = outcome_of(&e, false);
                let done = Done {
                    outcome,
                    record: None,
                    abort_reason: (outcome == Outcome::Aborted).then(|| abort_reason(&e)),
                };
                return (done, outcome != Outcome::Unknown);
            }
        };
        let mut ops = Vec::new();
        let ended = match self.run_steps(client, plan, &mut ops) {
            Err(e) => Err((e, false)),
            Ok(()) => client.commit().map_err(|e| (e, true)),
        };
        let (outcome, why) = match &ended {
            Ok(()) => (Outcome::Committed, None),
            Err((e, committing)) => {
                let outcome = outcome_of(e, *committing);
                (
                    outcome,
                    (outcome == Outcome::Aborted).then(|| abort_reason(e)),
                )
            }
        };
        let keep = match outcome {
            Outcome::Committed => true,
            Outcome::Unknown => false,
            // The transaction may still be open after an error answer: end it, and give up
            // the session if even that fails.
            Outcome::Aborted => !matches!(
                client.abort(),
                Err(ClientError::Timeout { .. } | ClientError::ConnectionLost(_))
            ),
        };
        let record = TxnRecord {
            id: txn,
            session: txn.session,
            dc: self.dc,
            kind: TxnKind::Causal,
            label: None,
            start_ns,
            end_ns: self.clock.now_ns(),
            ops,
            outcome,
        };
        let done = Done {
            outcome,
            record: Some(record),
            abort_reason: why,
        };
        (done, keep)
    }

    fn run_steps(
        &mut self,
        client: &mut Client,
        plan: &[Step],
        ops: &mut Vec<HOp>,
    ) -> Result<(), ClientError> {
        for step in plan {
            match step {
                Step::Read(indices) => {
                    let keys = indices
                        .iter()
                        .map(|i| (self.space.key(*i), ObjType::Lww))
                        .collect();
                    for v in client.read(keys)? {
                        ops.push(HOp::Read {
                            key: v.key,
                            obj: ObjType::Lww,
                            value: v.value,
                            observed: v.observed,
                        });
                    }
                }
                Step::Write(index) => {
                    self.writes += 1;
                    let key = self.space.key(*index);
                    let tag = format!("{}.{}", self.name, self.writes);
                    let update = Update::Assign(self.space.value(&tag));
                    let id = client.update(key.clone(), update.clone())?;
                    ops.push(HOp::Write { key, update, id });
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_commit_can_leave_an_unknown_outcome_unless_the_transport_failed() {
        let server = ClientError::Server(causeway_core::Error::Unavailable("busy".into()));
        let lost = ClientError::ConnectionLost("reset".into());
        let timeout = ClientError::Timeout {
            what: "Commit".into(),
            after_ms: 1,
        };
        assert_eq!(outcome_of(&server, false), Outcome::Aborted);
        assert_eq!(outcome_of(&server, true), Outcome::Unknown);
        assert_eq!(outcome_of(&lost, false), Outcome::Unknown);
        assert_eq!(outcome_of(&timeout, true), Outcome::Unknown);
        let aborted = ClientError::Aborted("snapshot too old".into());
        assert_eq!(outcome_of(&aborted, true), Outcome::Aborted);
    }

    #[test]
    fn history_slots_run_out_and_say_so() {
        let shared = Shared::new(Some(2));
        assert!(shared.take_slot() && shared.take_slot());
        assert!(!shared.history_full.load(Ordering::Relaxed));
        assert!(!shared.take_slot());
        assert!(shared.history_full.load(Ordering::Relaxed));
        assert!(Shared::new(None).take_slot());
    }

    #[test]
    fn failed_connects_pause_longer_each_time_and_report_once() {
        let mut f = ConnectFailures::default();
        assert_eq!(f.pause, CONNECT_PAUSE_MIN);
        let past = Instant::now();
        let took = Instant::now();
        for i in 0..6 {
            f.wait(format!("client c: refused {i}"), past);
        }
        assert!(
            took.elapsed() < CONNECT_PAUSE_MIN,
            "no sleep past the deadline"
        );
        assert_eq!(f.count, 6);
        assert_eq!(f.pause, CONNECT_PAUSE_MAX, "doubled up to the cap");
        let line = f.report().unwrap();
        assert!(
            line.starts_with("client c: refused 0 (and 5 more"),
            "{line}"
        );
        let mut once = ConnectFailures::default();
        once.wait("client c: refused".into(), past);
        assert_eq!(once.report().as_deref(), Some("client c: refused"));
        assert_eq!(ConnectFailures::default().report(), None);
    }

    #[test]
    fn tallies_merge_counts_and_latencies() {
        let mut a = Tally::new();
        a.count(Outcome::Committed, Duration::from_millis(2));
        a.count(Outcome::Aborted, Duration::from_millis(50));
        let mut b = Tally::new();
        b.count(Outcome::Committed, Duration::from_millis(4));
        b.count(Outcome::Unknown, Duration::from_secs(15));
        a.merge(b);
        assert_eq!((a.committed, a.aborted, a.unknown), (2, 1, 1));
        assert_eq!(a.latency_us.len(), 2, "only committed txns are timed");
        assert!((3990..=4010).contains(&a.latency_us.max()));
    }
}
