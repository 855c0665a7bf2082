//! The CPU model's calibration (`causeway bench --calibrate`): for every registered
//! protocol, the node CPU time a real local cluster spends per committed transaction,
//! beside what the simulator's model charges for the same workload, and one fit of the
//! model's constants for every protocol together.
//!
//! What this module owns is the arithmetic, not the runs (the CLI starts the clusters and
//! the simulator): the workload each protocol is calibrated on ([`config`]), the
//! simulator's figures per transaction ([`Features::of`]), the model's prediction
//! ([`predict_us`]) and the fit ([`fit`]), a non-negative least squares on relative
//! errors, exact over every subset of the constants (seven of them: 127 subsets).
//!
//! The simulator's figures are split into what the load causes and what time causes: a
//! second, idle run of the same cluster gives the inputs per second that come without
//! load (timers, heartbeats, replication of nothing), and those are spread over the real
//! cluster's throughput, not the simulator's, since the real cluster ran them at its own
//! rate for its own number of transactions.

use causeway_sim::cpu::{CpuModel, CpuTally};
use causeway_sim::{FaultSel, ObjectMix, SimConfig};
use serde::{Deserialize, Serialize};

/// The band every protocol's ratio (model over real) must stay in.
pub const RATIO_MIN: f64 = 0.75;
pub const RATIO_MAX: f64 = 1.33;
/// Round trip between every pair of DCs of a calibration cluster: short, so that every
/// protocol runs its cores full (a WAN-bound one would measure wake-ups, not work).
pub const RTT_MS: f64 = 2.0;
/// Bytes per written value, as the load driver writes them.
pub const VALUE_BYTES: u32 = 16;
/// How many constants the model prices inputs with.
pub const K: usize = 7;
/// The constants the fit sets, in the order of [`Features::vector`].
pub const CONSTANTS: [&str; K] = [
    "msg_ns",
    "timer_ns",
    "persist_ns",
    "session_ns",
    "byte_ns",
    "op_ns",
    "wake_ns",
];

/// The protocols calibrated on one DC (PrompTCC's setting: §VI runs a single DC).
const ONE_DC: &[&str] = &["promptcc", "promptcc-naive", "wren", "eiger"];
/// The protocols calibrated under partial replication (PaRiS's setting).
const PARTIAL: &[&str] = &["paris", "bpr", "nocc"];

/// The calibration workload of `protocol`: YCSB-B-like transactions of 4 operations over
/// 1,000 LWW registers at Zipf 0.99 on 2 DCs of 2 nodes (3 DCs, each partition in 2, for
/// partial replication), or PrompTCC's 90:10 read-only/write-only mix on one DC of 3 nodes.
pub fn config(protocol: &str, clients_per_dc: u32, duration_ms: u64) -> SimConfig {
    let (dcs, nodes_per_dc, replication_factor) = if ONE_DC.contains(&protocol) {
        (1, 3, None)
    } else if PARTIAL.contains(&protocol) {
        (3, 2, Some(2))
    } else {
        (2, 2, None)
    };
    let one_dc = dcs == 1;
    SimConfig {
        protocol: protocol.to_string(),
        dcs,
        nodes_per_dc,
        partitions: nodes_per_dc * 4,
        replication_factor,
        clients_per_dc,
        keys: 1_000,
        zipf: 0.99,
        read_ratio: 0.95,
        read_only_ratio: if one_dc { 0.9 } else { 0.0 },
        write_only_ratio: if one_dc { 0.1 } else { 0.0 },
        txn_ops: 4,
        objects: ObjectMix::Lww,
        value_bytes: VALUE_BYTES,
        barrier_ratio: Some(0.0),
        migrate_ratio: Some(0.0),
        duration_ms,
        quiesce_ms: 200,
        faults: FaultSel::None,
        think_time_ns: 0,
        inter_dc_one_way_ms: Some(crate::experiment::uniform_wan(
            usize::from(dcs),
            RTT_MS / 2.0,
        )),
        allow_unchecked: true,
        cpu: CpuModel {
            enabled: true,
            // Every node of a calibration cluster runs on the one host.
            host_nodes: u32::from(dcs) * nodes_per_dc,
            ..CpuModel::default()
        },
        ..SimConfig::default()
    }
}

/// What the model charges per committed transaction of the real cluster, by constant.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Features {
    pub messages: f64,
    pub timers: f64,
    pub persisted: f64,
    pub session_events: f64,
    pub bytes: f64,
    pub work: f64,
    /// Inputs that woke an idle node, each counted once per node process of the host
    /// (absent from calibrations recorded before the model priced wake-ups).
    #[serde(default)]
    pub wakes: f64,
}

