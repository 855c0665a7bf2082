//! A pipelined group in one exchange with the session: when no command's write depends on
//! what the group reads, the group's reads, all its writes and the commit go in one batch
//! (`Begin`, one `Read` of every key a command reads, the updates, `Commit`), and each
//! command's reply is worked out afterwards from the values read and the group's earlier
//! writes ([`replies`]).
//!
//! Which groups ([`plan`]): `GET`, `SET` without conditions, `MSET`, `INCRBY` and friends,
//! `SADD`, `SCARD`, `SISMEMBER` and `SMEMBERS`, with each key used as one type. Their
//! writes are the same whatever the group reads: `SET` assigns, `INCRBY` increments, `SADD`
//! adds (all but the members the read shows: a group with set adds goes as two batches,
//! its read, then its writes and the commit, `Tx::read_and_commit`). What a read could
//! have refused, the store refuses at the commit: an update of a key of another type
//! (`WRONGTYPE`) and an increment that would overflow the value it observes
//! (`crdt::COUNTER_OVERFLOW`) fail the commit, the group takes no effect, and each
//! command runs again alone (`Conn::run_pipelined`), as when the group path fails.
//! So a group answers what its commands answer one by one, as the other path does.
//!
//! Why: the other path (`Conn::group_together`) reads when the first command needs a key
//! and commits after the last, two calls at least; a pipeline of `SADD`s or `INCR`s of a
//! key on another node paid two round trips to it per group, and a `GET`/`SET` mix one per
//! key read. Here a protocol that ships a read with its commit (Cure's read-then-commit,
//! `kit::session`) serves the group in one exchange with the key's node.

use crate::data::{bulk_or_nil, wrongtype, DataCmd, SetCond};
use crate::reply::Reply;
use crate::txn::type_of;
use bytes::Bytes;
use causeway_core::limits::{READ_KEYS_MAX, TXN_UPDATES_MAX};
use causeway_core::{Key, ObjType, ObjValue, ReadValue, Request, Update, Value};
use std::collections::{BTreeMap, BTreeSet};

/// What a planned group sends after its `Begin`: one read, then the updates and `Commit`.
#[derive(Debug, PartialEq, Eq)]
pub struct Plan {
    /// Every key a command reads, once, as the type its commands use it as.
    pub keys: Vec<(Key, ObjType)>,
    /// Every write, in command order (an add of a member the group already added, once).
    pub updates: Vec<Request>,
}

/// How one command uses one key.
struct Use<'c> {
    key: &'c Key,
    as_type: ObjType,
    reads: bool,
}

/// The keys a plannable command uses; `None` for a command whose write depends on a read.
fn uses(cmd: &DataCmd) -> Option<Vec<Use<'_>>> {
    let one = |key, as_type, reads| {
        Some(vec![Use {
            key,
            as_type,
            reads,
        }])
    };
    match cmd {
        DataCmd::Get(k) => one(k, ObjType::Lww, true),
        DataCmd::Set {
            key,
            cond: SetCond::Always,
            get: false,
            ..
        } => one(key, ObjType::Lww, false),
        DataCmd::MSet(pairs) => Some(
            pairs
                .iter()
                .map(|(key, _)| Use {
                    key,
                    as_type: ObjType::Lww,
                    reads: false,
                })
                .collect(),
        ),
        DataCmd::IncrBy(k, _) => one(k, ObjType::Counter, true),
        DataCmd::SAdd(k, _)
        | DataCmd::SCard(k)
        | DataCmd::SIsMember(k, _)
        | DataCmd::SMembers(k) => one(k, ObjType::Set, true),
        _ => None,
    }
}

/// The one-exchange plan of a group, if it has one: every command plannable, each key
/// used as one type, at least one key read (a group that only writes is one call
/// anyway), and the read and the updates within the store's limits.
pub fn plan(cmds: &[DataCmd]) -> Option<Plan> {
    let mut types: BTreeMap<&Key, ObjType> = BTreeMap::new();
    let mut keys = Vec::new();
    for cmd in cmds {
        for u in uses(cmd)? {
            match types.get(u.key) {
                Some(t) if *t != u.as_type => return None,
                Some(_) => {}
                None => {
                    types.insert(u.key, u.as_type);
                }
            }
            let listed = keys.iter().any(|(k, _): &(Key, ObjType)| k == u.key);
            if u.reads && !listed {
                keys.push((u.key.clone(), u.as_type));
            }
        }
    }
    if keys.is_empty() || keys.len() > READ_KEYS_MAX {
        return None;
    }
    let updates = updates(cmds);
    (updates.len() <= TXN_UPDATES_MAX).then_some(Plan { keys, updates })
}

