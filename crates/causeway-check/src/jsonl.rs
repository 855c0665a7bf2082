//! The JSON-lines form of a [`History`] (docs/HISTORY.md): one object per line, a
//! transaction (`"type":"txn"`), a completed uniform barrier (`"type":"barrier"`) or a
//! final read taken after healing (`"type":"final"`), or a write's place in its key's version
//! order (`"type":"overwrite"`, [`History::overwrites`]; absent in older files).
//! Keys and byte values are written as text with `\xNN` escapes for non-printable bytes
//! (`causeway_core::ids::escape_bytes`), op ids as `s<session>.t<seq>.o<index>`.

use crate::history::{BarrierRecord, FinalRead, HOp, History, Outcome, TxnRecord};
use causeway_core::ids::{escape_bytes, unescape_bytes};
use causeway_core::{DcId, Key, ObjType, ObjValue, OpId, SessionId, TxnId, TxnKind, Update};
use serde::{Deserialize, Serialize};
use std::io::{BufRead, Write};

/// Longest line `read_history` accepts, in bytes.
pub const LINE_LEN_MAX: usize = 64 << 20;
/// Most lines `read_history` accepts.
pub const LINES_MAX: usize = 10_000_000;

#[derive(Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "lowercase")]
enum Line {
    Txn(JTxn),
    Barrier(JBarrier),
    Final(JFinal),
    Overwrite(JOverwrite),
}

/// `id` directly overwrote `overwrote` at its key's master (`null`: the initial value).
#[derive(Serialize, Deserialize)]
struct JOverwrite {
    id: String,
    overwrote: Option<String>,
}

#[derive(Serialize, Deserialize)]
struct JBarrier {
    session: u64,
    dc: u16,
    start_ns: u64,
    end_ns: u64,
    txns: usize,
}

#[derive(Serialize, Deserialize)]
struct JTxn {
    id: String,
    session: u64,
    dc: u16,
    kind: String,
    /// The transaction's type; absent for ad-hoc transactions and in older files.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    label: Option<String>,
    start_ns: u64,
    end_ns: u64,
    outcome: String,
    ops: Vec<JOp>,
}

#[derive(Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "lowercase")]
enum JOp {
    Read {
        key: String,
        obj: String,
        value: JValue,
        observed: Vec<String>,
    },
    Write {
        key: String,
        update: JUpdate,
        id: String,
    },
}

#[derive(Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
enum JValue {
    Lww(Option<String>),
    Counter(i64),
    Set(Vec<String>),
    Mvreg(Vec<String>),
    /// `{"hash": [["field", "value"], ...]}`, in field order.
    Hash(Vec<(String, String)>),
    /// `{"list": ["head", ..., "tail"]}`.
    List(Vec<String>),
    /// `{"zset": [["member", score bits], ...]}`, in member order; a score is its
    /// `f64::to_bits` (JSON has no infinities).
    Zset(Vec<(String, u64)>),
}

#[derive(Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
enum JUpdate {
    Assign(String),
    Increment(i64),
    Add(String),
    Remove(String),
    Mvassign(String),
    /// `{"registerincrement": 5}`: an `INCR` of a register holding an integer.
    Registerincrement(i64),
    /// `{"part": {"key_type": "set", "update": {"assign": "v"}}}`: a write of another type
    /// than the key's own, on a key that showed nothing (`causeway_core::crdt`).
    Part {
        key_type: String,
        update: Box<JUpdate>,
    },
    /// `{"hashset": {"field": "f", "value": "v"}}`: an `HSET` of one field.
    Hashset {
        field: String,
        value: String,
    },
    /// `{"hashincrement": {"field": "f", "delta": 1}}`: an `HINCRBY`.
    Hashincrement {
        field: String,
        delta: i64,
    },
    /// `{"hashremove": {"field": "f"}}`: an `HDEL` of one field.
    Hashremove {
        field: String,
    },
    /// `{"listpush": {"left": true, "values": ["a"]}}`: an `LPUSH` (`RPUSH`: not left).
    Listpush {
        left: bool,
        values: Vec<String>,
    },
    /// `{"listpop": {"left": true, "count": 1}}`: an `LPOP` (`RPOP`: not left).
    Listpop {
        left: bool,
        count: u64,
    },
    /// `{"zadd": {"member": "m", "score": bits}}`: a `ZADD` of one member (`f64::to_bits`).
    Zadd {
        member: String,
        score: u64,
    },
    /// `{"zincrement": {"member": "m", "delta": bits}}`: a `ZINCRBY` (`f64::to_bits`).
    Zincrement {
        member: String,
        delta: u64,
    },
    /// `{"zremove": {"members": ["m"]}}`: a `ZREM`.
    Zremove {
        members: Vec<String>,
    },
}

