//! The key space: `KEYS`, `SCAN`, `DBSIZE`, `FLUSHALL` and `FLUSHDB`, for every protocol,
//! from the nodes' own stores (`Request::ListKeys`): nothing is kept for them, so a write
//! costs what it did without them.
//!
//! **The walk.** The DC's partitions in order, each in its position order
//! (`causeway_core::keyorder`: a fixed 48-bit hash of the key, then the key), each page
//! listed by the node of the DC holding the partition (under PaRiS, the nearest DC holding
//! it) as its store is now. A node leaves out a key whose newest state shows nothing
//! (deleted, emptied). What a listing guarantees per protocol: docs/REDIS.md.
//!
//! **SCAN's cursor** is `partition * 2^48 + position`, in decimal (0: start, and end): the
//! next position to list. A page ends between positions only, so a key stored for a whole
//! walk is returned at least once whatever is written meanwhile, as Redis guarantees; a
//! key written or deleted during the walk may or may not be. A cursor handed out by one
//! node's front end is resumed by any other of the DC (every node orders keys alike).
//!
//! **FLUSHALL** walks the key space and deletes what it lists in causal transactions of
//! at most [`FLUSH_BATCH_KEYS_MAX`] keys, each as `DEL` does: a replicated, causally
//! ordered series of deletes, not one atomic step.

use crate::conn::error_reply;
use crate::glob::Glob;
use crate::limits::STANDALONE_RETRIES_MAX;
use crate::parse::parse_i64;
use crate::reply::Reply;
use crate::session::SessionHandle;
use crate::txn::{Scope, Tx};
use bytes::Bytes;
use causeway_core::keyorder::{PARTITION_SHIFT, POSITION_END};
use causeway_core::limits::LIST_KEYS_MAX;
use causeway_core::{Error, Key, KeyPage, ObjType, PartitionId, Request, Response};

/// Largest `SCAN ... COUNT`.
pub const SCAN_COUNT_MAX: usize = LIST_KEYS_MAX;
/// Partitions one `SCAN` call lists at most (a page over empty partitions then answers
/// fewer keys than `COUNT`, or none, and a cursor further on, as Redis may).
pub const SCAN_PARTITIONS_MAX: u32 = 16;
/// Most keys `KEYS` answers; past it `KEYS` is refused (use `SCAN`).
pub const KEYS_REPLY_MAX: usize = 65_536;
/// Keys one `FLUSHALL` batch (one transaction) deletes at most.
pub const FLUSH_BATCH_KEYS_MAX: usize = 64;

/// A position in the walk: the partition and the next position in it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Cursor {
    pub partition: u32,
    pub position: u64,
}

impl Cursor {
    pub const START: Cursor = Cursor {
        partition: 0,
        position: 0,
    };

    /// Parses a `SCAN` cursor (a decimal `u64`).
    pub fn parse(text: &[u8]) -> Result<Cursor, Reply> {
        let n = std::str::from_utf8(text)
            .ok()
            .and_then(|t| t.parse::<u64>().ok())
            .ok_or_else(|| Reply::err("invalid cursor"))?;
        Ok(Cursor {
            partition: u32::try_from(n >> PARTITION_SHIFT)
                .map_err(|_| Reply::err("invalid cursor"))?,
            position: n & (POSITION_END - 1),
        })
    }

    /// The number a client sees (0 at the end, as at the start).
    pub fn number(self) -> u64 {
        (u64::from(self.partition) << PARTITION_SHIFT) | self.position
    }

    /// The cursor after a page of `partition` that ended before `next` (`None`: at its end).
    fn after(partition: u32, next: Option<u64>, partitions: u32) -> Cursor {
        match next {
            Some(position) => Cursor {
                partition,
                position,
            },
            None if partition + 1 < partitions => Cursor {
                partition: partition + 1,
                position: 0,
            },
            None => Cursor::START,
        }
    }
}

/// One node page from `at`: its keys and the cursor after it (START at the end).
async fn page<H: SessionHandle>(
    handle: &mut H,
    at: Cursor,
    max: usize,
) -> Result<(Vec<(Key, ObjType)>, Cursor), Error> {
    let req = Request::ListKeys {
        partition: PartitionId(at.partition),
        from: at.position,
        max: max.min(LIST_KEYS_MAX) as u32,
    };
    match handle.call(req).await {
        Response::Keys(KeyPage {
            keys,
            next,
            partitions,
        }) => Ok((keys, Cursor::after(at.partition, next, partitions))),
        Response::Error(e) => Err(e),
        other => Err(Error::InvalidState(format!(
            "unexpected answer to ListKeys: {other:?}"
        ))),
    }
}

