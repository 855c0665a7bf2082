//! Runs: how [`crate::FjallLog`] stores records. One `log` entry holds a run of records
//! appended together (a group commit's, cut at [`RUN_BYTES_MAX`]), so a batch of records
//! costs the LSM engine one memtable insertion, not one per record: under `redis-benchmark`
//! SET the per-record insertions (a skiplist search each) were a tenth of a node's
//! instructions per request.
//!
//! A run's key is its first lsn (8 bytes, big-endian) and a tag byte [`RUN_TAG`]; its value
//! is the records' frames, each `lsn` (8 bytes, big-endian), `len` (4 bytes, big-endian)
//! and the record's bytes, in lsn order. A directory written before runs holds one record
//! per entry under its bare 8-byte lsn: [`decode_entry`] reads both, and keys of either
//! kind sort in lsn order (a run's key sorts after a bare key of its first lsn, which
//! cannot exist beside it: lsns are never reused).

use causeway_core::Lsn;

/// What is wrong with a damaged entry.
type Damage = String;

/// Most bytes of frames one run holds; a record bigger than that is a run alone.
pub const RUN_BYTES_MAX: usize = 1 << 20;
/// The byte after the lsn in a run's key.
pub const RUN_TAG: u8 = 1;
/// A frame's header: lsn and length.
const FRAME_HEADER: usize = 12;

/// The key of a run whose first record is `first`.
pub fn run_key(first: Lsn) -> [u8; 9] {
    let mut key = [RUN_TAG; 9];
    key[..8].copy_from_slice(&first.to_be_bytes());
    key
}

/// The largest key of any entry whose first lsn is at most `lsn` (a bare key or a run's).
pub fn key_bound(lsn: Lsn) -> [u8; 9] {
    let mut key = [u8::MAX; 9];
    key[..8].copy_from_slice(&lsn.to_be_bytes());
    key
}

/// Appends a frame of `record` at `lsn` to `run`.
pub fn put_frame(run: &mut Vec<u8>, lsn: Lsn, record: &[u8]) {
    let len = u32::try_from(record.len()).expect("a record is under 4 GiB (BATCH_BYTES_MAX)");
    run.extend_from_slice(&lsn.to_be_bytes());
    run.extend_from_slice(&len.to_be_bytes());
    run.extend_from_slice(record);
}

/// The records of one `log` entry, in lsn order: a run's frames, or the one record of a
/// bare key.
pub fn decode_entry<'v>(key: &[u8], value: &'v [u8]) -> Result<Vec<(Lsn, &'v [u8])>, Damage> {
    match key.len() {
        8 => Ok(vec![(lsn_of(key), value)]),
        9 if key[8] == RUN_TAG => {
            let records = frames(value)?;
            match records.first() {
                Some((first, _)) if *first == lsn_of(key) => Ok(records),
                _ => Err(corrupt("a run's first record is not its key's lsn")),
            }
        }
        n => Err(corrupt(&format!("a log key of {n} bytes"))),
    }
}

/// The frames of a run's value.
fn frames(mut value: &[u8]) -> Result<Vec<(Lsn, &[u8])>, Damage> {
    let mut out: Vec<(Lsn, &[u8])> = Vec::new();
    while !value.is_empty() {
        if value.len() < FRAME_HEADER {
            return Err(corrupt("a run ends inside a frame header"));
        }
        let lsn = lsn_of(&value[..8]);
        let len = u32::from_be_bytes(value[8..12].try_into().expect("4 bytes")) as usize;
        let rest = &value[FRAME_HEADER..];
        if rest.len() < len {
            return Err(corrupt("a run ends inside a record"));
        }
        if out.last().is_some_and(|(prev, _)| *prev >= lsn) {
            return Err(corrupt("a run's lsns do not ascend"));
        }
        out.push((lsn, &rest[..len]));
        value = &rest[len..];
    }
    Ok(out)
}

fn lsn_of(bytes: &[u8]) -> Lsn {
    Lsn::from_be_bytes(bytes[..8].try_into().expect("8 bytes"))
}

fn corrupt(what: &str) -> Damage {
    format!("corrupt log entry: {what}")
}

/// Records appended and not yet written, framed into runs as they come.
#[derive(Debug, Default)]
pub struct Pending {
    runs: Vec<(Lsn, Vec<u8>)>,
    records: u64,
    bytes: u64,
}

impl Pending {
    /// Frames `record` into the last run, or a new one when it would pass [`RUN_BYTES_MAX`].
    pub fn push(&mut self, lsn: Lsn, record: &[u8]) {
        let frame = FRAME_HEADER + record.len();
        match self.runs.last_mut() {
            Some((_, run)) if run.len() + frame <= RUN_BYTES_MAX => put_frame(run, lsn, record),
            _ => {
                let mut run = Vec::with_capacity(frame.min(RUN_BYTES_MAX));
                put_frame(&mut run, lsn, record);
                self.runs.push((lsn, run));
            }
        }
        self.records += 1;
        self.bytes += record.len() as u64;
    }

