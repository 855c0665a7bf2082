//! The list commands: `LPUSH`, `RPUSH`, `LPOP`, `RPOP`, `LRANGE`, `LLEN`, `LINDEX`, on
//! core's list (`crdt::list`: RGA with pushes at the two ends). Each reads the
//! transaction's snapshot; a push writes one update with all its values, a pop one update
//! that removes the elements it observed, so concurrent commands resolve by the list's
//! rules (docs/REDIS.md): concurrent pushes at one end interleave by timestamp, two pops
//! of one element both return it and remove it once, and an element pushed concurrently
//! with a pop survives it.

use crate::reply::Reply;
use crate::session::SessionHandle;
use crate::txn::Tx;
use bytes::Bytes;
use causeway_core::crdt::list::check_sizes;
use causeway_core::{Error, Key, ObjType, ObjValue, Update, Value};

/// A list command with its arguments checked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ListCmd {
    /// `LPUSH` (`left`) or `RPUSH` of values, in command order.
    Push {
        key: Key,
        left: bool,
        values: Vec<Value>,
    },
    /// `LPOP` (`left`) or `RPOP`, with the count if one was given.
    Pop {
        key: Key,
        left: bool,
        count: Option<u64>,
    },
    Range(Key, i64, i64),
    Len(Key),
    Index(Key, i64),
}

/// Whether `name` (upper case) is a list command.
pub fn is_list(name: &str) -> bool {
    matches!(
        name,
        "LPUSH" | "RPUSH" | "LPOP" | "RPOP" | "LRANGE" | "LLEN" | "LINDEX"
    )
}

fn integer(b: &Bytes) -> Result<i64, Reply> {
    crate::parse::parse_i64(b).ok_or_else(|| Reply::err("value is not an integer or out of range"))
}

impl ListCmd {
    /// Builds the command named `name` from its arguments after the name (arity checked
    /// against the command table); elements past their limits are refused.
    pub fn parse(name: &str, a: &[Bytes]) -> Result<ListCmd, Reply> {
        let key = Key(a[0].to_vec());
        let left = name.starts_with('L');
        Ok(match name {
            "LPUSH" | "RPUSH" => {
                let values: Vec<Value> = a[1..].iter().map(|v| v.to_vec()).collect();
                check_sizes(&values).map_err(|e| Reply::err(e.to_string()))?;
                ListCmd::Push { key, left, values }
            }
            "LPOP" | "RPOP" => {
                if a.len() > 2 {
                    let lower = name.to_ascii_lowercase();
                    let msg = format!("wrong number of arguments for '{lower}' command");
                    return Err(Reply::err(msg));
                }
                let count = match a.get(1) {
                    None => None,
                    Some(c) => match integer(c)? {
                        n if n < 0 => {
                            return Err(Reply::err("value is out of range, must be positive"))
                        }
                        n => Some(n as u64),
                    },
                };
                ListCmd::Pop { key, left, count }
            }
            "LRANGE" => ListCmd::Range(key, integer(&a[1])?, integer(&a[2])?),
            "LLEN" => ListCmd::Len(key),
            "LINDEX" => ListCmd::Index(key, integer(&a[1])?),
            other => return Err(Reply::err(format!("'{other}' is not a list command"))),
        })
    }

    /// The key the command names.
    pub fn key(&self) -> &Key {
        match self {
            ListCmd::Push { key, .. }
            | ListCmd::Pop { key, .. }
            | ListCmd::Range(key, ..)
            | ListCmd::Len(key)
            | ListCmd::Index(key, _) => key,
        }
    }

    /// Calls `on_value` with each value the command names (for the limits on values per
    /// command).
    pub fn values(&self, on_value: impl FnMut(&Value)) {
        if let ListCmd::Push { values, .. } = self {
            values.iter().for_each(on_value);
        }
    }

