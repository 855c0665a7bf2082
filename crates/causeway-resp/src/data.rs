//! The data commands: parsing their arguments ([`DataCmd::parse`]) and running them inside
//! a transaction ([`DataCmd::run`]).
//!
//! Types: `GET`/`SET`/`MGET`/`MSET` use last-writer-wins registers, `INCR`/`DECR` and
//! friends PN counters, `S*` add-wins sets. A key keeps the type of its first write, so a
//! command of another type answers `WRONGTYPE` (where Redis would let `SET` replace any
//! value). `INCR` of a register `SET` wrote increments it when it holds a decimal integer
//! (core's counting register: an increment a concurrent `SET` did not observe survives
//! it). `GET` reads a register and, when the key holds a counter, the counter, printed in
//! decimal as Redis prints integer strings.
//!
//! Deletion in a CRDT store is an update like any other:
//! - a register is assigned [`LWW_TOMBSTONE`], which `GET` shows as nil and `EXISTS` as
//!   absent (a later `SET` wins over it as over any older value);
//! - a counter is incremented by minus the value the transaction reads (an observed
//!   reset: increments concurrent with the `DEL` survive it);
//! - a set has every element it shows removed (observed-remove: concurrent adds survive).
//!
//! `EXISTS` counts a register that holds a value, a set with members and a counter that is
//! not zero (a counter cannot tell zero from never written).
//!
//! Read-modify-write commands run in one transaction, on its snapshot, and their writes are
//! updates like any other, so concurrent ones resolve by their type's rule:
//! - `APPEND` assigns the register its snapshot's value with the suffix: of two concurrent
//!   `APPEND`s (or an `APPEND` and a `SET`) the last writer wins and the other's write is
//!   lost, as Redis Active-Active resolves strings;
//! - `SETNX` and `SET NX` assign when the snapshot holds no value: two concurrent ones may
//!   both answer 1, and the last writer wins;
//! - `GETSET` is `SET key value GET`;
//! - `SPOP` removes members its snapshot shows (observed-remove): two concurrent `SPOP`s
//!   may return the same member, and an add of it concurrent with the `SPOP` survives it;
//! - `SRANDMEMBER` only reads.
//!
//! A hash (`H*`, [`crate::hash`]) is deleted field by field: each field's observed state
//! is removed, so a field written concurrently with the `DEL` survives it.
//!
//! `INCRBYFLOAT` is not served: the counter holds integers, and a register's
//! read-modify-write would lose concurrent increments, which a counter must not.

use crate::hash::HashCmd;
use crate::limits::RANDOM_MEMBERS_MAX;
use crate::list::ListCmd;
use crate::parse::parse_i64;
use crate::reply::Reply;
use crate::session::SessionHandle;
use crate::txn::{Scope, Tx};
use crate::zset::ZSetCmd;
use bytes::Bytes;
use causeway_core::crdt::{decimal, COUNTER_OVERFLOW};
use causeway_core::limits::{KEY_LEN_MAX, READ_KEYS_MAX, TXN_UPDATES_MAX, VALUE_LEN_MAX};
use causeway_core::{Error, Key, ObjType, ObjValue, ReadValue, Request, Update, Value};
use std::collections::BTreeSet;

/// The value a deleted register holds. Writing it with `SET` is refused.
pub const LWW_TOMBSTONE: &[u8] = causeway_core::crdt::TOMBSTONE;

/// `SET`'s condition.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SetCond {
    Always,
    /// `NX`: only if the key holds no value.
    Nx,
    /// `XX`: only if the key holds a value.
    Xx,
}

/// A data command with its arguments checked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DataCmd {
    Get(Key),
    Set {
        key: Key,
        value: Value,
        cond: SetCond,
        get: bool,
    },
    Del(Vec<Key>),
    Exists(Vec<Key>),
    Type(Key),
    MGet(Vec<Key>),
    MSet(Vec<(Key, Value)>),
    IncrBy(Key, i64),
    SAdd(Key, Vec<Value>),
    SRem(Key, Vec<Value>),
    SMembers(Key),
    SIsMember(Key, Value),
    SCard(Key),
    Append(Key, Value),
    StrLen(Key),
    SetNx(Key, Value),
    /// `SPOP key [count]`: `None` pops one and answers it alone.
    SPop {
        key: Key,
        count: Option<usize>,
        seed: u64,
    },
    /// `SRANDMEMBER key [count]`: a negative count may repeat members.
    SRandMember {
        key: Key,
        count: Option<i64>,
        seed: u64,
    },
    /// The `H*` commands (`crate::hash`).
    Hash(HashCmd),
    /// The list commands (`crate::list`).
    List(ListCmd),
    /// The sorted-set commands (`crate::zset`).
    ZSet(ZSetCmd),
    Ping(Option<Bytes>),
    Echo(Bytes),
}

fn key(arg: &Bytes) -> Key {
    Key(arg.to_vec())
}

fn keys(args: &[Bytes]) -> Vec<Key> {
    args.iter().map(key).collect()
}

