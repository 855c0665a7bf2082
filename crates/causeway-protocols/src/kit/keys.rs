//! `Request::ListKeys` for every protocol: a session asks the node of its DC holding a
//! partition (`ListAsk`), which answers from its store as it is now (`ListAnswer`): no
//! snapshot, no replication, no record. The order is `causeway_core::keyorder`'s.
//!
//! A node keeps the order as a sorted copy of its keys ([`KeyOrder`]), rebuilt when a
//! listing finds the store holding more keys than the copy: a write adds nothing but the
//! key to the store it writes anyway, so listing costs writes nothing.

use crate::kit::session::SessionCore;
use causeway_core::keyorder::{key_position, POSITION_END};
use causeway_core::limits::{LIST_KEYS_MAX, LIST_VISIT_MAX};
use causeway_core::{Addr, Ctx, DcId, Error, Key, KeyPage, NodeId, ObjType, PartitionId, Response};
use serde::{Deserialize, Serialize};

/// A session's ask for a page of a partition's keys.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ListAsk {
    pub req: u64,
    pub partition: PartitionId,
    pub from: u64,
    pub max: u32,
}

/// A node's answer to a [`ListAsk`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ListAnswer {
    pub req: u64,
    pub page: Result<KeyPage, Error>,
}

/// A store's keys sorted by (group, position, key): a cache, not state. The group is the
/// key's partition for a store holding several (eventual's, Occult's: one per node), 0
/// for a store of one partition (`mvstore`).
#[derive(Clone, Debug, Default)]
pub struct KeyOrder {
    sorted: Vec<(u32, u64, Key)>,
    /// Whether `sorted` is to be rebuilt before the next listing.
    stale: bool,
}

/// A page of keys with their shown types, and the position to go on from.
pub type Listing = (Vec<(Key, ObjType)>, Option<u64>);

/// What to list: the group (partition), the first position, the most keys.
pub type ListFrom = (u32, u64, u32);

impl KeyOrder {
    /// Forgets the copy (the store's key set changed other than by growing).
    pub fn invalidate(&mut self) {
        self.stale = true;
    }

    /// Lists up to `max` keys of `group` from position `from` that `shown` gives a type,
    /// and the position to go on from. `count` is the store's key count: stores never drop
    /// a key except when replaced wholesale (which calls [`KeyOrder::invalidate`]), so a
    /// count other than the copy's means new keys. `keys` lists them all with their
    /// groups, in any order, only when the copy is rebuilt.
    pub fn list<'k>(
        &mut self,
        count: usize,
        keys: impl FnOnce() -> Vec<(u32, &'k Key)>,
        shown: impl Fn(&Key) -> Option<ObjType>,
        (group, from, max): ListFrom,
    ) -> Listing {
        if self.stale || count != self.sorted.len() {
            self.sorted = keys()
                .into_iter()
                .map(|(g, k)| (g, key_position(&k.0), k.clone()))
                .collect();
            self.sorted.sort_unstable();
            self.stale = false;
        }
        let max = (max as usize).clamp(1, LIST_KEYS_MAX);
        let mut at = self
            .sorted
            .partition_point(|(g, p, _)| (*g, *p) < (group, from));
        let mut out = Vec::new();
        let mut visited = 0;
        while at < self.sorted.len() && self.sorted[at].0 == group {
            let pos = self.sorted[at].1;
            // A page ends between positions only (`keyorder`: every key of one position
            // goes in one page), and after a bounded visit.
            if out.len() >= max || visited >= LIST_VISIT_MAX {
                return (out, Some(pos));
            }
            while at < self.sorted.len() && self.sorted[at].0 == group && self.sorted[at].1 == pos {
                let key = &self.sorted[at].2;
                if let Some(t) = shown(key) {
                    out.push((key.clone(), t));
                }
                visited += 1;
                at += 1;
            }
        }
        assert!(out.len() < max + LIST_KEYS_MAX, "a page stays bounded");
        (out, None)
    }
}

/// The DC whose node lists `partition` for a session of `dc`: its own when it replicates
/// the partition, else the nearest one that does (PaRiS's partial replication).
pub fn lister_dc(core: &SessionCore, partition: PartitionId) -> DcId {
    let topo = &core.topology;
    match topo.replicates(core.dc, partition) {
        true => core.dc,
        false => topo.nearest_replica_paris(core.dc, partition),
    }
}