/// The group's writes in command order. A member added again is sent once: in the
/// optimized OR-set the later add would only replace the earlier one's tag, and nothing
/// outside the transaction sees between them (`Tx::update` says the same; no plannable
/// command removes a member, so the first add stays the latest update of it).
fn updates(cmds: &[DataCmd]) -> Vec<Request> {
    let mut added: BTreeSet<(&Key, &Value)> = BTreeSet::new();
    let mut out = Vec::new();
    let assign = |key: &Key, value: &Value| Request::Update {
        key: key.clone(),
        update: Update::Assign(value.clone()),
    };
    for cmd in cmds {
        match cmd {
            DataCmd::Set { key, value, .. } => out.push(assign(key, value)),
            DataCmd::MSet(pairs) => out.extend(pairs.iter().map(|(k, v)| assign(k, v))),
            DataCmd::IncrBy(key, by) => out.push(Request::Update {
                key: key.clone(),
                update: Update::Increment(*by),
            }),
            DataCmd::SAdd(key, elems) => {
                for e in elems {
                    if added.insert((key, e)) {
                        out.push(Request::Update {
                            key: key.clone(),
                            update: Update::Add(e.clone()),
                        });
                    }
                }
            }
            _ => {}
        }
    }
    out
}

/// Each command's reply, from the values the group's read returned (its snapshot) and
/// the group's own earlier writes, as each command would have answered alone after the
/// earlier ones. Only the keys read are followed: no later command reads another.
pub fn replies(cmds: &[DataCmd], values: Vec<ReadValue>) -> Vec<Reply> {
    let mut state: BTreeMap<Key, ObjValue> = values
        .into_iter()
        .map(|v| (v.key, sorted(v.value)))
        .collect();
    cmds.iter().map(|cmd| reply(cmd, &mut state)).collect()
}

/// A set's members sorted and distinct (the stores return them so; checked, not assumed).
fn sorted(value: ObjValue) -> ObjValue {
    match value {
        ObjValue::Set(mut members) if !members.is_sorted() => {
            members.sort();
            members.dedup();
            ObjValue::Set(members)
        }
        other => other,
    }
}

/// One command's reply against `state`, which it then updates with its own write.
fn reply(cmd: &DataCmd, state: &mut BTreeMap<Key, ObjValue>) -> Reply {
    match cmd {
        DataCmd::Get(k) => match state.get(k) {
            None | Some(ObjValue::Lww(None)) => Reply::Nil,
            Some(ObjValue::Lww(v)) => bulk_or_nil(v.clone()),
            Some(ObjValue::Counter(n)) => Reply::text(n.to_string()),
            Some(other) => mismatch(other, ObjType::Lww),
        },
        DataCmd::Set { key, value, .. } => {
            assign(state, key, value);
            Reply::Ok
        }
        DataCmd::MSet(pairs) => {
            for (key, value) in pairs {
                assign(state, key, value);
            }
            Reply::Ok
        }
        DataCmd::IncrBy(k, by) => increment(state, k, *by),
        DataCmd::SAdd(k, elems) => add_members(state, k, elems),
        DataCmd::SCard(k) | DataCmd::SIsMember(k, _) | DataCmd::SMembers(k) => {
            let empty = ObjValue::Set(Vec::new());
            let ObjValue::Set(members) = state.get(k).unwrap_or(&empty) else {
                return mismatch(&state[k], ObjType::Set);
            };
            match cmd {
                DataCmd::SCard(_) => Reply::Int(members.len() as i64),
                DataCmd::SIsMember(_, e) => Reply::Int(i64::from(members.binary_search(e).is_ok())),
                _ => Reply::Set(
                    members
                        .iter()
                        .map(|m| Reply::Bulk(Bytes::copy_from_slice(m)))
                        .collect(),
                ),
            }
        }
        other => unreachable!("{other:?} is not plannable (checked by plan)"),
    }
}

/// The error a command using a key as `asked` gets for a key holding `held`. The group's
/// read asked for that type, so a store answers a value of it or fails the read; this is
/// what the command alone would answer if one did not.
fn mismatch(held: &ObjValue, asked: ObjType) -> Reply {
    crate::conn::error_reply(&wrongtype(type_of(held), asked))
}

/// A register written by the group, followed where a later command reads it.
fn assign(state: &mut BTreeMap<Key, ObjValue>, key: &Key, value: &Value) {
    if let Some(slot) = state.get_mut(key) {
        *slot = ObjValue::Lww(Some(value.clone()));
    }
}

