//! The hash commands: `HSET`, `HSETNX`, `HGET`, `HMGET`, `HGETALL`, `HKEYS`, `HVALS`,
//! `HDEL`, `HINCRBY`, `HLEN`, `HEXISTS`, on core's hash (`crdt::hash`: an add-wins map
//! whose fields are registers that count). Each reads the transaction's snapshot and
//! writes one update per field, so concurrent commands resolve by the hash's rules
//! (docs/REDIS.md): `HSET` of a field is last-writer-wins, `HINCRBY`s add up, and `HDEL`
//! removes only what it observed, so a write concurrent with it survives.

use crate::reply::Reply;
use crate::session::SessionHandle;
use crate::txn::Tx;
use bytes::Bytes;
use causeway_core::crdt::hash::{check_sizes, HASH_NOT_AN_INTEGER};
use causeway_core::crdt::COUNTER_OVERFLOW;
use causeway_core::{Error, Key, ObjType, ObjValue, Update, Value};

/// A hash command with its arguments checked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HashCmd {
    /// `HSET` (and `HMSET`, which answers `OK`): field/value pairs.
    Set {
        key: Key,
        pairs: Vec<(Value, Value)>,
        ok: bool,
    },
    SetNx(Key, Value, Value),
    Get(Key, Value),
    MGet(Key, Vec<Value>),
    GetAll(Key),
    Keys(Key),
    Vals(Key),
    Del(Key, Vec<Value>),
    IncrBy(Key, Value, i64),
    Len(Key),
    Exists(Key, Value),
}

/// Whether `name` (upper case) is a hash command.
pub fn is_hash(name: &str) -> bool {
    matches!(
        name,
        "HSET"
            | "HMSET"
            | "HSETNX"
            | "HGET"
            | "HMGET"
            | "HGETALL"
            | "HKEYS"
            | "HVALS"
            | "HDEL"
            | "HINCRBY"
            | "HLEN"
            | "HEXISTS"
    )
}

fn refused(e: Error) -> Reply {
    Reply::err(e.to_string())
}

impl HashCmd {
    /// Builds the command named `name` from its arguments after the name (arity checked
    /// against the command table); fields and values past their limits are refused.
    pub fn parse(name: &str, a: &[Bytes]) -> Result<HashCmd, Reply> {
        let key = Key(a[0].to_vec());
        let v = |b: &Bytes| b.to_vec();
        let cmd = match name {
            "HSET" | "HMSET" => {
                if a.len() < 3 || a.len().is_multiple_of(2) {
                    let lower = name.to_ascii_lowercase();
                    let msg = format!("wrong number of arguments for '{lower}' command");
                    return Err(Reply::err(msg));
                }
                let pairs = a[1..]
                    .chunks_exact(2)
                    .map(|p| (v(&p[0]), v(&p[1])))
                    .collect();
                HashCmd::Set {
                    key,
                    pairs,
                    ok: name == "HMSET",
                }
            }
            "HSETNX" => HashCmd::SetNx(key, v(&a[1]), v(&a[2])),
            "HGET" => HashCmd::Get(key, v(&a[1])),
            "HMGET" => HashCmd::MGet(key, a[1..].iter().map(v).collect()),
            "HGETALL" => HashCmd::GetAll(key),
            "HKEYS" => HashCmd::Keys(key),
            "HVALS" => HashCmd::Vals(key),
            "HDEL" => HashCmd::Del(key, a[1..].iter().map(v).collect()),
            "HINCRBY" => {
                let by = crate::parse::parse_i64(&a[2])
                    .ok_or_else(|| Reply::err("value is not an integer or out of range"))?;
                HashCmd::IncrBy(key, v(&a[1]), by)
            }
            "HLEN" => HashCmd::Len(key),
            "HEXISTS" => HashCmd::Exists(key, v(&a[1])),
            other => return Err(Reply::err(format!("'{other}' is not a hash command"))),
        };
        cmd.check_sizes()?;
        Ok(cmd)
    }

    fn check_sizes(&self) -> Result<(), Reply> {
        match self {
            HashCmd::Set { pairs, .. } => pairs
                .iter()
                .try_for_each(|(f, v)| check_sizes(f, Some(v)))
                .map_err(refused),
            HashCmd::SetNx(_, f, v) => check_sizes(f, Some(v)).map_err(refused),
            HashCmd::IncrBy(_, f, _) => check_sizes(f, None).map_err(refused),
            _ => Ok(()),
        }
    }

    /// The key the command names.
    pub fn key(&self) -> &Key {
        match self {
            HashCmd::Set { key, .. }
            | HashCmd::SetNx(key, ..)
            | HashCmd::Get(key, _)
            | HashCmd::MGet(key, _)
            | HashCmd::GetAll(key)
            | HashCmd::Keys(key)
            | HashCmd::Vals(key)
            | HashCmd::Del(key, _)
            | HashCmd::IncrBy(key, ..)
            | HashCmd::Len(key)
            | HashCmd::Exists(key, _) => key,
        }
    }

    /// Calls `on_value` with each field and value the command names (for the limits on
    /// values per command).
    pub fn values(&self, mut on_value: impl FnMut(&Value)) {
        match self {
            HashCmd::Set { pairs, .. } => pairs.iter().for_each(|(f, v)| {
                on_value(f);
                on_value(v);
            }),
            HashCmd::SetNx(_, f, v) => {
                on_value(f);
                on_value(v);
            }
            HashCmd::Get(_, f) | HashCmd::Exists(_, f) | HashCmd::IncrBy(_, f, _) => on_value(f),
            HashCmd::MGet(_, fs) | HashCmd::Del(_, fs) => fs.iter().for_each(on_value),
            HashCmd::GetAll(_) | HashCmd::Keys(_) | HashCmd::Vals(_) | HashCmd::Len(_) => {}
        }
    }

