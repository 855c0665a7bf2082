//! `CLUSTER`: the Redis Cluster view of a DC, so cluster-aware clients (and
//! `redis-benchmark --cluster`) send each key to the node that holds it and skip the hop
//! between the node they reach and the key's node.
//!
//! Every RESP port of a DC accepts every key (a node forwards what it does not hold), so
//! the view is advice, never a constraint: no `MOVED` or `ASK` is ever returned, and no
//! `CROSSSLOT` error either (a transaction may span partitions). A key's slot is Redis
//! Cluster's (`causeway_core::topology::key_slot`, with hash tags); the DC's nodes with a
//! RESP port own the slots of their partitions, and the slots of a node without one go to
//! the node answering (which serves them through the hop).

use crate::conn::arity_error;
use crate::reply::Reply;
use bytes::Bytes;
use causeway_core::topology::{key_slot, SLOTS};

/// One node of the DC as `CLUSTER NODES` and `CLUSTER SLOTS` show it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClusterNode {
    /// 40 hex digits, the same on every node for the same cluster file.
    pub id: String,
    pub ip: String,
    pub port: u16,
    /// The node answering.
    pub myself: bool,
    /// Inclusive slot ranges, ascending.
    pub slots: Vec<(u16, u16)>,
}

/// `CLUSTER subcommand ...` over the DC's view (empty: the front end has no view).
pub fn cluster(view: &[ClusterNode], args: &[Bytes]) -> Reply {
    let sub = String::from_utf8_lossy(&args[1]).to_ascii_uppercase();
    if sub == "KEYSLOT" {
        return match args.len() {
            3 => Reply::Int(i64::from(key_slot(&args[2]))),
            _ => arity_error("cluster|keyslot"),
        };
    }
    if view.is_empty() {
        return Reply::err("This instance has cluster support disabled");
    }
    let myself = view.iter().find(|n| n.myself).unwrap_or(&view[0]);
    match sub.as_str() {
        "NODES" => Reply::Verbatim(nodes(view)),
        "SLOTS" => slots(view),
        "SHARDS" => shards(view),
        "MYID" => Reply::text(myself.id.clone()),
        "INFO" => Reply::Verbatim(info(view)),
        _ => Reply::err(format!(
            "unknown subcommand '{sub}'; Causeway answers CLUSTER NODES, SLOTS, SHARDS, \
             MYID, INFO and KEYSLOT"
        )),
    }
}

fn range_text(&(first, last): &(u16, u16)) -> String {
    match first == last {
        true => first.to_string(),
        false => format!("{first}-{last}"),
    }
}

/// The `CLUSTER NODES` text: one line per node, every one a master that is connected.
fn nodes(view: &[ClusterNode]) -> String {
    let mut text = String::new();
    for n in view {
        let flags = if n.myself { "myself,master" } else { "master" };
        let slots: Vec<String> = n.slots.iter().map(range_text).collect();
        text.push_str(&format!(
            "{} {}:{}@0 {flags} - 0 0 0 connected {}\n",
            n.id,
            n.ip,
            n.port,
            slots.join(" ")
        ));
    }
    text
}

fn endpoint(n: &ClusterNode) -> Reply {
    Reply::Array(vec![
        Reply::text(n.ip.clone()),
        Reply::Int(i64::from(n.port)),
        Reply::text(n.id.clone()),
    ])
}

/// `CLUSTER SLOTS`: `[first, last, [ip, port, id]]` per range, ascending.
fn slots(view: &[ClusterNode]) -> Reply {
    let mut ranges: Vec<(&(u16, u16), &ClusterNode)> = view
        .iter()
        .flat_map(|n| n.slots.iter().map(move |r| (r, n)))
        .collect();
    ranges.sort_by_key(|(r, _)| r.0);
    let rows = ranges.into_iter().map(|(&(first, last), n)| {
        Reply::Array(vec![
            Reply::Int(i64::from(first)),
            Reply::Int(i64::from(last)),
            endpoint(n),
        ])
    });
    Reply::Array(rows.collect())
}

/// `CLUSTER SHARDS`: one shard per node, with its slots and the node itself.
fn shards(view: &[ClusterNode]) -> Reply {
    let shard = |n: &ClusterNode| {
        let slots = n
            .slots
            .iter()
            .flat_map(|&(a, b)| [Reply::Int(i64::from(a)), Reply::Int(i64::from(b))]);
        let node = Reply::Map(vec![
            (Reply::text("id"), Reply::text(n.id.clone())),
            (Reply::text("port"), Reply::Int(i64::from(n.port))),
            (Reply::text("ip"), Reply::text(n.ip.clone())),
            (Reply::text("endpoint"), Reply::text(n.ip.clone())),
            (Reply::text("role"), Reply::text("master")),
            (Reply::text("replication-offset"), Reply::Int(0)),
            (Reply::text("health"), Reply::text("online")),
        ]);
        Reply::Map(vec![
            (Reply::text("slots"), Reply::Array(slots.collect())),
            (Reply::text("nodes"), Reply::Array(vec![node])),
        ])
    };
    Reply::Array(view.iter().map(shard).collect())
}