/// `INCRBY`: the increment committed, so it did not overflow the value it observed
/// (the prepare refuses one that would); the sum wraps as the counter does where a
/// protocol prepares against a later state than it read (`data::incr_by_at_once`).
fn increment(state: &mut BTreeMap<Key, ObjValue>, k: &Key, by: i64) -> Reply {
    let value = state.entry(k.clone()).or_insert(ObjValue::Counter(0));
    match value {
        ObjValue::Counter(n) => {
            *n = n.wrapping_add(by);
            Reply::Int(*n)
        }
        other => mismatch(other, ObjType::Counter),
    }
}

/// `SADD`: how many of `elems` were not members; adds them.
fn add_members(state: &mut BTreeMap<Key, ObjValue>, k: &Key, elems: &[Value]) -> Reply {
    let value = state.entry(k.clone()).or_insert(ObjValue::Set(Vec::new()));
    let ObjValue::Set(members) = value else {
        return mismatch(value, ObjType::Set);
    };
    let mut added = 0;
    for e in elems {
        if let Err(at) = members.binary_search(e) {
            members.insert(at, e.clone());
            added += 1;
        }
    }
    Reply::Int(added)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cmd(text: &str) -> DataCmd {
        let args: Vec<Bytes> = text
            .split(' ')
            .map(|w| Bytes::from(w.to_string()))
            .collect();
        let name = String::from_utf8(args[0].to_ascii_uppercase()).expect("ascii");
        DataCmd::parse(&name, &args).expect("a valid command")
    }

    fn cmds(texts: &[&str]) -> Vec<DataCmd> {
        texts.iter().map(|t| cmd(t)).collect()
    }

    fn key(k: &str) -> Key {
        Key(k.as_bytes().to_vec())
    }

    #[test]
    fn a_group_of_reads_and_blind_writes_is_one_read_then_its_updates() {
        let group = cmds(&[
            "SADD s a",
            "SADD s a b",
            "INCR n",
            "SET k v",
            "GET k",
            "GET j",
            "SCARD s",
        ]);
        let plan = plan(&group).expect("plannable");
        let want_keys = vec![
            (key("s"), ObjType::Set),
            (key("n"), ObjType::Counter),
            (key("k"), ObjType::Lww),
            (key("j"), ObjType::Lww),
        ];
        assert_eq!(
            plan.keys, want_keys,
            "each key read once, in first use order"
        );
        let updates: Vec<(Key, Update)> = plan
            .updates
            .into_iter()
            .map(|r| match r {
                Request::Update { key, update } => (key, update),
                other => panic!("not an update: {other:?}"),
            })
            .collect();
        let want = vec![
            (key("s"), Update::Add(b"a".to_vec())),
            (key("s"), Update::Add(b"b".to_vec())),
            (key("n"), Update::Increment(1)),
            (key("k"), Update::Assign(b"v".to_vec())),
        ];
        assert_eq!(updates, want, "the second add of a is not sent");
    }

    #[test]
    fn groups_whose_writes_depend_on_a_read_or_mix_types_have_no_plan() {
        for group in [
            &["SADD s a", "SREM s a"][..],
            &["SET k v NX", "GET k"],
            &["SET k v GET", "INCR n"],
            &["GET k", "DEL k"],
            &["GET k", "INCR k"],
            &["SET s v", "SADD s a"],
            &["SET k v", "MSET a 1 b 2"],
        ] {
            assert_eq!(plan(&cmds(group)), None, "{group:?}");
        }
    }

    #[test]
    fn replies_follow_the_snapshot_and_the_groups_own_writes() {
        let group = cmds(&[
            "GET k",
            "SET k w",
            "GET k",
            "INCRBY n 5",
            "DECR n",
            "SADD s a b",
            "SADD s b c",
            "SISMEMBER s c",
            "SMEMBERS s",
            "GET missing",
        ]);
        let read = |k: &str, value| ReadValue {
            key: key(k),
            value,
            observed: Vec::new(),
        };
        let values = vec![
            read("k", ObjValue::Lww(Some(b"v".to_vec()))),
            read("n", ObjValue::Counter(10)),
            read("s", ObjValue::Set(vec![b"b".to_vec(), b"a".to_vec()])),
            read("missing", ObjValue::Lww(None)),
        ];
        let want = vec![
            Reply::text("v"),
            Reply::Ok,
            Reply::text("w"),
            Reply::Int(15),
            Reply::Int(14),
            Reply::Int(0),
            Reply::Int(1),
            Reply::Int(1),
            Reply::Set(["a", "b", "c"].map(Reply::text).to_vec()),
            Reply::Nil,
        ];
        assert_eq!(replies(&group, values), want);
    }
}