/// Starts a `ListKeys` request (`ClientProtocol::list_keys`): sends the ask, wrapped in
/// the protocol's message by `wrap`, to the node listing the partition, or answers an
/// error at once (a partition the cluster lacks, a position past the end).
pub fn start<M>(
    core: &mut SessionCore,
    ctx: &mut Ctx<M>,
    (partition, from, max): (PartitionId, u64, u32),
    wrap: impl FnOnce(ListAsk) -> M,
) {
    if partition.0 >= core.topology.partitions || from >= POSITION_END {
        let e = Error::InvalidState(format!(
            "no partition {} at position {from}: the cluster has {} partitions",
            partition.0, core.topology.partitions
        ));
        return core.answer(ctx, Response::Error(e));
    }
    let node: NodeId = core.topology.node_of(lister_dc(core, partition), partition);
    let req = core.start_request(ctx);
    let max = max.min(LIST_KEYS_MAX as u32);
    let ask = ListAsk {
        req,
        partition,
        from,
        max,
    };
    ctx.send(Addr::Node(node), wrap(ask));
}

/// Answers the application with a node's [`ListAnswer`], if it answers the running
/// request (a late answer to an earlier one is dropped).
pub fn answered<M>(core: &mut SessionCore, ctx: &mut Ctx<M>, answer: ListAnswer) {
    if !core.is_current(answer.req) {
        return;
    }
    let response = match answer.page {
        Ok(page) => Response::Keys(page),
        Err(e) => Response::Error(e),
    };
    core.answer(ctx, response);
}

/// A node's answer: the page `list` gives for a partition it holds, else an error.
pub fn answer(ask: &ListAsk, partitions: u32, list: Option<Listing>) -> ListAnswer {
    let page = match list {
        Some((keys, next)) => Ok(KeyPage {
            keys,
            next,
            partitions,
        }),
        None => Err(Error::InvalidState(format!(
            "partition {} is not stored at this node",
            ask.partition.0
        ))),
    };
    ListAnswer { req: ask.req, page }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(s: &str) -> Key {
        Key(s.as_bytes().to_vec())
    }

    #[test]
    fn pages_walk_every_shown_key_once_in_position_order() {
        let keys: Vec<Key> = (0..100).map(|i| key(&format!("k{i}"))).collect();
        let shown = |k: &Key| (k.0 != b"k7").then_some(ObjType::Lww);
        let mut order = KeyOrder::default();
        let (mut from, mut seen) = (0, Vec::new());
        loop {
            let all = || keys.iter().map(|k| (0, k)).collect();
            let (page, next) = order.list(keys.len(), all, shown, (0, from, 7));
            assert!(page.len() <= 7);
            seen.extend(page.into_iter().map(|(k, _)| k));
            match next {
                Some(n) => from = n,
                None => break,
            }
        }
        assert_eq!(seen.len(), 99, "every key but the hidden one");
        let positions: Vec<u64> = seen.iter().map(|k| key_position(&k.0)).collect();
        assert!(
            positions.windows(2).all(|w| w[0] < w[1]),
            "in position order"
        );
    }

    #[test]
    fn a_grown_store_is_listed_again_and_an_invalidated_one_rebuilt() {
        let mut keys = vec![key("a")];
        let mut order = KeyOrder::default();
        let all = |ks: &Vec<Key>| ks.len();
        let lww = |_: &Key| Some(ObjType::Lww);
        let (page, _) = order.list(
            all(&keys),
            || keys.iter().map(|k| (0, k)).collect(),
            lww,
            (0, 0, 10),
        );
        assert_eq!(page.len(), 1);
        keys.push(key("b"));
        let (page, _) = order.list(
            all(&keys),
            || keys.iter().map(|k| (0, k)).collect(),
            lww,
            (0, 0, 10),
        );
        assert_eq!(page.len(), 2, "a new key is listed");
        keys[1] = key("c");
        order.invalidate();
        let (page, _) = order.list(
            all(&keys),
            || keys.iter().map(|k| (0, k)).collect(),
            lww,
            (0, 0, 10),
        );
        assert!(
            page.iter().any(|(k, _)| *k == key("c")),
            "replaced store rebuilt"
        );
    }

    #[test]
    fn a_group_lists_only_its_own_keys() {
        let keys: Vec<Key> = (0..20).map(|i| key(&format!("k{i}"))).collect();
        let mut order = KeyOrder::default();
        let grouped = || {
            keys.iter()
                .enumerate()
                .map(|(i, k)| (i as u32 % 2, k))
                .collect()
        };
        let (page, next) = order.list(keys.len(), grouped, |_| Some(ObjType::Set), (1, 0, 100));
        assert_eq!((page.len(), next), (10, None));
        assert!(page
            .iter()
            .all(|(k, _)| keys.iter().position(|x| x == k).unwrap() % 2 == 1));
    }
}