/// `CLUSTER INFO`: every slot is served, always (any node serves any key).
fn info(view: &[ClusterNode]) -> String {
    let n = view.len();
    format!(
        "cluster_enabled:1\r\ncluster_state:ok\r\ncluster_slots_assigned:{SLOTS}\r\n\
         cluster_slots_ok:{SLOTS}\r\ncluster_slots_pfail:0\r\ncluster_slots_fail:0\r\n\
         cluster_known_nodes:{n}\r\ncluster_size:{n}\r\ncluster_current_epoch:0\r\n\
         cluster_my_epoch:0\r\n"
    )
}

/// Adds `slots` to `ranges` (ascending), merging it with the last range when adjacent.
pub fn push_range(ranges: &mut Vec<(u16, u16)>, (first, last): (u16, u16)) {
    match ranges.last_mut() {
        Some(prev) if u32::from(prev.1) + 1 == u32::from(first) => prev.1 = last,
        _ => ranges.push((first, last)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn view() -> Vec<ClusterNode> {
        let node = |id: char, port, myself, slots| ClusterNode {
            id: id.to_string().repeat(40),
            ip: "127.0.0.1".into(),
            port,
            myself,
            slots,
        };
        vec![
            node('a', 7001, true, vec![(0, 8191)]),
            node('b', 7002, false, vec![(8192, 16382), (16383, 16383)]),
        ]
    }

    fn call(view: &[ClusterNode], args: &[&str]) -> Reply {
        let args: Vec<Bytes> = args.iter().map(|a| Bytes::from(a.to_string())).collect();
        cluster(view, &args)
    }

    #[test]
    fn nodes_lists_every_node_with_its_slot_ranges() {
        let Reply::Verbatim(text) = call(&view(), &["cluster", "nodes"]) else {
            panic!("CLUSTER NODES is text")
        };
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(
            lines,
            [
                format!(
                    "{} 127.0.0.1:7001@0 myself,master - 0 0 0 connected 0-8191",
                    "a".repeat(40)
                ),
                format!(
                    "{} 127.0.0.1:7002@0 master - 0 0 0 connected 8192-16382 16383",
                    "b".repeat(40)
                ),
            ]
        );
    }

    #[test]
    fn slots_gives_each_range_its_node_in_slot_order() {
        let Reply::Array(rows) = call(&view(), &["CLUSTER", "SLOTS"]) else {
            panic!("CLUSTER SLOTS is an array")
        };
        let firsts: Vec<Reply> = rows
            .iter()
            .map(|r| match r {
                Reply::Array(f) => f[0].clone(),
                _ => panic!("a row is an array"),
            })
            .collect();
        assert_eq!(firsts, [Reply::Int(0), Reply::Int(8192), Reply::Int(16383)]);
        assert_eq!(
            rows[1],
            Reply::Array(vec![
                Reply::Int(8192),
                Reply::Int(16382),
                Reply::Array(vec![
                    Reply::text("127.0.0.1"),
                    Reply::Int(7002),
                    Reply::text("b".repeat(40))
                ])
            ])
        );
    }

    #[test]
    fn keyslot_works_without_a_view_and_the_rest_needs_one() {
        assert_eq!(call(&[], &["CLUSTER", "KEYSLOT", "foo"]), Reply::Int(12182));
        assert_eq!(
            call(&[], &["cluster", "keyslot", "{foo}.x"]),
            Reply::Int(12182)
        );
        let off = call(&[], &["CLUSTER", "NODES"]);
        assert_eq!(
            off,
            Reply::err("This instance has cluster support disabled")
        );
        assert_eq!(
            call(&view(), &["CLUSTER", "MYID"]),
            Reply::text("a".repeat(40))
        );
        assert!(call(&view(), &["CLUSTER", "MEET", "x", "1"]).is_error());
        let Reply::Verbatim(info) = call(&view(), &["CLUSTER", "INFO"]) else {
            panic!("CLUSTER INFO is text")
        };
        assert!(
            info.contains("cluster_state:ok\r\n") && info.contains("cluster_known_nodes:2\r\n")
        );
    }

    #[test]
    fn adjacent_ranges_merge() {
        let mut ranges = Vec::new();
        push_range(&mut ranges, (0, 9));
        push_range(&mut ranges, (10, 19));
        push_range(&mut ranges, (30, 39));
        assert_eq!(ranges, [(0, 19), (30, 39)]);
    }
}