fn values(args: &[Bytes]) -> Vec<Value> {
    args.iter().map(|a| a.to_vec()).collect()
}

fn not_integer() -> Reply {
    Reply::err("value is not an integer or out of range")
}

fn integer(arg: &Bytes) -> Result<i64, Reply> {
    parse_i64(arg).ok_or_else(not_integer)
}

/// A register value the client may write.
fn writable(arg: &Bytes) -> Result<Value, Reply> {
    if arg.as_ref() == LWW_TOMBSTONE {
        return Err(Reply::err("this value is reserved for deleted keys"));
    }
    Ok(arg.to_vec())
}

impl DataCmd {
    /// Builds the command named `name` (upper case) from its arguments (`args[0]` is the
    /// name); arity was checked against the command table.
    pub fn parse(name: &str, args: &[Bytes]) -> Result<DataCmd, Reply> {
        let cmd = DataCmd::parse_args(name, &args[1..])?;
        cmd.check_limits()?;
        Ok(cmd)
    }

    fn parse_args(name: &str, a: &[Bytes]) -> Result<DataCmd, Reply> {
        Ok(match name {
            "GET" => DataCmd::Get(key(&a[0])),
            "SET" => parse_set(a)?,
            "DEL" => DataCmd::Del(keys(a)),
            "EXISTS" => DataCmd::Exists(keys(a)),
            "TYPE" => DataCmd::Type(key(&a[0])),
            "MGET" => DataCmd::MGet(keys(a)),
            "MSET" => parse_mset(a)?,
            "INCR" => DataCmd::IncrBy(key(&a[0]), 1),
            "DECR" => DataCmd::IncrBy(key(&a[0]), -1),
            "INCRBY" => DataCmd::IncrBy(key(&a[0]), integer(&a[1])?),
            "DECRBY" => {
                let by = integer(&a[1])?;
                let neg = by
                    .checked_neg()
                    .ok_or_else(|| Reply::err("decrement would overflow"))?;
                DataCmd::IncrBy(key(&a[0]), neg)
            }
            "SADD" => DataCmd::SAdd(key(&a[0]), values(&a[1..])),
            "SREM" => DataCmd::SRem(key(&a[0]), values(&a[1..])),
            "SMEMBERS" => DataCmd::SMembers(key(&a[0])),
            "SISMEMBER" => DataCmd::SIsMember(key(&a[0]), a[1].to_vec()),
            "SCARD" => DataCmd::SCard(key(&a[0])),
            "APPEND" => DataCmd::Append(key(&a[0]), a[1].to_vec()),
            "STRLEN" => DataCmd::StrLen(key(&a[0])),
            "SETNX" => DataCmd::SetNx(key(&a[0]), writable(&a[1])?),
            "GETSET" => DataCmd::Set {
                key: key(&a[0]),
                value: writable(&a[1])?,
                cond: SetCond::Always,
                get: true,
            },
            "SPOP" | "SRANDMEMBER" => parse_random(name, a)?,
            name if crate::hash::is_hash(name) => DataCmd::Hash(HashCmd::parse(name, a)?),
            name if crate::list::is_list(name) => DataCmd::List(ListCmd::parse(name, a)?),
            name if crate::zset::is_zset(name) => DataCmd::ZSet(ZSetCmd::parse(name, a)?),
            "PING" => DataCmd::Ping(a.first().cloned()),
            "ECHO" => DataCmd::Echo(a[0].clone()),
            other => return Err(Reply::err(format!("'{other}' is not a data command"))),
        })
    }

    /// Runs the command in `tx` and builds its reply (a standalone command's final read
    /// carries the commit in the same batch, see [`Tx::read_then`]).
    pub async fn run<H: SessionHandle>(self, tx: &mut Tx<'_, H>) -> Result<Reply, Error> {
        match self {
            DataCmd::Get(k) => get(tx, &k).await,
            DataCmd::Set {
                key,
                value,
                cond,
                get,
            } => set(tx, key, value, cond, get).await,
            DataCmd::Del(ks) => del(tx, &ks).await,
            DataCmd::Exists(ks) => exists(tx, &ks).await,
            DataCmd::Type(k) => type_of(tx, &k).await,
            DataCmd::MGet(ks) => mget(tx, &ks).await,
            DataCmd::MSet(pairs) => {
                for (k, v) in pairs {
                    tx.update(k, Update::Assign(v));
                }
                Ok(Reply::Ok)
            }
            DataCmd::IncrBy(k, by) => incr_by(tx, &k, by).await,
            DataCmd::SAdd(k, elems) => sadd(tx, &k, &elems).await,
            DataCmd::SRem(k, elems) => srem(tx, &k, &elems).await,
            DataCmd::SMembers(_) | DataCmd::SIsMember(..) | DataCmd::SCard(_) => {
                set_read(tx, &self).await
            }
            DataCmd::Append(k, suffix) => append(tx, &k, &suffix).await,
            DataCmd::StrLen(k) => strlen(tx, &k).await,
            DataCmd::SetNx(k, v) => Ok(match set(tx, k, v, SetCond::Nx, false).await? {
                Reply::Ok => Reply::Int(1),
                _ => Reply::Int(0),
            }),
            DataCmd::SPop { key, count, seed } => spop(tx, &key, count, seed).await,
            DataCmd::SRandMember { key, count, seed } => srandmember(tx, &key, count, seed).await,
            DataCmd::Hash(h) => h.run(tx).await,
            DataCmd::List(l) => l.run(tx).await,
            DataCmd::ZSet(z) => z.run(tx).await,
            DataCmd::Ping(None) => Ok(Reply::Simple("PONG")),
            DataCmd::Ping(Some(msg)) | DataCmd::Echo(msg) => Ok(Reply::Bulk(msg)),
        }
    }

