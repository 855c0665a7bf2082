//! The sorted-set commands: `ZADD`, `ZINCRBY`, `ZREM`, `ZSCORE`, `ZMSCORE`, `ZCARD`,
//! `ZCOUNT`, `ZRANK`, `ZREVRANK`, `ZRANGE`, `ZREVRANGE`, `ZRANGEBYSCORE`,
//! `ZREVRANGEBYSCORE`, `ZPOPMIN`, `ZPOPMAX`, on core's sorted set (`crdt::zset`: an
//! add-wins map of member -> score). Each reads the transaction's snapshot, orders its
//! members by (score, member) as Redis does, and writes one update per member it adds or
//! increments and one for all it removes, so concurrent commands resolve by the sorted
//! set's rules (docs/REDIS.md): a `ZADD` of a member is last-writer-wins, `ZINCRBY`s add
//! up, and `ZREM` (and a pop) removes only what it observed.

use crate::reply::Reply;
use crate::session::SessionHandle;
use crate::txn::Tx;
use bytes::Bytes;
use causeway_core::crdt::zset::check_member;
use causeway_core::{Error, Key, ObjType, ObjValue, Update, Value};
use std::cmp::Ordering;

/// A score bound of `ZCOUNT` and `ZRANGEBYSCORE`: a value, exclusive with `(`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Bound {
    pub value: f64,
    pub exclusive: bool,
}

/// `ZADD`'s options.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct AddFlags {
    pub nx: bool,
    pub xx: bool,
    pub gt: bool,
    pub lt: bool,
    pub ch: bool,
    pub incr: bool,
}

/// What `ZRANGE` ranges over.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum RangeBy {
    Index(i64, i64),
    Score(Bound, Bound),
}

/// `ZRANGE`'s arguments (and those of the older forms, which it covers).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Range {
    pub by: RangeBy,
    pub rev: bool,
    /// `LIMIT offset count` (a negative count: all).
    pub limit: Option<(i64, i64)>,
    pub with_scores: bool,
}

/// A sorted-set command with its arguments checked.
#[derive(Clone, Debug, PartialEq)]
pub enum ZSetCmd {
    Add {
        key: Key,
        flags: AddFlags,
        pairs: Vec<(f64, Value)>,
    },
    IncrBy(Key, f64, Value),
    Rem(Key, Vec<Value>),
    Score(Key, Value),
    MScore(Key, Vec<Value>),
    Card(Key),
    Count(Key, Bound, Bound),
    Rank {
        key: Key,
        member: Value,
        rev: bool,
    },
    Range(Key, Range),
    Pop {
        key: Key,
        max: bool,
        count: Option<u64>,
    },
}

// Scores parsed are never NaN, so equality is reflexive.
impl Eq for ZSetCmd {}

/// Whether `name` (upper case) is a sorted-set command.
pub fn is_zset(name: &str) -> bool {
    matches!(
        name,
        "ZADD"
            | "ZINCRBY"
            | "ZREM"
            | "ZSCORE"
            | "ZMSCORE"
            | "ZCARD"
            | "ZCOUNT"
            | "ZRANK"
            | "ZREVRANK"
            | "ZRANGE"
            | "ZREVRANGE"
            | "ZRANGEBYSCORE"
            | "ZREVRANGEBYSCORE"
            | "ZPOPMIN"
            | "ZPOPMAX"
    )
}

fn syntax() -> Reply {
    Reply::err("syntax error")
}

/// A score as Redis reads one: a decimal or exponent float, `inf`, `+inf`, `-inf`; never
/// NaN.
pub fn parse_score(b: &[u8]) -> Option<f64> {
    let text = std::str::from_utf8(b).ok()?;
    if text.is_empty() || text.trim() != text {
        return None;
    }
    let v: f64 = text.parse().ok()?;
    (!v.is_nan()).then_some(v)
}

fn score_arg(b: &Bytes) -> Result<f64, Reply> {
    parse_score(b).ok_or_else(|| Reply::err("value is not a valid float"))
}

/// A score bound: a score, exclusive when it starts with `(`.
pub fn parse_bound(b: &[u8]) -> Option<Bound> {
    let (exclusive, body) = match b.split_first() {
        Some((b'(', rest)) => (true, rest),
        _ => (false, b),
    };
    parse_score(body).map(|value| Bound { value, exclusive })
}