    pub fn is_empty(&self) -> bool {
        self.runs.is_empty()
    }

    /// Takes the runs (first lsn and frames), the records and their bytes.
    pub fn take(&mut self) -> (Vec<(Lsn, Vec<u8>)>, u64, u64) {
        let taken = (std::mem::take(&mut self.runs), self.records, self.bytes);
        (self.records, self.bytes) = (0, 0);
        taken
    }

    /// Drops the records below `lsn`.
    pub fn retain_from(&mut self, lsn: Lsn) {
        let (runs, _, _) = self.take();
        for (_, run) in runs {
            for (l, record) in frames(&run).expect("runs this log framed") {
                if l >= lsn {
                    self.push(l, record);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn records(pending: &mut Pending) -> Vec<(Lsn, Vec<u8>)> {
        let (runs, _, _) = pending.take();
        let mut out = Vec::new();
        for (first, run) in runs {
            let decoded = decode_entry(&run_key(first), &run).unwrap();
            out.extend(decoded.into_iter().map(|(l, r)| (l, r.to_vec())));
        }
        out
    }

    #[test]
    fn records_round_trip_through_runs_cut_at_the_byte_limit() {
        let mut p = Pending::default();
        let big = vec![7u8; RUN_BYTES_MAX / 2];
        let expected: Vec<(Lsn, Vec<u8>)> = vec![
            (3, b"a".to_vec()),
            (4, Vec::new()),
            (9, big.clone()),
            (10, big.clone()),
            (11, vec![1; RUN_BYTES_MAX + 5]),
            (12, b"z".to_vec()),
        ];
        for (lsn, r) in &expected {
            p.push(*lsn, r);
        }
        assert_eq!(p.runs.len(), 4, "cut before 10, before 11 and before 12");
        assert!(p.runs.iter().all(|(_, r)| r.len() <= RUN_BYTES_MAX + 17));
        assert_eq!((p.records, p.bytes), (6, 2 * (RUN_BYTES_MAX as u64) + 7));
        assert_eq!(records(&mut p), expected);
        assert!(p.is_empty());
    }

    #[test]
    fn retaining_from_an_lsn_drops_exactly_the_records_below_it() {
        let mut p = Pending::default();
        for lsn in 1..=6 {
            p.push(lsn, &[lsn as u8; 3]);
        }
        p.retain_from(4);
        let kept: Vec<Lsn> = records(&mut p).into_iter().map(|(l, _)| l).collect();
        assert_eq!(kept, vec![4, 5, 6]);
    }

    #[test]
    fn bare_keys_read_as_one_record_and_damage_is_refused() {
        assert_eq!(
            decode_entry(&5u64.to_be_bytes(), b"old").unwrap(),
            vec![(5, &b"old"[..])]
        );
        let mut run = Vec::new();
        put_frame(&mut run, 5, b"xy");
        put_frame(&mut run, 6, b"z");
        let key = run_key(5);
        assert_eq!(decode_entry(&key, &run).unwrap().len(), 2);
        for (bad_key, bad_run, words) in [
            (run_key(4).to_vec(), run.clone(), "first record"),
            (
                key.to_vec(),
                run[..run.len() - 1].to_vec(),
                "inside a record",
            ),
            (key.to_vec(), run[..5].to_vec(), "frame header"),
            (vec![0; 7], run.clone(), "7 bytes"),
            ([&key[..8], &[9]].concat(), run.clone(), "9 bytes"),
        ] {
            let e = decode_entry(&bad_key, &bad_run).unwrap_err();
            assert!(e.contains(words), "{e}");
        }
        let mut descending = Vec::new();
        put_frame(&mut descending, 6, b"a");
        put_frame(&mut descending, 5, b"b");
        let e = decode_entry(&run_key(6), &descending).unwrap_err();
        assert!(e.contains("ascend"), "{e}");
    }

    #[test]
    fn keys_of_both_kinds_sort_in_lsn_order_and_the_bound_covers_them() {
        let mut keys = [
            run_key(300).to_vec(),
            5u64.to_be_bytes().to_vec(),
            run_key(7).to_vec(),
            256u64.to_be_bytes().to_vec(),
        ];
        keys.sort();
        let lsns: Vec<Lsn> = keys.iter().map(|k| lsn_of(k)).collect();
        assert_eq!(lsns, vec![5, 7, 256, 300]);
        assert!(run_key(7).as_slice() <= key_bound(7).as_slice());
        assert!(7u64.to_be_bytes().as_slice() <= key_bound(7).as_slice());
        assert!(run_key(8).as_slice() > key_bound(7).as_slice());
    }
}