#[derive(Serialize, Deserialize)]
struct JFinal {
    dc: u16,
    key: String,
    obj: String,
    value: JValue,
    observed: Vec<String>,
}

fn text(bytes: &[u8]) -> String {
    escape_bytes(bytes)
}

fn bytes(text: &str) -> Result<Vec<u8>, String> {
    unescape_bytes(text).ok_or_else(|| format!("malformed escape in '{text}'"))
}

fn value_to_json(value: &ObjValue) -> JValue {
    let list = |vs: &[Vec<u8>]| vs.iter().map(|v| text(v)).collect();
    match value {
        ObjValue::Lww(v) => JValue::Lww(v.as_deref().map(text)),
        ObjValue::Counter(c) => JValue::Counter(*c),
        ObjValue::Set(vs) => JValue::Set(list(vs)),
        ObjValue::MvReg(vs) => JValue::Mvreg(list(vs)),
        ObjValue::Hash(pairs) => {
            JValue::Hash(pairs.iter().map(|(f, v)| (text(f), text(v))).collect())
        }
        ObjValue::List(vs) => JValue::List(list(vs)),
        ObjValue::ZSet(pairs) => JValue::Zset(pairs.iter().map(|(m, s)| (text(m), *s)).collect()),
    }
}

fn value_from_json(value: JValue) -> Result<ObjValue, String> {
    let list = |vs: Vec<String>| vs.iter().map(|v| bytes(v)).collect::<Result<Vec<_>, _>>();
    Ok(match value {
        JValue::Lww(v) => ObjValue::Lww(v.as_deref().map(bytes).transpose()?),
        JValue::Counter(c) => ObjValue::Counter(c),
        JValue::Set(vs) => ObjValue::Set(list(vs)?),
        JValue::Mvreg(vs) => ObjValue::MvReg(list(vs)?),
        JValue::Hash(pairs) => ObjValue::Hash(
            pairs
                .iter()
                .map(|(f, v)| Ok((bytes(f)?, bytes(v)?)))
                .collect::<Result<Vec<_>, String>>()?,
        ),
        JValue::List(vs) => ObjValue::List(list(vs)?),
        JValue::Zset(pairs) => ObjValue::ZSet(
            pairs
                .iter()
                .map(|(m, s)| Ok((bytes(m)?, *s)))
                .collect::<Result<Vec<_>, String>>()?,
        ),
    })
}

fn update_to_json(update: &Update) -> JUpdate {
    match update {
        Update::Assign(v) => JUpdate::Assign(text(v)),
        Update::Increment(d) => JUpdate::Increment(*d),
        Update::Add(v) => JUpdate::Add(text(v)),
        Update::Remove(v) => JUpdate::Remove(text(v)),
        Update::MvAssign(v) => JUpdate::Mvassign(text(v)),
        Update::RegisterIncrement(d) => JUpdate::Registerincrement(*d),
        Update::Part { key_type, update } => JUpdate::Part {
            key_type: key_type.name().to_string(),
            update: Box::new(update_to_json(update)),
        },
        Update::HashSet { field, value } => JUpdate::Hashset {
            field: text(field),
            value: text(value),
        },
        Update::HashIncrement { field, delta } => JUpdate::Hashincrement {
            field: text(field),
            delta: *delta,
        },
        Update::HashRemove { field } => JUpdate::Hashremove { field: text(field) },
        Update::ListPush { left, values } => JUpdate::Listpush {
            left: *left,
            values: values.iter().map(|v| text(v)).collect(),
        },
        Update::ListPop { left, count } => JUpdate::Listpop {
            left: *left,
            count: *count,
        },
        Update::ZAdd { member, score } => JUpdate::Zadd {
            member: text(member),
            score: *score,
        },
        Update::ZIncrement { member, delta } => JUpdate::Zincrement {
            member: text(member),
            delta: *delta,
        },
        Update::ZRemove { members } => JUpdate::Zremove {
            members: members.iter().map(|m| text(m)).collect(),
        },
    }
}