fn bound_arg(b: &Bytes) -> Result<Bound, Reply> {
    parse_bound(b).ok_or_else(|| Reply::err("min or max is not a float"))
}

fn integer(b: &Bytes) -> Result<i64, Reply> {
    crate::parse::parse_i64(b).ok_or_else(|| Reply::err("value is not an integer or out of range"))
}

/// A score as Redis 7 prints one: the shortest text that reads back as it, `inf` and
/// `-inf`, an exponent past 17 digits.
pub fn format_score(v: f64) -> String {
    if v.is_infinite() {
        return if v > 0.0 { "inf" } else { "-inf" }.into();
    }
    let abs = v.abs();
    if abs != 0.0 && !(1e-4..1e17).contains(&abs) {
        // `1e300` -> `1e+300`, as C's `%g` writes it.
        let text = format!("{v:e}");
        return match text.split_once('e') {
            Some((m, e)) if !e.starts_with('-') => format!("{m}e+{e}"),
            _ => text,
        };
    }
    format!("{v}")
}

fn score_reply(v: f64) -> Reply {
    Reply::Double(format_score(v))
}

fn bulk(v: Value) -> Reply {
    Reply::Bulk(Bytes::from(v))
}

fn upper(b: &Bytes) -> String {
    String::from_utf8_lossy(b).to_ascii_uppercase()
}

/// `ZADD`'s options, then its score/member pairs.
fn parse_add(key: Key, a: &[Bytes]) -> Result<ZSetCmd, Reply> {
    let mut flags = AddFlags::default();
    let mut i = 1;
    while i < a.len() {
        match upper(&a[i]).as_str() {
            "NX" => flags.nx = true,
            "XX" => flags.xx = true,
            "GT" => flags.gt = true,
            "LT" => flags.lt = true,
            "CH" => flags.ch = true,
            "INCR" => flags.incr = true,
            _ => break,
        }
        i += 1;
    }
    let rest = &a[i..];
    if rest.is_empty() || !rest.len().is_multiple_of(2) {
        return Err(syntax());
    }
    if flags.nx && flags.xx {
        return Err(Reply::err(
            "XX and NX options at the same time are not compatible",
        ));
    }
    if (flags.gt && flags.lt) || (flags.nx && (flags.gt || flags.lt)) {
        return Err(Reply::err(
            "GT, LT, and/or NX options at the same time are not compatible",
        ));
    }
    if flags.incr && rest.len() != 2 {
        return Err(Reply::err(
            "INCR option supports a single increment-element pair",
        ));
    }
    let pairs = rest
        .chunks_exact(2)
        .map(|p| Ok((score_arg(&p[0])?, p[1].to_vec())))
        .collect::<Result<Vec<_>, Reply>>()?;
    Ok(ZSetCmd::Add { key, flags, pairs })
}

/// `ZRANGE key start stop [BYSCORE] [REV] [LIMIT offset count] [WITHSCORES]`.
fn parse_zrange(a: &[Bytes]) -> Result<Range, Reply> {
    let (mut by_score, mut rev, mut limit, mut with_scores) = (false, false, None, false);
    let mut i = 3;
    while i < a.len() {
        match upper(&a[i]).as_str() {
            "BYSCORE" => by_score = true,
            "REV" => rev = true,
            "WITHSCORES" => with_scores = true,
            "LIMIT" if i + 2 < a.len() => {
                limit = Some((integer(&a[i + 1])?, integer(&a[i + 2])?));
                i += 2;
            }
            "BYLEX" => return Err(Reply::err("BYLEX is not supported by causeway")),
            _ => return Err(syntax()),
        }
        i += 1;
    }
    if limit.is_some() && !by_score {
        return Err(Reply::err(
            "syntax error, LIMIT is only supported in combination with either BYSCORE or BYLEX",
        ));
    }
    let by = match by_score {
        // With REV the bounds come max first, as Redis takes them.
        true if rev => RangeBy::Score(bound_arg(&a[2])?, bound_arg(&a[1])?),
        true => RangeBy::Score(bound_arg(&a[1])?, bound_arg(&a[2])?),
        false => RangeBy::Index(integer(&a[1])?, integer(&a[2])?),
    };
    Ok(Range {
        by,
        rev,
        limit,
        with_scores,
    })
}