    /// [`DataCmd::run`] for a command the caller keeps (a pipelined group runs its
    /// commands again alone if the group fails, a standalone command again after an
    /// abort): `GET`, `INCRBY` and `SADD` borrow their arguments, the others run on a
    /// copy.
    pub async fn run_borrowed<H: SessionHandle>(&self, tx: &mut Tx<'_, H>) -> Result<Reply, Error> {
        match self {
            DataCmd::Get(k) => get(tx, k).await,
            DataCmd::IncrBy(k, by) => incr_by(tx, k, *by).await,
            DataCmd::SAdd(k, elems) => sadd(tx, k, elems).await,
            other => other.clone().run(tx).await,
        }
    }

    /// The reply of a command that needs no transaction (`PING`, `ECHO`).
    pub fn local_reply(&self) -> Option<Reply> {
        match self {
            DataCmd::Ping(None) => Some(Reply::Simple("PONG")),
            DataCmd::Ping(Some(msg)) | DataCmd::Echo(msg) => Some(Reply::Bulk(msg.clone())),
            _ => None,
        }
    }

    /// Calls `on_key` with each key the command names and `on_value` with each value
    /// (register values, set elements), without collecting them: every command is
    /// checked, and two vectors per command were a visible share of a pipelined run.
    /// Whether the command writes without reading (its `WRONGTYPE` comes at the commit:
    /// [`crate::conn`] then learns the types its keys are held as and runs it again).
    pub fn writes_blind(&self) -> bool {
        matches!(
            self,
            DataCmd::MSet(_)
                | DataCmd::Set {
                    cond: SetCond::Always,
                    get: false,
                    ..
                }
        )
    }

    /// Calls `on_key` with each key the command names.
    pub fn keys(&self, on_key: impl FnMut(&Key)) {
        self.visit(on_key, |_| {});
    }

    fn visit(&self, mut on_key: impl FnMut(&Key), mut on_value: impl FnMut(&Value)) {
        match self {
            DataCmd::Get(k)
            | DataCmd::Type(k)
            | DataCmd::IncrBy(k, _)
            | DataCmd::SMembers(k)
            | DataCmd::SCard(k)
            | DataCmd::StrLen(k)
            | DataCmd::SPop { key: k, .. }
            | DataCmd::SRandMember { key: k, .. } => on_key(k),
            DataCmd::Set { key, value, .. }
            | DataCmd::SIsMember(key, value)
            | DataCmd::Append(key, value)
            | DataCmd::SetNx(key, value) => {
                on_key(key);
                on_value(value);
            }
            DataCmd::SAdd(k, vs) | DataCmd::SRem(k, vs) => {
                on_key(k);
                vs.iter().for_each(on_value);
            }
            DataCmd::Del(ks) | DataCmd::Exists(ks) | DataCmd::MGet(ks) => {
                ks.iter().for_each(on_key);
            }
            DataCmd::MSet(pairs) => {
                for (k, v) in pairs {
                    on_key(k);
                    on_value(v);
                }
            }
            DataCmd::Hash(h) => {
                on_key(h.key());
                h.values(on_value);
            }
            DataCmd::List(l) => {
                on_key(l.key());
                l.values(on_value);
            }
            DataCmd::ZSet(z) => {
                on_key(z.key());
                z.values(on_value);
            }
            DataCmd::Ping(_) | DataCmd::Echo(_) => {}
        }
    }

    /// Refuses a command over the store's limits on keys, values and their lengths.
    fn check_limits(&self) -> Result<(), Reply> {
        let over = |what: &str, max: usize| {
            let e = Error::LimitExceeded {
                what: what.into(),
                max: max as u64,
            };
            Err(Reply::err(e.to_string()))
        };
        let (mut keys, mut values) = (0usize, 0usize);
        let (mut key_too_long, mut value_too_long) = (false, false);
        self.visit(
            |k| {
                keys += 1;
                key_too_long |= k.0.len() > KEY_LEN_MAX;
            },
            |v| {
                values += 1;
                value_too_long |= v.len() > VALUE_LEN_MAX;
            },
        );
        if let DataCmd::SPop { count: Some(n), .. } = self {
            if *n > TXN_UPDATES_MAX {
                return over("members popped by one SPOP", TXN_UPDATES_MAX);
            }
        }
        if let DataCmd::SRandMember { count: Some(n), .. } = self {
            if n.unsigned_abs() > RANDOM_MEMBERS_MAX as u64 {
                return over("members of one SRANDMEMBER", RANDOM_MEMBERS_MAX);
            }
        }
        if keys > READ_KEYS_MAX {
            return over("keys in one command", READ_KEYS_MAX);
        }
        if values > TXN_UPDATES_MAX {
            return over("values in one command", TXN_UPDATES_MAX);
        }
        if key_too_long {
            return over("key length in bytes", KEY_LEN_MAX);
        }
        if value_too_long {
            return over("value length in bytes", VALUE_LEN_MAX);
        }
        Ok(())
    }
}