fn update_from_json(update: JUpdate) -> Result<Update, String> {
    Ok(match update {
        JUpdate::Assign(v) => Update::Assign(bytes(&v)?),
        JUpdate::Increment(d) => Update::Increment(d),
        JUpdate::Add(v) => Update::Add(bytes(&v)?),
        JUpdate::Remove(v) => Update::Remove(bytes(&v)?),
        JUpdate::Mvassign(v) => Update::MvAssign(bytes(&v)?),
        JUpdate::Registerincrement(d) => Update::RegisterIncrement(d),
        JUpdate::Part { key_type, update } => Update::Part {
            key_type: obj_type(&key_type)?,
            update: Box::new(update_from_json(*update)?),
        },
        JUpdate::Hashset { field, value } => Update::HashSet {
            field: bytes(&field)?,
            value: bytes(&value)?,
        },
        JUpdate::Hashincrement { field, delta } => Update::HashIncrement {
            field: bytes(&field)?,
            delta,
        },
        JUpdate::Hashremove { field } => Update::HashRemove {
            field: bytes(&field)?,
        },
        JUpdate::Listpush { left, values } => Update::ListPush {
            left,
            values: values.iter().map(|v| bytes(v)).collect::<Result<_, _>>()?,
        },
        JUpdate::Listpop { left, count } => Update::ListPop { left, count },
        JUpdate::Zadd { member, score } => Update::ZAdd {
            member: bytes(&member)?,
            score,
        },
        JUpdate::Zincrement { member, delta } => Update::ZIncrement {
            member: bytes(&member)?,
            delta,
        },
        JUpdate::Zremove { members } => Update::ZRemove {
            members: members.iter().map(|m| bytes(m)).collect::<Result<_, _>>()?,
        },
    })
}

fn op_id(text: &str) -> Result<OpId, String> {
    OpId::parse(text).ok_or_else(|| format!("malformed op id '{text}' (want s1.t2.o3)"))
}

fn obj_type(text: &str) -> Result<ObjType, String> {
    ObjType::parse(text).ok_or_else(|| format!("unknown object type '{text}'"))
}

fn txn_id(text: &str) -> Result<TxnId, String> {
    // A txn id is an op id without its `.oN` suffix.
    op_id(&format!("{text}.o0"))
        .map(|id| id.txn)
        .map_err(|_| format!("malformed txn id '{text}' (want s1.t2)"))
}

fn outcome_name(outcome: Outcome) -> &'static str {
    match outcome {
        Outcome::Committed => "committed",
        Outcome::Aborted => "aborted",
        Outcome::Unknown => "unknown",
    }
}

fn outcome_parse(text: &str) -> Result<Outcome, String> {
    match text {
        "committed" => Ok(Outcome::Committed),
        "aborted" => Ok(Outcome::Aborted),
        "unknown" => Ok(Outcome::Unknown),
        _ => Err(format!("unknown outcome '{text}'")),
    }
}

fn kind_parse(text: &str) -> Result<TxnKind, String> {
    match text {
        "causal" => Ok(TxnKind::Causal),
        "strong" => Ok(TxnKind::Strong),
        _ => Err(format!("unknown txn kind '{text}'")),
    }
}

fn op_to_json(op: &HOp) -> JOp {
    match op {
        HOp::Read {
            key,
            obj,
            value,
            observed,
        } => JOp::Read {
            key: text(&key.0),
            obj: obj.name().into(),
            value: value_to_json(value),
            observed: observed.iter().map(|id| id.to_string()).collect(),
        },
        HOp::Write { key, update, id } => JOp::Write {
            key: text(&key.0),
            update: update_to_json(update),
            id: id.to_string(),
        },
    }
}

fn op_from_json(op: JOp) -> Result<HOp, String> {
    Ok(match op {
        JOp::Read {
            key,
            obj,
            value,
            observed,
        } => HOp::Read {
            key: Key(bytes(&key)?),
            obj: obj_type(&obj)?,
            value: value_from_json(value)?,
            observed: observed
                .iter()
                .map(|t| op_id(t))
                .collect::<Result<_, _>>()?,
        },
        JOp::Write { key, update, id } => HOp::Write {
            key: Key(bytes(&key)?),
            update: update_from_json(update)?,
            id: op_id(&id)?,
        },
    })
}

fn txn_to_json(t: &TxnRecord) -> JTxn {
    JTxn {
        id: t.id.to_string(),
        session: t.session.0,
        dc: t.dc.0,
        kind: match t.kind {
            TxnKind::Causal => "causal".into(),
            TxnKind::Strong => "strong".into(),
        },
        label: t.label.clone(),
        start_ns: t.start_ns,
        end_ns: t.end_ns,
        outcome: outcome_name(t.outcome).into(),
        ops: t.ops.iter().map(op_to_json).collect(),
    }
}