/// `ZRANGEBYSCORE key min max [WITHSCORES] [LIMIT offset count]` (`rev`: max first).
fn parse_by_score(a: &[Bytes], rev: bool) -> Result<Range, Reply> {
    let (mut limit, mut with_scores) = (None, false);
    let mut i = 3;
    while i < a.len() {
        match upper(&a[i]).as_str() {
            "WITHSCORES" => with_scores = true,
            "LIMIT" if i + 2 < a.len() => {
                limit = Some((integer(&a[i + 1])?, integer(&a[i + 2])?));
                i += 2;
            }
            _ => return Err(syntax()),
        }
        i += 1;
    }
    let (lo, hi) = match rev {
        true => (bound_arg(&a[2])?, bound_arg(&a[1])?),
        false => (bound_arg(&a[1])?, bound_arg(&a[2])?),
    };
    Ok(Range {
        by: RangeBy::Score(lo, hi),
        rev,
        limit,
        with_scores,
    })
}

/// `ZREVRANGE key start stop [WITHSCORES]`.
fn parse_revrange(a: &[Bytes]) -> Result<Range, Reply> {
    let with_scores = match a.get(3).map(upper).as_deref() {
        None => false,
        Some("WITHSCORES") if a.len() == 4 => true,
        Some(_) => return Err(syntax()),
    };
    Ok(Range {
        by: RangeBy::Index(integer(&a[1])?, integer(&a[2])?),
        rev: true,
        limit: None,
        with_scores,
    })
}

fn parse_pop(name: &str, key: Key, a: &[Bytes]) -> Result<ZSetCmd, Reply> {
    if a.len() > 2 {
        return Err(syntax());
    }
    let count = match a.get(1) {
        None => None,
        Some(c) => match integer(c)? {
            n if n < 0 => return Err(Reply::err("value is out of range, must be positive")),
            n => Some(n as u64),
        },
    };
    Ok(ZSetCmd::Pop {
        key,
        max: name == "ZPOPMAX",
        count,
    })
}

impl ZSetCmd {
    /// Builds the command named `name` from its arguments after the name (arity checked
    /// against the command table); members past their limits are refused.
    pub fn parse(name: &str, a: &[Bytes]) -> Result<ZSetCmd, Reply> {
        let key = Key(a[0].to_vec());
        let v = |b: &Bytes| b.to_vec();
        let cmd = match name {
            "ZADD" => parse_add(key, a)?,
            "ZINCRBY" => ZSetCmd::IncrBy(key, score_arg(&a[1])?, v(&a[2])),
            "ZREM" => ZSetCmd::Rem(key, a[1..].iter().map(v).collect()),
            "ZSCORE" => ZSetCmd::Score(key, v(&a[1])),
            "ZMSCORE" => ZSetCmd::MScore(key, a[1..].iter().map(v).collect()),
            "ZCARD" => ZSetCmd::Card(key),
            "ZCOUNT" => ZSetCmd::Count(key, bound_arg(&a[1])?, bound_arg(&a[2])?),
            "ZRANK" | "ZREVRANK" if a.len() > 2 => return Err(syntax()),
            "ZRANK" | "ZREVRANK" => ZSetCmd::Rank {
                key,
                member: v(&a[1]),
                rev: name == "ZREVRANK",
            },
            "ZRANGE" => ZSetCmd::Range(key, parse_zrange(a)?),
            "ZREVRANGE" => ZSetCmd::Range(key, parse_revrange(a)?),
            "ZRANGEBYSCORE" => ZSetCmd::Range(key, parse_by_score(a, false)?),
            "ZREVRANGEBYSCORE" => ZSetCmd::Range(key, parse_by_score(a, true)?),
            "ZPOPMIN" | "ZPOPMAX" => parse_pop(name, key, a)?,
            other => return Err(Reply::err(format!("'{other}' is not a sorted-set command"))),
        };
        let mut refused = Ok(());
        cmd.values(|m| {
            if refused.is_ok() {
                refused = check_member(m);
            }
        });
        refused.map_err(|e| Reply::err(e.to_string()))?;
        Ok(cmd)
    }

    /// The key the command names.
    pub fn key(&self) -> &Key {
        match self {
            ZSetCmd::Add { key, .. }
            | ZSetCmd::IncrBy(key, ..)
            | ZSetCmd::Rem(key, _)
            | ZSetCmd::Score(key, _)
            | ZSetCmd::MScore(key, _)
            | ZSetCmd::Card(key)
            | ZSetCmd::Count(key, ..)
            | ZSetCmd::Rank { key, .. }
            | ZSetCmd::Range(key, _)
            | ZSetCmd::Pop { key, .. } => key,
        }
    }