/// `SET key value [NX|XX] [GET] [KEEPTTL]`; expirations are refused (no TTLs).
fn parse_set(a: &[Bytes]) -> Result<DataCmd, Reply> {
    let mut cond = SetCond::Always;
    let mut get = false;
    for opt in &a[2..] {
        let upper = opt.to_ascii_uppercase();
        match upper.as_slice() {
            b"NX" if cond == SetCond::Always => cond = SetCond::Nx,
            b"XX" if cond == SetCond::Always => cond = SetCond::Xx,
            b"GET" => get = true,
            b"KEEPTTL" => {}
            b"EX" | b"PX" | b"EXAT" | b"PXAT" => {
                return Err(Reply::err("key expiration is not supported by Causeway"))
            }
            _ => return Err(Reply::err("syntax error")),
        }
    }
    Ok(DataCmd::Set {
        key: key(&a[0]),
        value: writable(&a[1])?,
        cond,
        get,
    })
}

/// `SPOP key [count]` and `SRANDMEMBER key [count]`, each with a fresh seed for its
/// random choice ([`random_seed`]).
fn parse_random(name: &str, a: &[Bytes]) -> Result<DataCmd, Reply> {
    if a.len() > 2 {
        return Err(Reply::err("syntax error"));
    }
    let count = a.get(1).map(integer).transpose()?;
    let key = key(&a[0]);
    let seed = random_seed();
    if name == "SRANDMEMBER" {
        return Ok(DataCmd::SRandMember { key, count, seed });
    }
    let count = match count {
        Some(n) => Some(
            usize::try_from(n)
                .map_err(|_| Reply::err("value is out of range, must be positive"))?,
        ),
        None => None,
    };
    Ok(DataCmd::SPop { key, count, seed })
}

/// A seed for a command's random choices, from the standard library's randomly keyed
/// hasher (no dependency): the choice is then a function of the seed, so a command run
/// again after an abort chooses alike.
fn random_seed() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    use std::sync::atomic::{AtomicU64, Ordering};
    static DRAWS: AtomicU64 = AtomicU64::new(0);
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u64(DRAWS.fetch_add(1, Ordering::Relaxed));
    h.finish()
}

/// SplitMix64: the random numbers of one command, from its seed.
struct Draws(u64);

impl Draws {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A number below `n` (> 0).
    fn below(&mut self, n: usize) -> usize {
        assert!(n > 0, "a draw from nothing");
        (self.next() % n as u64) as usize
    }
}

/// `count` distinct members of `members` drawn at random (all of them when there are no
/// more), by a partial Fisher-Yates shuffle.
fn draw_distinct(mut members: Vec<Value>, count: usize, draws: &mut Draws) -> Vec<Value> {
    let count = count.min(members.len());
    for i in 0..count {
        let j = i + draws.below(members.len() - i);
        members.swap(i, j);
    }
    members.truncate(count);
    members
}

fn parse_mset(a: &[Bytes]) -> Result<DataCmd, Reply> {
    if a.len() % 2 == 1 {
        return Err(Reply::err("wrong number of arguments for 'mset' command"));
    }
    let pairs = a
        .chunks_exact(2)
        .map(|p| Ok((key(&p[0]), writable(&p[1])?)))
        .collect::<Result<Vec<_>, Reply>>()?;
    Ok(DataCmd::MSet(pairs))
}

pub(crate) fn wrongtype(expected: ObjType, found: ObjType) -> Error {
    Error::WrongType { expected, found }
}

/// A register's visible value (a tombstone is no value).
fn live(value: Option<Value>) -> Option<Value> {
    value.filter(|v| v.as_slice() != LWW_TOMBSTONE)
}

pub(crate) fn bulk_or_nil(value: Option<Value>) -> Reply {
    live(value).map_or(Reply::Nil, |v| Reply::Bulk(Bytes::from(v)))
}

/// `GET`: a register's value, or a counter's in decimal.
async fn get<H: SessionHandle>(tx: &mut Tx<'_, H>, k: &Key) -> Result<Reply, Error> {
    match tx.read_any(k, ObjType::Lww, true).await? {
        ObjValue::Lww(v) => Ok(bulk_or_nil(v)),
        // An empty set: a key freed by `DEL` (`crdt`'s parts) that shows nothing.
        v @ (ObjValue::Set(_)
        | ObjValue::MvReg(_)
        | ObjValue::Hash(_)
        | ObjValue::List(_)
        | ObjValue::ZSet(_))
            if !present(&v) =>
        {
            Ok(Reply::Nil)
        }
        ObjValue::Counter(n) => Ok(Reply::text(n.to_string())),
        other => Err(wrongtype(crate::txn::value_type(&other), ObjType::Lww)),
    }
}