impl Features {
    /// The load's inputs per simulated transaction plus the idle inputs per second spread
    /// over the real throughput. `loaded` and `idle` cover the same virtual time.
    pub fn of(
        loaded: &CpuTally,
        idle: &CpuTally,
        sim_committed: u64,
        seconds: f64,
        real_txn_per_s: f64,
    ) -> Features {
        assert!(sim_committed > 0 && seconds > 0.0 && real_txn_per_s > 0.0);
        let part = |l: u64, i: u64| {
            let load = l.saturating_sub(i) as f64 / sim_committed as f64;
            load + i as f64 / seconds / real_txn_per_s
        };
        Features {
            messages: part(loaded.messages, idle.messages),
            timers: part(loaded.timers, idle.timers),
            persisted: part(loaded.persisted, idle.persisted),
            session_events: part(loaded.session_events, idle.session_events),
            bytes: part(loaded.bytes, idle.bytes),
            work: part(loaded.work, idle.work),
            wakes: part(loaded.wakes, idle.wakes),
        }
    }

    /// The idle run's inputs per second of virtual time.
    pub fn per_second(idle: &CpuTally, seconds: f64) -> Features {
        assert!(seconds > 0.0);
        let r = |n: u64| n as f64 / seconds;
        Features {
            messages: r(idle.messages),
            timers: r(idle.timers),
            persisted: r(idle.persisted),
            session_events: r(idle.session_events),
            bytes: r(idle.bytes),
            work: r(idle.work),
            wakes: r(idle.wakes),
        }
    }

    fn vector(&self) -> [f64; K] {
        [
            self.messages,
            self.timers,
            self.persisted,
            self.session_events,
            self.bytes,
            self.work,
            self.wakes,
        ]
    }
}

/// The model's constants in the order of [`CONSTANTS`], in ns.
pub fn constants(m: &CpuModel) -> [u64; K] {
    [
        m.msg_ns,
        m.timer_ns,
        m.persist_ns,
        m.session_ns,
        m.byte_ns,
        m.op_ns,
        m.wake_ns,
    ]
}

/// `base` with the constants `c` (in the order of [`CONSTANTS`]).
pub fn with_constants(base: &CpuModel, c: [u64; K]) -> CpuModel {
    CpuModel {
        msg_ns: c[0],
        timer_ns: c[1],
        persist_ns: c[2],
        session_ns: c[3],
        byte_ns: c[4],
        op_ns: c[5],
        wake_ns: c[6],
        ..base.clone()
    }
}

/// What the model charges per transaction, in µs.
pub fn predict_us(m: &CpuModel, f: &Features) -> f64 {
    let c = constants(m);
    f.vector()
        .iter()
        .zip(c)
        .map(|(x, ns)| x * ns as f64)
        .sum::<f64>()
        / 1e3
}

/// One protocol's calibration: the real cluster's CPU per transaction and the simulator's
/// figures for the same workload, and the same for the idle cluster per second.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Sample {
    pub protocol: String,
    pub real_us_per_txn: f64,
    pub real_txn_per_s: f64,
    pub features: Features,
    /// The idle cluster's CPU per second (every node together).
    pub real_idle_us_per_s: f64,
    /// The idle simulated cluster's inputs per second.
    pub idle_features: Features,
}

impl Sample {
    /// The model's figure over the real one, per transaction under load.
    pub fn ratio(&self, m: &CpuModel) -> f64 {
        predict_us(m, &self.features) / self.real_us_per_txn
    }

    /// The same for the idle cluster, per second.
    pub fn idle_ratio(&self, m: &CpuModel) -> f64 {
        predict_us(m, &self.idle_features) / self.real_idle_us_per_s
    }
}