    /// Calls `on_value` with each member the command names (for the limits on values per
    /// command).
    pub fn values(&self, mut on_value: impl FnMut(&Value)) {
        match self {
            ZSetCmd::Add { pairs, .. } => pairs.iter().for_each(|(_, m)| on_value(m)),
            ZSetCmd::IncrBy(_, _, m) | ZSetCmd::Score(_, m) => on_value(m),
            ZSetCmd::Rank { member, .. } => on_value(member),
            ZSetCmd::Rem(_, ms) | ZSetCmd::MScore(_, ms) => ms.iter().for_each(on_value),
            ZSetCmd::Card(_) | ZSetCmd::Count(..) | ZSetCmd::Range(..) | ZSetCmd::Pop { .. } => {}
        }
    }

    /// Runs the command in `tx`: a read of the sorted set, then its updates.
    pub async fn run<H: SessionHandle>(&self, tx: &mut Tx<'_, H>) -> Result<Reply, Error> {
        let writes = matches!(
            self,
            ZSetCmd::Add { .. } | ZSetCmd::IncrBy(..) | ZSetCmd::Rem(..) | ZSetCmd::Pop { .. }
        );
        let key = self.key().clone();
        let members = read_zset(tx, &key, !writes).await?;
        Ok(match self {
            ZSetCmd::Add { flags, pairs, .. } => zadd(tx, &key, &members, *flags, pairs),
            ZSetCmd::IncrBy(_, by, m) => match incr(tx, &key, &members, m, *by) {
                Ok(v) => score_reply(v),
                Err(reply) => reply,
            },
            ZSetCmd::Rem(_, ms) => {
                let gone: Vec<Value> = distinct(ms, &members);
                let n = gone.len() as i64;
                remove(tx, &key, gone);
                Reply::Int(n)
            }
            ZSetCmd::Pop { max, count, .. } => pop(tx, &key, members, *max, *count),
            read => reply_of(read, &sorted(members)),
        })
    }
}

/// The members and scores the transaction sees in sorted set `key`, in member order;
/// none for a key that shows nothing. `finish`: a standalone command commits with the
/// read.
async fn read_zset<H: SessionHandle>(
    tx: &mut Tx<'_, H>,
    key: &Key,
    finish: bool,
) -> Result<Vec<(Value, f64)>, Error> {
    let mut values = tx
        .read_then(vec![(key.clone(), ObjType::ZSet)], Vec::new(), finish)
        .await?;
    Ok(match values.pop().map(|v| v.value) {
        Some(ObjValue::ZSet(pairs)) => pairs
            .into_iter()
            .map(|(m, s)| (m, f64::from_bits(s)))
            .collect(),
        _ => Vec::new(),
    })
}

fn lookup(members: &[(Value, f64)], member: &Value) -> Option<f64> {
    members
        .binary_search_by(|(m, _)| m.cmp(member))
        .ok()
        .map(|i| members[i].1)
}

/// Redis's order: by score, then by member bytes.
fn by_score(a: &(Value, f64), b: &(Value, f64)) -> Ordering {
    a.1.partial_cmp(&b.1)
        .unwrap_or(Ordering::Equal)
        .then_with(|| a.0.cmp(&b.0))
}

fn sorted(mut members: Vec<(Value, f64)>) -> Vec<(Value, f64)> {
    members.sort_by(by_score);
    members
}

/// The distinct members of `asked` the snapshot shows.
fn distinct(asked: &[Value], members: &[(Value, f64)]) -> Vec<Value> {
    let set: std::collections::BTreeSet<&Value> = asked.iter().collect();
    set.into_iter()
        .filter(|m| lookup(members, m).is_some())
        .cloned()
        .collect()
}

fn remove<H: SessionHandle>(tx: &mut Tx<'_, H>, key: &Key, gone: Vec<Value>) {
    if !gone.is_empty() {
        tx.update(key.clone(), Update::ZRemove { members: gone });
    }
}

/// `ZINCRBY` (and `ZADD INCR`): the new score, or the error reply.
fn incr<H: SessionHandle>(
    tx: &mut Tx<'_, H>,
    key: &Key,
    members: &[(Value, f64)],
    member: &Value,
    by: f64,
) -> Result<f64, Reply> {
    let next = lookup(members, member).unwrap_or(0.0) + by;
    if next.is_nan() {
        return Err(Reply::err("resulting score is not a number (NaN)"));
    }
    if causeway_core::crdt::zset::to_fixed(by).is_none() {
        return Err(Reply::err(causeway_core::crdt::zset::INCR_OUT_OF_RANGE));
    }
    let update = Update::ZIncrement {
        member: member.clone(),
        delta: by.to_bits(),
    };
    tx.update(key.clone(), update);
    Ok(next)
}