/// The `TYPE` name Redis gives a key of this type (`TYPE`, `SCAN ... TYPE`).
pub fn type_name(t: ObjType) -> &'static str {
    match t {
        ObjType::Lww | ObjType::Counter => "string",
        ObjType::Set => "set",
        ObjType::MvReg => "mvreg",
        ObjType::Hash => "hash",
        ObjType::List => "list",
        ObjType::ZSet => "zset",
    }
}

/// What a listing keeps: keys matching a pattern and of a type.
#[derive(Debug, Default)]
struct Filter {
    glob: Option<Glob>,
    kind: Option<String>,
}

impl Filter {
    fn keep(&self, (key, t): &(Key, ObjType)) -> bool {
        self.glob.as_ref().is_none_or(|g| g.matches(&key.0))
            && self
                .kind
                .as_ref()
                .is_none_or(|k| k.eq_ignore_ascii_case(type_name(*t)))
    }
}

/// Whether `name` is a command of this module.
pub fn is_keyspace(name: &str) -> bool {
    matches!(name, "KEYS" | "SCAN" | "DBSIZE" | "FLUSHALL" | "FLUSHDB")
}

/// Runs one of this module's commands (`args[0]` is its name) on an idle session.
pub async fn run<H: SessionHandle>(handle: &mut H, name: &str, args: &[Bytes]) -> Reply {
    let a = &args[1..];
    let result = match name {
        "KEYS" => match Glob::parse(&a[0]) {
            Ok(glob) => keys(handle, &glob).await,
            Err(e) => return Reply::err(e),
        },
        "SCAN" => match parse_scan(a) {
            Ok((cursor, filter, count)) => scan(handle, cursor, &filter, count).await,
            Err(reply) => return reply,
        },
        "DBSIZE" => db_size(handle).await,
        _ => match a {
            [] => flush_all(handle).await,
            [mode] if matches!(mode.to_ascii_uppercase().as_slice(), b"ASYNC" | b"SYNC") => {
                flush_all(handle).await
            }
            _ => return Reply::err("syntax error"),
        },
    };
    result.unwrap_or_else(|e| error_reply(&e))
}

/// `SCAN cursor [MATCH pattern] [COUNT count] [TYPE type]`.
fn parse_scan(a: &[Bytes]) -> Result<(Cursor, Filter, usize), Reply> {
    let cursor = Cursor::parse(&a[0])?;
    let (mut filter, mut count) = (Filter::default(), 10);
    for opt in a[1..].chunks(2) {
        let [name, value] = opt else {
            return Err(Reply::err("syntax error"));
        };
        match name.to_ascii_uppercase().as_slice() {
            b"MATCH" => filter.glob = Some(Glob::parse(value).map_err(Reply::err)?),
            b"COUNT" => count = scan_count(value)?,
            b"TYPE" => filter.kind = Some(String::from_utf8_lossy(value).into_owned()),
            _ => return Err(Reply::err("syntax error")),
        }
    }
    Ok((cursor, filter, count))
}

fn scan_count(value: &[u8]) -> Result<usize, Reply> {
    match parse_i64(value) {
        Some(n) if n < 1 => Err(Reply::err("syntax error")),
        Some(n) if n as u64 > SCAN_COUNT_MAX as u64 => Err(Reply::err(format!(
            "COUNT larger than {SCAN_COUNT_MAX} (SCAN_COUNT_MAX)"
        ))),
        Some(n) => Ok(n as usize),
        None => Err(Reply::err("value is not an integer or out of range")),
    }
}

fn bulks(keys: Vec<Key>) -> Reply {
    Reply::Array(
        keys.into_iter()
            .map(|k| Reply::Bulk(Bytes::from(k.0)))
            .collect(),
    )
}

/// `SCAN`: pages from `at` until `count` keys were listed (before the filter, as Redis
/// counts), the walk ended, or [`SCAN_PARTITIONS_MAX`] partitions were visited.
async fn scan<H: SessionHandle>(
    handle: &mut H,
    mut at: Cursor,
    filter: &Filter,
    count: usize,
) -> Result<Reply, Error> {
    let (mut out, mut listed) = (Vec::new(), 0);
    let last = at.partition.saturating_add(SCAN_PARTITIONS_MAX);
    loop {
        let (keys, next) = page(handle, at, count - listed).await?;
        listed += keys.len();
        out.extend(keys.into_iter().filter(|k| filter.keep(k)).map(|(k, _)| k));
        assert!(
            next == Cursor::START || next.number() > at.number(),
            "the walk advances"
        );
        at = next;
        if at == Cursor::START || listed >= count || at.partition >= last {
            break;
        }
    }
    let cursor = Bytes::from(at.number().to_string());
    Ok(Reply::Array(vec![Reply::Bulk(cursor), bulks(out)]))
}