fn txn_from_json(t: JTxn) -> Result<TxnRecord, String> {
    Ok(TxnRecord {
        id: txn_id(&t.id)?,
        session: SessionId(t.session),
        dc: DcId(t.dc),
        kind: kind_parse(&t.kind)?,
        label: t.label,
        start_ns: t.start_ns,
        end_ns: t.end_ns,
        outcome: outcome_parse(&t.outcome)?,
        ops: t
            .ops
            .into_iter()
            .map(op_from_json)
            .collect::<Result<_, _>>()?,
    })
}

fn final_to_json(f: &FinalRead) -> JFinal {
    JFinal {
        dc: f.dc.0,
        key: text(&f.key.0),
        obj: f.obj.name().into(),
        value: value_to_json(&f.value),
        observed: f.observed.iter().map(|id| id.to_string()).collect(),
    }
}

fn final_from_json(f: JFinal) -> Result<FinalRead, String> {
    Ok(FinalRead {
        dc: DcId(f.dc),
        key: Key(bytes(&f.key)?),
        obj: obj_type(&f.obj)?,
        value: value_from_json(f.value)?,
        observed: f
            .observed
            .iter()
            .map(|t| op_id(t))
            .collect::<Result<_, _>>()?,
    })
}

fn barrier_to_json(b: &BarrierRecord) -> JBarrier {
    JBarrier {
        session: b.session.0,
        dc: b.dc.0,
        start_ns: b.start_ns,
        end_ns: b.end_ns,
        txns: b.txns,
    }
}

fn barrier_from_json(b: JBarrier) -> BarrierRecord {
    BarrierRecord {
        session: SessionId(b.session),
        dc: DcId(b.dc),
        start_ns: b.start_ns,
        end_ns: b.end_ns,
        txns: b.txns,
    }
}

/// Writes `history` as JSON lines: the transactions, the barriers, the final reads, then
/// the version order.
pub fn write_history(history: &History, out: &mut impl Write) -> std::io::Result<()> {
    let barriers = history.barriers.iter();
    let lines = history
        .txns
        .iter()
        .map(|t| Line::Txn(txn_to_json(t)))
        .chain(barriers.map(|b| Line::Barrier(barrier_to_json(b))))
        .chain(history.finals.iter().map(|f| Line::Final(final_to_json(f))))
        .chain(history.overwrites.iter().map(|(id, prev)| {
            Line::Overwrite(JOverwrite {
                id: id.to_string(),
                overwrote: prev.map(|p| p.to_string()),
            })
        }));
    for line in lines {
        serde_json::to_writer(&mut *out, &line)?;
        out.write_all(b"\n")?;
    }
    Ok(())
}

/// Reads a history written by [`write_history`] (or by hand); blank lines are skipped.
/// Errors name the line number.
pub fn read_history(input: impl BufRead) -> Result<History, String> {
    let mut history = History::default();
    for (i, line) in input.lines().enumerate() {
        let at = i + 1;
        if at > LINES_MAX {
            return Err(format!("more than {LINES_MAX} lines"));
        }
        let line = line.map_err(|e| format!("line {at}: {e}"))?;
        if line.len() > LINE_LEN_MAX {
            return Err(format!("line {at} is longer than {LINE_LEN_MAX} bytes"));
        }
        if line.trim().is_empty() {
            continue;
        }
        let parsed: Line = serde_json::from_str(&line).map_err(|e| format!("line {at}: {e}"))?;
        match parsed {
            Line::Txn(t) => history
                .txns
                .push(txn_from_json(t).map_err(|e| format!("line {at}: {e}"))?),
            Line::Barrier(b) => history.barriers.push(barrier_from_json(b)),
            Line::Final(f) => history
                .finals
                .push(final_from_json(f).map_err(|e| format!("line {at}: {e}"))?),
            Line::Overwrite(o) => {
                let id = op_id(&o.id).map_err(|e| format!("line {at}: {e}"))?;
                let prev = o.overwrote.as_deref().map(op_id).transpose();
                let prev = prev.map_err(|e| format!("line {at}: {e}"))?;
                if history.overwrites.insert(id, prev).is_some() {
                    return Err(format!("line {at}: a second overwrite record for {id}"));
                }
            }
        }
    }
    Ok(history)
}