async fn set<H: SessionHandle>(
    tx: &mut Tx<'_, H>,
    k: Key,
    value: Value,
    cond: SetCond,
    get: bool,
) -> Result<Reply, Error> {
    let assign = Update::Assign(value);
    if cond == SetCond::Always && !get {
        tx.update(k, assign);
        return Ok(Reply::Ok);
    }
    let old = match tx.read(vec![(k.clone(), ObjType::Lww)]).await {
        Ok(mut vals) => match vals.pop().map(|v| v.value) {
            Some(ObjValue::Lww(v)) => live(v),
            _ => None,
        },
        Err(Error::WrongType { .. }) if cond == SetCond::Nx && !get => return Ok(Reply::Nil),
        Err(e) => return Err(e),
    };
    let write = match cond {
        SetCond::Always => true,
        SetCond::Nx => old.is_none(),
        SetCond::Xx => old.is_some(),
    };
    if write {
        tx.update(k, assign);
    }
    Ok(match (get, write) {
        (true, _) => old.map_or(Reply::Nil, |v| Reply::Bulk(Bytes::from(v))),
        (false, true) => Reply::Ok,
        (false, false) => Reply::Nil,
    })
}

/// Whether a read value counts as an existing key.
pub(crate) fn present(value: &ObjValue) -> bool {
    match value {
        ObjValue::Lww(v) => live(v.clone()).is_some(),
        ObjValue::Counter(n) => *n != 0,
        ObjValue::Set(elems) => !elems.is_empty(),
        ObjValue::MvReg(vals) => vals.iter().any(|v| v.as_slice() != LWW_TOMBSTONE),
        ObjValue::Hash(fields) => !fields.is_empty(),
        ObjValue::List(elems) => !elems.is_empty(),
        ObjValue::ZSet(members) => !members.is_empty(),
    }
}

async fn exists<H: SessionHandle>(tx: &mut Tx<'_, H>, ks: &[Key]) -> Result<Reply, Error> {
    let values = tx.read_many_any(ks, ObjType::Lww).await?;
    Ok(Reply::Int(
        values.iter().filter(|v| present(v)).count() as i64
    ))
}

/// `DEL`: deletes each distinct key that exists, as the module docs describe.
pub(crate) async fn del<H: SessionHandle>(tx: &mut Tx<'_, H>, ks: &[Key]) -> Result<Reply, Error> {
    let distinct: Vec<Key> = ks
        .iter()
        .cloned()
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    let values = tx.read_many_any(&distinct, ObjType::Lww).await?;
    let mut deleted = 0;
    for (k, v) in distinct.into_iter().zip(values) {
        if !present(&v) {
            continue;
        }
        deleted += 1;
        let mut shown = v;
        // A key with parts (`crdt`) may show another part once the shown one is gone:
        // each is deleted, so the key is free (one pass per type at most).
        for _ in 0..PARTS_MAX {
            delete_shown(tx, &k, shown);
            if !tx.has_home(&k) {
                break;
            }
            shown = tx.read_any(&k, ObjType::Lww, false).await?;
            if !present(&shown) {
                break;
            }
        }
    }
    Ok(Reply::Int(deleted))
}

/// Types a key may hold parts of: how many passes a `DEL` takes at most.
const PARTS_MAX: usize = ObjType::ALL.len() - 1;

/// Deletes what `key` shows, as the module docs describe.
fn delete_shown<H: SessionHandle>(tx: &mut Tx<'_, H>, k: &Key, shown: ObjValue) {
    match shown {
        ObjValue::Lww(_) => tx.update(k.clone(), Update::Assign(LWW_TOMBSTONE.to_vec())),
        ObjValue::Counter(n) => tx.update(k.clone(), Update::Increment(n.wrapping_neg())),
        ObjValue::Set(elems) => {
            for e in elems {
                tx.update(k.clone(), Update::Remove(e));
            }
        }
        ObjValue::MvReg(_) => tx.update(k.clone(), Update::MvAssign(LWW_TOMBSTONE.to_vec())),
        // Each field's observed state removed (a concurrent write of a field survives).
        ObjValue::Hash(fields) => {
            for (field, _) in fields {
                tx.update(k.clone(), Update::HashRemove { field });
            }
        }
        // Every observed element popped (one pushed concurrently survives).
        ObjValue::List(elems) => tx.update(
            k.clone(),
            Update::ListPop {
                left: true,
                count: elems.len() as u64,
            },
        ),
        // Every observed member removed (one added concurrently survives).
        ObjValue::ZSet(members) => {
            let members = members.into_iter().map(|(m, _)| m).collect();
            tx.update(k.clone(), Update::ZRemove { members })
        }
    }
}