    /// Runs the command in `tx`: a read of the list, then its update.
    pub async fn run<H: SessionHandle>(&self, tx: &mut Tx<'_, H>) -> Result<Reply, Error> {
        let writes = matches!(self, ListCmd::Push { .. } | ListCmd::Pop { .. });
        let key = self.key().clone();
        let elems = read_list(tx, &key, !writes).await?;
        Ok(match self {
            ListCmd::Push { left, values, .. } => {
                let update = Update::ListPush {
                    left: *left,
                    values: values.clone(),
                };
                tx.update(key, update);
                Reply::Int((elems.len() + values.len()) as i64)
            }
            ListCmd::Pop { left, count, .. } => pop(tx, key, elems, *left, *count),
            ListCmd::Range(_, start, stop) => {
                let (from, to) = range(elems.len(), *start, *stop);
                Reply::Array(elems[from..to].iter().cloned().map(bulk).collect())
            }
            ListCmd::Len(_) => Reply::Int(elems.len() as i64),
            ListCmd::Index(_, i) => match range(elems.len(), *i, *i) {
                (from, to) if from < to => bulk(elems[from].clone()),
                _ => Reply::Nil,
            },
        })
    }
}

/// The elements the transaction sees in list `key`, head first; none for a key that
/// shows nothing. `finish`: a standalone command commits with the read.
async fn read_list<H: SessionHandle>(
    tx: &mut Tx<'_, H>,
    key: &Key,
    finish: bool,
) -> Result<Vec<Value>, Error> {
    let mut values = tx
        .read_then(vec![(key.clone(), ObjType::List)], Vec::new(), finish)
        .await?;
    Ok(match values.pop().map(|v| v.value) {
        Some(ObjValue::List(elems)) => elems,
        _ => Vec::new(),
    })
}

fn bulk(v: Value) -> Reply {
    Reply::Bulk(Bytes::from(v))
}

/// `LPOP`/`RPOP`: removes up to `count` observed elements from the end (one without a
/// count); answers them (the element alone without a count, nil for an empty list).
fn pop<H: SessionHandle>(
    tx: &mut Tx<'_, H>,
    key: Key,
    elems: Vec<Value>,
    left: bool,
    count: Option<u64>,
) -> Reply {
    if elems.is_empty() {
        return match count {
            None => Reply::Nil,
            Some(_) => Reply::NilArray,
        };
    }
    let n = count.unwrap_or(1).min(elems.len() as u64) as usize;
    if n > 0 {
        tx.update(
            key,
            Update::ListPop {
                left,
                count: n as u64,
            },
        );
    }
    let taken: Vec<Value> = match left {
        true => elems.into_iter().take(n).collect(),
        false => elems.into_iter().rev().take(n).collect(),
    };
    match count {
        None => taken.into_iter().next().map_or(Reply::Nil, bulk),
        Some(_) => Reply::Array(taken.into_iter().map(bulk).collect()),
    }
}

/// Redis's index range `start..=stop` of a list of `len` (negative counts from the
/// end), as a half-open range of indexes, empty when nothing falls in it.
pub(crate) fn range(len: usize, start: i64, stop: i64) -> (usize, usize) {
    let len = len as i64;
    let at = |i: i64| if i < 0 { len + i } else { i };
    let (from, to) = (at(start).max(0), at(stop).min(len - 1));
    if from > to || from >= len {
        return (0, 0);
    }
    (from as usize, to as usize + 1)
}

#[cfg(test)]
mod tests {
    use super::range;

    /// Redis's LRANGE index rules: negatives from the end, out of range clamped, an
    /// inverted or past-the-end range empty.
    #[test]
    fn ranges_follow_redis() {
        assert_eq!(range(5, 0, -1), (0, 5));
        assert_eq!(range(5, 1, 2), (1, 3));
        assert_eq!(range(5, -2, -1), (3, 5));
        assert_eq!(range(5, -100, 100), (0, 5));
        assert_eq!(range(5, 3, 1), (0, 0));
        assert_eq!(range(5, 5, 10), (0, 0));
        assert_eq!(range(0, 0, -1), (0, 0));
        assert_eq!(range(5, 0, 99), (0, 5));
        assert_eq!(range(600, 0, 99), (0, 100));
    }
}