    /// Runs the command in `tx`: a read of the hash, then its updates.
    pub async fn run<H: SessionHandle>(&self, tx: &mut Tx<'_, H>) -> Result<Reply, Error> {
        let writes = matches!(
            self,
            HashCmd::Set { .. } | HashCmd::SetNx(..) | HashCmd::Del(..) | HashCmd::IncrBy(..)
        );
        let key = self.key().clone();
        let fields = read_hash(tx, &key, !writes).await?;
        match self {
            HashCmd::Set { pairs, ok, .. } => Ok(hset(tx, &key, &fields, pairs, *ok)),
            HashCmd::SetNx(_, f, v) => {
                let new = lookup(&fields, f).is_none();
                if new {
                    tx.update(key, hash_set(f, v));
                }
                Ok(Reply::Int(i64::from(new)))
            }
            HashCmd::Del(_, fs) => Ok(hdel(tx, &key, &fields, fs)),
            HashCmd::IncrBy(_, f, by) => Ok(hincrby(tx, &key, &fields, f, *by)),
            read => Ok(reply_of(read, fields)),
        }
    }
}

fn hash_set(field: &Value, value: &Value) -> Update {
    Update::HashSet {
        field: field.clone(),
        value: value.clone(),
    }
}

/// The fields and values the transaction sees in hash `key`, in field order; none for a
/// key that shows nothing. `finish`: a standalone command commits with the read.
async fn read_hash<H: SessionHandle>(
    tx: &mut Tx<'_, H>,
    key: &Key,
    finish: bool,
) -> Result<Vec<(Value, Value)>, Error> {
    let mut values = tx
        .read_then(vec![(key.clone(), ObjType::Hash)], Vec::new(), finish)
        .await?;
    Ok(match values.pop().map(|v| v.value) {
        Some(ObjValue::Hash(pairs)) => pairs,
        _ => Vec::new(),
    })
}

fn lookup<'v>(fields: &'v [(Value, Value)], field: &Value) -> Option<&'v Value> {
    fields
        .binary_search_by(|(f, _)| f.cmp(field))
        .ok()
        .map(|i| &fields[i].1)
}

/// `HSET`: one update per distinct field (the last value given wins, as in Redis);
/// answers how many fields were new (`HMSET`: `OK`).
fn hset<H: SessionHandle>(
    tx: &mut Tx<'_, H>,
    key: &Key,
    fields: &[(Value, Value)],
    pairs: &[(Value, Value)],
    ok: bool,
) -> Reply {
    let mut last: std::collections::BTreeMap<&Value, &Value> = Default::default();
    for (f, v) in pairs {
        last.insert(f, v);
    }
    let mut new = 0;
    for (f, v) in last {
        new += i64::from(lookup(fields, f).is_none());
        tx.update(key.clone(), hash_set(f, v));
    }
    match ok {
        true => Reply::Ok,
        false => Reply::Int(new),
    }
}

/// `HDEL`: removes each distinct field the snapshot shows; answers how many.
fn hdel<H: SessionHandle>(
    tx: &mut Tx<'_, H>,
    key: &Key,
    fields: &[(Value, Value)],
    asked: &[Value],
) -> Reply {
    let distinct: std::collections::BTreeSet<&Value> = asked.iter().collect();
    let mut removed = 0;
    for f in distinct.into_iter().filter(|f| lookup(fields, f).is_some()) {
        let update = Update::HashRemove { field: f.clone() };
        tx.update(key.clone(), update);
        removed += 1;
    }
    Reply::Int(removed)
}

/// `HINCRBY`: the field must hold a decimal integer (absent: 0) that the increment does
/// not overflow; answers the new value.
fn hincrby<H: SessionHandle>(
    tx: &mut Tx<'_, H>,
    key: &Key,
    fields: &[(Value, Value)],
    field: &Value,
    by: i64,
) -> Reply {
    let current = match lookup(fields, field) {
        None => 0,
        Some(v) => match causeway_core::crdt::decimal(v) {
            Some(n) => n,
            None => return Reply::err(HASH_NOT_AN_INTEGER),
        },
    };
    let Some(next) = current.checked_add(by) else {
        return Reply::err(COUNTER_OVERFLOW);
    };
    let update = Update::HashIncrement {
        field: field.clone(),
        delta: by,
    };
    tx.update(key.clone(), update);
    Reply::Int(next)
}

fn bulk(v: Value) -> Reply {
    Reply::Bulk(Bytes::from(v))
}

/// The reply of a command that only reads.
fn reply_of(cmd: &HashCmd, fields: Vec<(Value, Value)>) -> Reply {
    match cmd {
        HashCmd::Get(_, f) => lookup(&fields, f).map_or(Reply::Nil, |v| bulk(v.clone())),
        HashCmd::MGet(_, fs) => Reply::Array(
            fs.iter()
                .map(|f| lookup(&fields, f).map_or(Reply::Nil, |v| bulk(v.clone())))
                .collect(),
        ),
        HashCmd::GetAll(_) => Reply::Map(
            fields
                .into_iter()
                .map(|(f, v)| (bulk(f), bulk(v)))
                .collect(),
        ),
        HashCmd::Keys(_) => Reply::Array(fields.into_iter().map(|(f, _)| bulk(f)).collect()),
        HashCmd::Vals(_) => Reply::Array(fields.into_iter().map(|(_, v)| bulk(v)).collect()),
        HashCmd::Len(_) => Reply::Int(fields.len() as i64),
        HashCmd::Exists(_, f) => Reply::Int(i64::from(lookup(&fields, f).is_some())),
        writes => unreachable!("{writes:?} writes"),
    }
}