/// `TYPE`: registers and counters are `string` as in Redis.
async fn type_of<H: SessionHandle>(tx: &mut Tx<'_, H>, k: &Key) -> Result<Reply, Error> {
    let value = tx.read_any(k, ObjType::Lww, true).await?;
    Ok(Reply::Simple(match &value {
        v if !present(v) => "none",
        ObjValue::Lww(_) | ObjValue::Counter(_) => "string",
        ObjValue::Set(_) => "set",
        ObjValue::MvReg(_) => "mvreg",
        ObjValue::Hash(_) => "hash",
        ObjValue::List(_) => "list",
        ObjValue::ZSet(_) => "zset",
    }))
}

/// `MGET`: registers' values, counters in decimal, nil for other types (as Redis does).
async fn mget<H: SessionHandle>(tx: &mut Tx<'_, H>, ks: &[Key]) -> Result<Reply, Error> {
    let values = tx.read_many_any(ks, ObjType::Lww).await?;
    let replies = values
        .into_iter()
        .map(|v| match v {
            ObjValue::Lww(v) => bulk_or_nil(v),
            ObjValue::Counter(n) => Reply::text(n.to_string()),
            _ => Reply::Nil,
        })
        .collect();
    Ok(Reply::Array(replies))
}

fn counter_of(values: &mut Vec<causeway_core::ReadValue>) -> i64 {
    match values.pop().map(|v| v.value) {
        Some(ObjValue::Counter(n)) => n,
        _ => 0,
    }
}

/// `INCRBY` and friends: refuses to overflow the value this transaction reads.
async fn incr_by<H: SessionHandle>(tx: &mut Tx<'_, H>, k: &Key, by: i64) -> Result<Reply, Error> {
    if tx.scope() == Scope::Command {
        return incr_by_at_once(tx, k, by).await;
    }
    // Read before in this group: what the transaction saw, as `read` would answer.
    let current = match tx.seen_counter(k) {
        Some(n) => n,
        None => match tx.read(vec![(k.clone(), ObjType::Counter)]).await {
            Ok(mut values) => counter_of(&mut values),
            Err(Error::WrongType {
                expected: ObjType::Lww,
                ..
            }) => return incr_register(tx, k, by).await,
            Err(e) => return Err(e),
        },
    };
    let Some(next) = current.checked_add(by) else {
        return Ok(Reply::err("increment or decrement would overflow"));
    };
    tx.update(k.clone(), Update::Increment(by));
    Ok(Reply::Int(next))
}

/// A standalone `INCRBY`: the read, the increment and the commit in one batch (one
/// exchange with the nodes where the protocol ships a read-then-commit together). The
/// counter's own precondition (`crdt::COUNTER_OVERFLOW`) refuses an increment that would
/// overflow the value read, so the commit fails and nothing is written.
async fn incr_by_at_once<H: SessionHandle>(
    tx: &mut Tx<'_, H>,
    k: &Key,
    by: i64,
) -> Result<Reply, Error> {
    let update = Request::Update {
        key: k.clone(),
        update: Update::Increment(by),
    };
    let read = tx.read_then(vec![(k.clone(), ObjType::Counter)], vec![update], true);
    let mut values = match read.await {
        Err(e) if e.to_string().contains(COUNTER_OVERFLOW) => {
            return Ok(Reply::err(COUNTER_OVERFLOW));
        }
        // A string `SET` wrote: the read refused it and left the transaction open.
        Err(Error::WrongType {
            expected: ObjType::Lww,
            ..
        }) => {
            tx.continue_after_refused_read();
            return incr_register(tx, k, by).await;
        }
        // A key of another type: a counter if it shows one or nothing (a key freed by
        // `DEL`), read again as the type it holds.
        Err(Error::WrongType { .. }) => {
            tx.continue_after_refused_read();
            let mut values = tx.read(vec![(k.clone(), ObjType::Counter)]).await?;
            let current = counter_of(&mut values);
            let Some(next) = current.checked_add(by) else {
                return Ok(Reply::err(COUNTER_OVERFLOW));
            };
            tx.update(k.clone(), Update::Increment(by));
            return Ok(Reply::Int(next));
        }
        other => other?,
    };
    // The increment committed, so it did not overflow the value it observed; where a
    // protocol prepares against a later state than it read (concurrent increments), the
    // counter adds up wrapping, and so does the answer.
    Ok(Reply::Int(counter_of(&mut values).wrapping_add(by)))
}

/// `INCRBY` of a string `SET` wrote: a register increment (`crdt`'s counting register)
/// when it holds a decimal integer; a deleted one is assigned 0 first, so the increment
/// counts from 0 and concurrent ones still add up.
async fn incr_register<H: SessionHandle>(
    tx: &mut Tx<'_, H>,
    k: &Key,
    by: i64,
) -> Result<Reply, Error> {
    let current = match tx.read(vec![(k.clone(), ObjType::Lww)]).await?.pop() {
        Some(ReadValue {
            value: ObjValue::Lww(v),
            ..
        }) => live(v),
        _ => None,
    };
    let current = match current {
        None => {
            tx.update(k.clone(), Update::Assign(b"0".to_vec()));
            0
        }
        Some(v) => match decimal(&v) {
            Some(n) => n,
            None => return Ok(not_integer()),
        },
    };
    let Some(next) = current.checked_add(by) else {
        return Ok(Reply::err(COUNTER_OVERFLOW));
    };
    tx.update(k.clone(), Update::RegisterIncrement(by));
    Ok(Reply::Int(next))
}