/// The constants (ns, in the order of [`CONSTANTS`]) that minimize the sum of squared
/// relative errors over `samples`, loaded and idle, none negative: every subset of
/// constants is solved by least squares, and the best solution with no negative constant
/// wins. The idle rows pin what a quiet cluster's ticks cost, so the loaded rows do not
/// pass it off as per-transaction work.
///
/// `held` keeps some constants at given values (ns) and fits the others around them.
pub fn fit(samples: &[Sample], held: [Option<u64>; K]) -> Option<[u64; K]> {
    let held_us = held.map(|h| h.map(|ns| ns as f64 / 1e3));
    let row = |f: &Features, y: f64| {
        let x = f.vector();
        let fixed: f64 = x
            .iter()
            .zip(held_us)
            .filter_map(|(x, h)| h.map(|b| x * b))
            .sum();
        (x.map(|x| x / y), 1.0 - fixed / y)
    };
    let loaded = samples
        .iter()
        .filter(|s| s.real_us_per_txn > 0.0)
        .map(|s| row(&s.features, s.real_us_per_txn));
    let idle = samples
        .iter()
        .filter(|s| s.real_idle_us_per_s > 0.0)
        .map(|s| row(&s.idle_features, s.real_idle_us_per_s));
    let rows: Vec<([f64; K], f64)> = loaded.chain(idle).collect();
    let free: u32 = (0..K).filter(|i| held[*i].is_none()).map(|i| 1 << i).sum();
    let mut best: Option<(f64, [f64; K])> = None;
    for subset in (1u32..(1 << K)).filter(|s| s & !free == 0) {
        let Some(beta) = solve_subset(&rows, subset) else {
            continue;
        };
        if beta.iter().any(|b| *b < 0.0) {
            continue;
        }
        let err = residual(&rows, &beta);
        if best.as_ref().is_none_or(|(e, _)| err < *e) {
            best = Some((err, beta));
        }
    }
    // β is in µs per unit: the model keeps ns.
    let mut c = best?.1.map(|b| (b * 1e3).round() as u64);
    for (c, h) in c.iter_mut().zip(held) {
        if let Some(h) = h {
            *c = h;
        }
    }
    Some(c)
}

/// What the shipped fit holds: bytes and work at physical values (a copy and a decode
/// per byte, a map lookup and an apply per unit). At the calibration's scale both move
/// with the message counts, and fitted freely they take over the messages' cost (a
/// free fit gave 170 ns per byte and nothing per message).
pub const HELD: [Option<u64>; K] = [None, None, None, None, Some(2), Some(500), None];

fn residual(rows: &[([f64; K], f64)], beta: &[f64; K]) -> f64 {
    rows.iter()
        .map(|(x, y)| {
            let p: f64 = x.iter().zip(beta).map(|(a, b)| a * b).sum();
            (p - y).powi(2)
        })
        .sum()
}

/// Least squares over the constants in `subset` (a bit per constant), the others zero;
/// `None` when the normal equations are singular.
fn solve_subset(rows: &[([f64; K], f64)], subset: u32) -> Option<[f64; K]> {
    let idx: Vec<usize> = (0..K).filter(|i| subset & (1 << i) != 0).collect();
    let k = idx.len();
    // Normal equations [AᵀA | Aᵀy], solved by Gaussian elimination with pivoting.
    let mut m = vec![vec![0.0; k + 1]; k];
    for (x, y) in rows {
        for (r, &i) in idx.iter().enumerate() {
            for (c, &j) in idx.iter().enumerate() {
                m[r][c] += x[i] * x[j];
            }
            m[r][k] += x[i] * y;
        }
    }
    for col in 0..k {
        let pivot = (col..k).max_by(|a, b| m[*a][col].abs().total_cmp(&m[*b][col].abs()))?;
        if m[pivot][col].abs() < 1e-12 {
            return None;
        }
        m.swap(col, pivot);
        let pivot_row = m[col].clone();
        for (r, row) in m.iter_mut().enumerate() {
            if r != col {
                let f = row[col] / pivot_row[col];
                for (x, p) in row.iter_mut().zip(&pivot_row).skip(col) {
                    *x -= f * p;
                }
            }
        }
    }
    let mut beta = [0.0; K];
    for (r, &i) in idx.iter().enumerate() {
        beta[i] = m[r][k] / m[r][r];
    }
    Some(beta)
}

/// The recorded calibration the shipped constants were fitted on (`bench --calibrate
/// --quick --json docs/results/calibrate.json`).
#[derive(Debug, Serialize, Deserialize)]
pub struct Recorded {
    pub samples: Vec<Sample>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(protocol: &str, f: [f64; 6], real: f64) -> Sample {
        let [messages, timers, persisted, session_events, bytes, work] = f;
        Sample {
            protocol: protocol.into(),
            real_us_per_txn: real,
            real_txn_per_s: 1000.0,
            features: Features {
                messages,
                timers,
                persisted,
                session_events,
                bytes,
                work,
                wakes: 0.0,
            },
            real_idle_us_per_s: 0.0,
            idle_features: Features::default(),
        }
    }

    /// Figures of seven made-up protocols, in the order of [`CONSTANTS`].
    const ROWS: [[f64; 6]; 7] = [
        [10.0, 1.0, 4.0, 8.0, 900.0, 6.0],
        [20.0, 0.5, 8.0, 8.0, 2000.0, 12.0],
        [6.0, 2.0, 1.0, 12.0, 500.0, 4.0],
        [14.0, 0.1, 6.0, 10.0, 1500.0, 30.0],
        [9.0, 3.0, 3.0, 8.0, 700.0, 9.0],
        [30.0, 0.2, 2.0, 16.0, 4000.0, 3.0],
        [12.0, 1.0, 5.0, 9.0, 800.0, 20.0],
    ];