/// `ZADD`: one update per member written (the last pair of a member wins, as in Redis);
/// answers how many members were new (with `CH`, new or changed; with `INCR`, the new
/// score, nil when an option skipped it).
fn zadd<H: SessionHandle>(
    tx: &mut Tx<'_, H>,
    key: &Key,
    members: &[(Value, f64)],
    flags: AddFlags,
    pairs: &[(f64, Value)],
) -> Reply {
    let mut last: std::collections::BTreeMap<&Value, f64> = Default::default();
    for (s, m) in pairs {
        last.insert(m, *s);
    }
    let mut counted = 0;
    for (m, score) in last {
        let old = lookup(members, m);
        let skip = match old {
            None => flags.xx,
            Some(o) => flags.nx || (flags.gt && score <= o) || (flags.lt && score >= o),
        };
        // With INCR, GT and LT compare the incremented score.
        let skip = match (flags.incr, old) {
            (true, Some(o)) => {
                flags.nx || (flags.gt && o + score <= o) || (flags.lt && o + score >= o)
            }
            _ => skip,
        };
        if skip {
            if flags.incr {
                return Reply::Nil;
            }
            continue;
        }
        if flags.incr {
            return incr(tx, key, members, m, score).map_or_else(|r| r, score_reply);
        }
        let changed = old != Some(score);
        counted += i64::from(old.is_none() || (flags.ch && changed));
        if changed {
            let update = Update::ZAdd {
                member: m.clone(),
                score: score.to_bits(),
            };
            tx.update(key.clone(), update);
        }
    }
    Reply::Int(counted)
}

/// `ZPOPMIN`/`ZPOPMAX`: removes up to `count` observed members from the low (high) end
/// (one without a count); answers them with their scores.
fn pop<H: SessionHandle>(
    tx: &mut Tx<'_, H>,
    key: &Key,
    members: Vec<(Value, f64)>,
    max: bool,
    count: Option<u64>,
) -> Reply {
    let mut order = sorted(members);
    if max {
        order.reverse();
    }
    let n = count.unwrap_or(1).min(order.len() as u64) as usize;
    order.truncate(n);
    remove(tx, key, order.iter().map(|(m, _)| m.clone()).collect());
    let pairs = order.into_iter().map(|(m, s)| (bulk(m), score_reply(s)));
    match count {
        // Redis 7: one flat pair without a count, pairs (nested in RESP3) with one.
        None => Reply::Array(pairs.flat_map(|(m, s)| [m, s]).collect()),
        Some(_) => Reply::Pairs(pairs.collect()),
    }
}

/// Whether `v` lies above `b` (`lower`) or below it.
fn within(v: f64, b: Bound, lower: bool) -> bool {
    match (lower, b.exclusive) {
        (true, true) => v > b.value,
        (true, false) => v >= b.value,
        (false, true) => v < b.value,
        (false, false) => v <= b.value,
    }
}

/// The members of `order` (ascending) a range selects, in reply order.
fn select<'m>(order: &'m [(Value, f64)], r: &Range) -> Vec<&'m (Value, f64)> {
    match r.by {
        RangeBy::Index(start, stop) => {
            let (from, to) = crate::list::range(order.len(), start, stop);
            match r.rev {
                true => order.iter().rev().skip(from).take(to - from).collect(),
                false => order[from..to].iter().collect(),
            }
        }
        RangeBy::Score(lo, hi) => {
            let inside = |p: &&(Value, f64)| within(p.1, lo, true) && within(p.1, hi, false);
            let picked: Vec<&(Value, f64)> = match r.rev {
                true => order.iter().rev().filter(inside).collect(),
                false => order.iter().filter(inside).collect(),
            };
            match r.limit {
                None => picked,
                Some((off, _)) if off < 0 => Vec::new(),
                Some((off, count)) => {
                    let count = if count < 0 {
                        usize::MAX
                    } else {
                        count as usize
                    };
                    picked.into_iter().skip(off as usize).take(count).collect()
                }
            }
        }
    }
}