/// The members a set read shows, sorted and distinct (for [`has`]).
fn set_members(values: &mut Vec<causeway_core::ReadValue>) -> Vec<Value> {
    let mut members = match values.pop().map(|v| v.value) {
        Some(ObjValue::Set(elems)) => elems,
        _ => Vec::new(),
    };
    if !members.windows(2).all(|w| w[0] < w[1]) {
        members.sort();
        members.dedup();
    }
    members
}

fn has(members: &[Value], elem: &Value) -> bool {
    members.binary_search(elem).is_ok()
}

/// The distinct values among `elems`.
fn distinct(elems: &[Value]) -> Vec<&Value> {
    let mut out: Vec<&Value> = elems.iter().collect();
    out.sort();
    out.dedup();
    out
}

/// `SADD`: adds the elements this transaction's view lacks and answers how many there
/// were. A member the view already holds is not written again: Redis writes nothing for
/// it either (no AOF record, no fsync), and re-adding it would cost a durable record and
/// its replication for no change anyone can read. (Our decision: in the optimized OR-set
/// a re-add would replace the member's tags and so win over a concurrent `SREM` in
/// another DC; without it such a remove wins, as if it came after the `SADD`, which is
/// one of the orders a Redis user could see.) A standalone `SADD` therefore reads, then
/// sends its adds with the commit: two calls when it adds, a read-only commit when not.
async fn sadd<H: SessionHandle>(
    tx: &mut Tx<'_, H>,
    k: &Key,
    elems: &[Value],
) -> Result<Reply, Error> {
    let added = match tx.seen_set(k) {
        // Read before in this group: the transaction's view, without a call.
        Some(members) => absent(members, elems),
        None => {
            let mut values = tx.read(vec![(k.clone(), ObjType::Set)]).await?;
            absent(&set_members(&mut values), elems)
        }
    };
    for e in &added {
        tx.add_member(k, e);
    }
    Ok(Reply::Int(added.len() as i64))
}

/// The distinct elements of `elems` that are not in `members` (sorted).
fn absent(members: &[Value], elems: &[Value]) -> Vec<Value> {
    distinct(elems)
        .into_iter()
        .filter(|e| !has(members, e))
        .cloned()
        .collect()
}

/// `SREM`: removes the elements this transaction sees; answers how many there were.
async fn srem<H: SessionHandle>(
    tx: &mut Tx<'_, H>,
    k: &Key,
    elems: &[Value],
) -> Result<Reply, Error> {
    let mut values = tx.read(vec![(k.clone(), ObjType::Set)]).await?;
    let members = set_members(&mut values);
    let mut removed = 0;
    for e in distinct(elems).into_iter().filter(|e| has(&members, e)) {
        tx.update(k.clone(), Update::Remove(e.clone()));
        removed += 1;
    }
    Ok(Reply::Int(removed))
}

/// `SMEMBERS`, `SISMEMBER`, `SCARD`.
async fn set_read<H: SessionHandle>(tx: &mut Tx<'_, H>, cmd: &DataCmd) -> Result<Reply, Error> {
    let (DataCmd::SMembers(k) | DataCmd::SIsMember(k, _) | DataCmd::SCard(k)) = cmd else {
        return Err(Error::InvalidState("not a set read".into()));
    };
    let mut values = tx
        .read_then(vec![(k.clone(), ObjType::Set)], Vec::new(), true)
        .await?;
    let members = set_members(&mut values);
    Ok(match cmd {
        DataCmd::SIsMember(_, e) => Reply::Int(i64::from(has(&members, e))),
        DataCmd::SCard(_) => Reply::Int(members.len() as i64),
        _ => Reply::Set(
            members
                .into_iter()
                .map(|m| Reply::Bulk(Bytes::from(m)))
                .collect(),
        ),
    })
}

/// `APPEND`: the register's value in this transaction's snapshot with `suffix` after it
/// (nothing before it when the key holds no value), assigned; answers the new length.
async fn append<H: SessionHandle>(
    tx: &mut Tx<'_, H>,
    k: &Key,
    suffix: &[u8],
) -> Result<Reply, Error> {
    let mut values = tx.read(vec![(k.clone(), ObjType::Lww)]).await?;
    let mut value = match values.pop().map(|v| v.value) {
        Some(ObjValue::Lww(v)) => live(v).unwrap_or_default(),
        _ => Vec::new(),
    };
    if value.len() + suffix.len() > VALUE_LEN_MAX {
        let e = Error::LimitExceeded {
            what: "value length in bytes".into(),
            max: VALUE_LEN_MAX as u64,
        };
        return Ok(Reply::err(e.to_string()));
    }
    value.extend_from_slice(suffix);
    if value.as_slice() == LWW_TOMBSTONE {
        return Ok(Reply::err("this value is reserved for deleted keys"));
    }
    let len = value.len() as i64;
    tx.update(k.clone(), Update::Assign(value));
    Ok(Reply::Int(len))
}