    /// Samples whose real cost is exactly what the constants `truth` (µs) charge.
    fn made_by(truth: [f64; 6], rows: &[[f64; 6]]) -> Vec<Sample> {
        rows.iter()
            .enumerate()
            .map(|(i, f)| {
                let real = f.iter().zip(truth).map(|(x, b)| x * b).sum();
                sample(&format!("p{i}"), *f, real)
            })
            .collect()
    }

    /// Data made by known constants gives them back; a constant the data would make
    /// negative is held at zero.
    #[test]
    fn the_fit_recovers_the_constants_that_made_the_data() {
        let truth = [3.0, 0.0, 1.0, 2.0, 0.002, 0.5]; // µs per unit
        let samples = made_by(truth, &ROWS);
        let c = fit(&samples, [None; K]).expect("a fit");
        let want = truth.map(|b| (b * 1e3).round() as u64);
        for (got, want) in c.iter().zip(want) {
            assert!(got.abs_diff(want) <= want / 100 + 1, "{c:?} vs {want:?}");
        }
        let m = with_constants(&CpuModel::default(), c);
        for s in &samples {
            assert!((s.ratio(&m) - 1.0).abs() < 0.01, "{}", s.protocol);
        }
    }

    /// Idle inputs are spread over the real throughput, load inputs over the simulated
    /// transactions.
    #[test]
    fn idle_inputs_count_per_real_transaction() {
        let loaded = CpuTally {
            messages: 1_100,
            timers: 200,
            ..CpuTally::default()
        };
        let idle = CpuTally {
            messages: 100,
            timers: 200,
            ..CpuTally::default()
        };
        let f = Features::of(&loaded, &idle, 100, 2.0, 50.0);
        // 1000 load messages over 100 txns, plus 100 idle over 2 s at 50 txn/s.
        assert!((f.messages - (10.0 + 1.0)).abs() < 1e-9, "{f:?}");
        assert!((f.timers - 2.0).abs() < 1e-9, "{f:?}");
    }

    /// Every registered protocol has a calibration workload the simulator takes.
    #[test]
    fn every_protocol_has_a_valid_calibration_config() {
        for p in causeway_protocols::PROTOCOLS {
            let cfg = config(p, 4, 1_000);
            cfg.validate().unwrap_or_else(|e| panic!("{p}: {e}"));
        }
    }

    /// Holding a constant fits the others around it.
    #[test]
    fn a_held_constant_stays_and_the_others_fit_around_it() {
        let truth = [3.0, 1.0, 0.0, 2.0, 0.002, 0.5];
        let samples = made_by(truth, &ROWS[..5]);
        let c = fit(&samples, [None, None, None, None, Some(2), Some(500), None]).expect("a fit");
        assert_eq!((c[4], c[5]), (2, 500));
        assert!(
            c[0].abs_diff(3_000) <= 30 && c[3].abs_diff(2_000) <= 20,
            "{c:?}"
        );
    }

    /// The shipped constants are the fit of the recorded calibration (`--calibrate
    /// --calibrate-from docs/results/calibrate.json --fit` prints it) within a tenth (a
    /// wake-up depends on the costs before it, so the fit is a fixed point that the
    /// re-simulated figures move by a few per cent), the record covers every registered
    /// protocol, and every protocol is within the band.
    #[test]
    fn the_shipped_model_is_the_fit_of_the_recorded_calibration() {
        let text = include_str!("../../../docs/results/calibrate.json");
        let rec: Recorded = serde_json::from_str(text).expect("calibrate.json");
        let model = CpuModel::default();
        let fitted = fit(&rec.samples, HELD).expect("a fit");
        for (name, (shipped, fitted)) in CONSTANTS.iter().zip(constants(&model).iter().zip(fitted))
        {
            assert!(
                shipped.abs_diff(fitted) <= fitted / 10 + 1,
                "{name}: {shipped} vs {fitted}"
            );
        }
        for p in causeway_protocols::PROTOCOLS {
            let s = rec.samples.iter().find(|s| s.protocol == *p);
            let s = s.unwrap_or_else(|| panic!("{p}: not in docs/results/calibrate.json"));
            let r = s.ratio(&model);
            assert!(
                (RATIO_MIN..=RATIO_MAX).contains(&r),
                "{p}: ratio {r:.2} outside {RATIO_MIN}-{RATIO_MAX}"
            );
        }
    }
}