/// Walks the whole key space in pages of the most keys a node answers, calling `each`
/// on every page.
async fn walk<H: SessionHandle>(
    handle: &mut H,
    mut each: impl FnMut(Vec<(Key, ObjType)>) -> Result<(), Error>,
) -> Result<(), Error> {
    let mut at = Cursor::START;
    loop {
        let (keys, next) = page(handle, at, LIST_KEYS_MAX).await?;
        each(keys)?;
        if next == Cursor::START {
            return Ok(());
        }
        assert!(next.number() > at.number(), "the walk advances");
        at = next;
    }
}

/// `KEYS pattern`: the whole walk, refused past [`KEYS_REPLY_MAX`] matching keys.
async fn keys<H: SessionHandle>(handle: &mut H, glob: &Glob) -> Result<Reply, Error> {
    let mut out = Vec::new();
    let over = || Error::LimitExceeded {
        what: "keys KEYS answers (KEYS_REPLY_MAX; use SCAN)".into(),
        max: KEYS_REPLY_MAX as u64,
    };
    walk(handle, |keys| {
        out.extend(
            keys.into_iter()
                .map(|(k, _)| k)
                .filter(|k| glob.matches(&k.0)),
        );
        (out.len() <= KEYS_REPLY_MAX).then_some(()).ok_or_else(over)
    })
    .await?;
    Ok(bulks(out))
}

/// `DBSIZE`: the whole walk, counted (its cost grows with the key count).
async fn db_size<H: SessionHandle>(handle: &mut H) -> Result<Reply, Error> {
    let mut count = 0;
    walk(handle, |keys| {
        count += keys.len();
        Ok(())
    })
    .await?;
    Ok(Reply::Int(count as i64))
}

/// `FLUSHALL`: pages of at most `batch` keys, each deleted in one causal transaction as
/// `DEL` does, until the walk ends. A batch over the store's updates limit (sets with
/// many members) is tried again with half the keys; an aborted one again as it was.
async fn flush_all<H: SessionHandle>(handle: &mut H) -> Result<Reply, Error> {
    let (mut at, mut batch, mut retries) = (Cursor::START, FLUSH_BATCH_KEYS_MAX, 0);
    loop {
        let (listed, next) = page(handle, at, batch).await?;
        let keys: Vec<Key> = listed.into_iter().map(|(k, _)| k).collect();
        match delete(handle, &keys).await {
            Ok(()) if next == Cursor::START => return Ok(Reply::Ok),
            Ok(()) => (at, batch, retries) = (next, FLUSH_BATCH_KEYS_MAX, 0),
            Err(Error::LimitExceeded { .. }) if batch > 1 => batch /= 2,
            Err(Error::Aborted(_)) if retries < STANDALONE_RETRIES_MAX => retries += 1,
            Err(e) => return Err(e),
        }
    }
}

/// Deletes `keys` in one causal transaction, as `DEL`.
async fn delete<H: SessionHandle>(handle: &mut H, keys: &[Key]) -> Result<(), Error> {
    if keys.is_empty() {
        return Ok(());
    }
    let mut tx = Tx::begin(handle, Scope::Command);
    let done = match crate::data::del(&mut tx, keys).await {
        Ok(_) => tx.commit().await,
        Err(e) => Err(e),
    };
    if done.is_err() {
        tx.abort().await;
    }
    done
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cursors_round_trip_and_refuse_nonsense() {
        let c = Cursor {
            partition: 7,
            position: 12345,
        };
        assert_eq!(Cursor::parse(c.number().to_string().as_bytes()), Ok(c));
        assert_eq!(Cursor::parse(b"0"), Ok(Cursor::START));
        assert!(Cursor::parse(b"-1").is_err());
        assert!(Cursor::parse(b"abc").is_err());
        assert_eq!(Cursor::after(7, None, 8), Cursor::START);
        assert_eq!(Cursor::after(6, None, 8).number(), 7 << PARTITION_SHIFT);
        assert_eq!(
            Cursor::after(6, Some(9), 8).number(),
            (6 << PARTITION_SHIFT) + 9
        );
    }
}