/// `STRLEN`: the length of a register's value, or of a counter's in decimal; 0 for a key
/// that holds nothing.
async fn strlen<H: SessionHandle>(tx: &mut Tx<'_, H>, k: &Key) -> Result<Reply, Error> {
    let value = tx.read_any(k, ObjType::Lww, true).await?;
    if !present(&value) {
        return Ok(Reply::Int(0));
    }
    match value {
        ObjValue::Lww(v) => Ok(Reply::Int(live(v).map_or(0, |v| v.len()) as i64)),
        ObjValue::Counter(n) => Ok(Reply::Int(n.to_string().len() as i64)),
        other => Err(wrongtype(crate::txn::value_type(&other), ObjType::Lww)),
    }
}

/// `SPOP`: removes members drawn from those this transaction's snapshot shows and answers
/// them (observed-remove, see the module docs).
async fn spop<H: SessionHandle>(
    tx: &mut Tx<'_, H>,
    k: &Key,
    count: Option<usize>,
    seed: u64,
) -> Result<Reply, Error> {
    let mut values = tx.read(vec![(k.clone(), ObjType::Set)]).await?;
    let members = set_members(&mut values);
    let popped = draw_distinct(members, count.unwrap_or(1), &mut Draws(seed));
    for m in &popped {
        tx.update(k.clone(), Update::Remove(m.clone()));
    }
    let mut replies = popped.into_iter().map(|m| Reply::Bulk(Bytes::from(m)));
    Ok(match count {
        None => replies.next().unwrap_or(Reply::Nil),
        Some(_) => Reply::Array(replies.collect()),
    })
}

/// `SRANDMEMBER`: members drawn from the snapshot, distinct for a positive count, with
/// repeats for a negative one (as Redis draws them).
async fn srandmember<H: SessionHandle>(
    tx: &mut Tx<'_, H>,
    k: &Key,
    count: Option<i64>,
    seed: u64,
) -> Result<Reply, Error> {
    let mut values = tx
        .read_then(vec![(k.clone(), ObjType::Set)], Vec::new(), true)
        .await?;
    let members = set_members(&mut values);
    let mut draws = Draws(seed);
    let bulk = |m: Value| Reply::Bulk(Bytes::from(m));
    Ok(match count {
        None => draw_distinct(members, 1, &mut draws)
            .pop()
            .map_or(Reply::Nil, bulk),
        Some(n) if n >= 0 => Reply::Array(
            draw_distinct(members, n as usize, &mut draws)
                .into_iter()
                .map(bulk)
                .collect(),
        ),
        Some(_) if members.is_empty() => Reply::Array(Vec::new()),
        Some(n) => Reply::Array(
            (0..n.unsigned_abs())
                .map(|_| bulk(members[draws.below(members.len())].clone()))
                .collect(),
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn draws_are_distinct_bounded_and_follow_the_seed() {
        let members: Vec<Value> = (0..10u8).map(|i| vec![i]).collect();
        let a = draw_distinct(members.clone(), 4, &mut Draws(7));
        let b = draw_distinct(members.clone(), 4, &mut Draws(7));
        assert_eq!(a, b, "one seed, one choice");
        let mut sorted = a.clone();
        sorted.sort();
        sorted.dedup();
        assert_eq!(sorted.len(), 4, "distinct: {a:?}");
        assert!(a.iter().all(|m| members.contains(m)));
        let all = draw_distinct(members.clone(), 50, &mut Draws(1));
        assert_eq!(all.len(), 10, "no more than there are");
        let firsts: BTreeSet<Value> = (0..64)
            .map(|seed| draw_distinct(members.clone(), 1, &mut Draws(seed)).remove(0))
            .collect();
        assert!(firsts.len() > 5, "seeds choose differently: {firsts:?}");
    }

    #[test]
    fn spop_and_srandmember_counts_are_parsed_and_bounded() {
        let args = |words: &[&str]| -> Vec<Bytes> {
            words.iter().map(|w| Bytes::from(w.to_string())).collect()
        };
        let e = DataCmd::parse("SPOP", &args(&["SPOP", "s", "-1"])).unwrap_err();
        assert!(format!("{e:?}").contains("must be positive"), "{e:?}");
        let over = (TXN_UPDATES_MAX + 1).to_string();
        assert!(DataCmd::parse("SPOP", &args(&["SPOP", "s", &over])).is_err());
        let many = format!("-{}", RANDOM_MEMBERS_MAX + 1);
        assert!(DataCmd::parse("SRANDMEMBER", &args(&["SRANDMEMBER", "s", &many])).is_err());
        assert!(DataCmd::parse("SRANDMEMBER", &args(&["SRANDMEMBER", "s", "-3"])).is_ok());
        assert!(DataCmd::parse("SPOP", &args(&["SPOP", "s", "1", "2"])).is_err());
    }
}