/// The reply of a command that only reads, over the members in Redis's order.
fn reply_of(cmd: &ZSetCmd, order: &[(Value, f64)]) -> Reply {
    let score_of = |m: &Value| order.iter().find(|(x, _)| x == m).map(|(_, s)| *s);
    match cmd {
        ZSetCmd::Score(_, m) => score_of(m).map_or(Reply::Nil, score_reply),
        ZSetCmd::MScore(_, ms) => Reply::Array(
            ms.iter()
                .map(|m| score_of(m).map_or(Reply::Nil, score_reply))
                .collect(),
        ),
        ZSetCmd::Card(_) => Reply::Int(order.len() as i64),
        ZSetCmd::Count(_, lo, hi) => {
            let n = order
                .iter()
                .filter(|p| within(p.1, *lo, true) && within(p.1, *hi, false));
            Reply::Int(n.count() as i64)
        }
        ZSetCmd::Rank { member, rev, .. } => match order.iter().position(|(m, _)| m == member) {
            Some(i) if *rev => Reply::Int((order.len() - 1 - i) as i64),
            Some(i) => Reply::Int(i as i64),
            None => Reply::Nil,
        },
        ZSetCmd::Range(_, r) => {
            let picked = select(order, r);
            match r.with_scores {
                true => Reply::Pairs(
                    picked
                        .into_iter()
                        .map(|(m, s)| (bulk(m.clone()), score_reply(*s)))
                        .collect(),
                ),
                false => Reply::Array(picked.into_iter().map(|(m, _)| bulk(m.clone())).collect()),
            }
        }
        writes => unreachable!("{writes:?} writes"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Scores read and print as Redis 7's: inf, exclusive bounds, NaN refused, shortest
    /// round-trip text, exponents past 17 digits.
    #[test]
    fn scores_parse_and_print_as_redis() {
        assert_eq!(parse_score(b"1.5"), Some(1.5));
        assert_eq!(parse_score(b"-inf"), Some(f64::NEG_INFINITY));
        assert_eq!(parse_score(b"+inf"), Some(f64::INFINITY));
        assert_eq!(parse_score(b"1e3"), Some(1000.0));
        for bad in [&b"nan"[..], b"", b" 1", b"abc", b"1x"] {
            assert_eq!(parse_score(bad), None, "{bad:?}");
        }
        let b = parse_bound(b"(2").expect("a bound");
        assert!(b.exclusive && b.value == 2.0);
        assert!(!within(2.0, b, true) && within(2.5, b, true));
        assert_eq!(format_score(3.0), "3");
        assert_eq!(format_score(1.1), "1.1");
        assert_eq!(format_score(-2.5), "-2.5");
        assert_eq!(format_score(f64::INFINITY), "inf");
        assert_eq!(format_score(f64::NEG_INFINITY), "-inf");
        assert_eq!(format_score(1e300), "1e+300");
        assert_eq!(format_score(1.5e-7), "1.5e-7");
    }

    /// Index and score ranges, reversed and limited, in Redis's order.
    #[test]
    fn ranges_select_as_redis() {
        let order: Vec<(Value, f64)> = sorted(vec![
            (b"c".to_vec(), 2.0),
            (b"a".to_vec(), 1.0),
            (b"b".to_vec(), 1.0),
            (b"d".to_vec(), 3.0),
        ]);
        let names = |r: Range| -> Vec<&[u8]> {
            select(&order, &r).iter().map(|p| p.0.as_slice()).collect()
        };
        let range = |by, rev, limit| Range {
            by,
            rev,
            limit,
            with_scores: false,
        };
        let all: Vec<&[u8]> = vec![b"a", b"b", b"c", b"d"];
        assert_eq!(names(range(RangeBy::Index(0, -1), false, None)), all);
        assert_eq!(
            names(range(RangeBy::Index(0, 1), true, None)),
            vec![b"d" as &[u8], b"c"]
        );
        let b = |value, exclusive| Bound { value, exclusive };
        let one_to_two = RangeBy::Score(b(1.0, true), b(3.0, false));
        assert_eq!(
            names(range(one_to_two, false, None)),
            vec![b"c" as &[u8], b"d"]
        );
        let every = RangeBy::Score(b(f64::NEG_INFINITY, false), b(f64::INFINITY, false));
        assert_eq!(
            names(range(every, true, Some((1, 2)))),
            vec![b"c" as &[u8], b"b"]
        );
    }
}
