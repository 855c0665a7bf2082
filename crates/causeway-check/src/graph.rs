//! A small directed graph over transactions with labelled edges: topological order, one
//! cycle as a counterexample when there is no order, and ancestor sets as bitsets.

use std::collections::BTreeSet;

/// Why an edge is in the graph, for counterexamples.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum EdgeKind {
    /// Session order: the same session ran the source first.
    Session,
    /// Write-read: the target read a write of the source.
    WriteRead,
    /// Arbitration: the source's write of a key must lose to the target's.
    Arbitration,
    /// Conflict order: two conflicting strong transactions, where the target is provably
    /// not in the source's past, so PoR puts the source in the target's.
    Conflict,
    /// Write-write: the target's write of a key directly follows the source's in the
    /// key's version order (PC-PSI).
    WriteWrite,
    /// Read-write anti-dependency: the target wrote the version right after the one the
    /// source read (PC-PSI).
    ReadWrite,
}

impl EdgeKind {
    pub fn name(self) -> &'static str {
        match self {
            EdgeKind::Session => "so",
            EdgeKind::WriteRead => "wr",
            EdgeKind::Arbitration => "ar",
            EdgeKind::Conflict => "cf",
            EdgeKind::WriteWrite => "ww",
            EdgeKind::ReadWrite => "rw",
        }
    }
}

#[derive(Clone, Debug, Default)]
pub struct Graph {
    succ: Vec<Vec<(usize, EdgeKind)>>,
    edges: BTreeSet<(usize, usize)>,
}

impl Graph {
    pub fn new(nodes: usize) -> Graph {
        Graph {
            succ: vec![Vec::new(); nodes],
            edges: BTreeSet::new(),
        }
    }

    pub fn len(&self) -> usize {
        self.succ.len()
    }

    pub fn is_empty(&self) -> bool {
        self.succ.is_empty()
    }

    pub fn edge_count(&self) -> usize {
        self.edges.len()
    }

    /// Adds `from -> to` unless present (self-loops are ignored: a txn never precedes
    /// itself in any of the relations we build).
    pub fn add(&mut self, from: usize, to: usize, kind: EdgeKind) {
        if from != to && self.edges.insert((from, to)) {
            self.succ[from].push((to, kind));
        }
    }

    /// The successors of `v`, each with the kind of the edge that first added it.
    pub fn successors(&self, v: usize) -> &[(usize, EdgeKind)] {
        &self.succ[v]
    }

    /// A topological order, or a cycle as `(from, to, kind)` edges.
    pub fn topo_order(&self) -> Result<Vec<usize>, Vec<(usize, usize, EdgeKind)>> {
        let n = self.len();
        let mut indegree = vec![0usize; n];
        for succ in &self.succ {
            for (to, _) in succ {
                indegree[*to] += 1;
            }
        }
        let mut ready: Vec<usize> = (0..n).filter(|v| indegree[*v] == 0).collect();
        let mut order = Vec::with_capacity(n);
        while let Some(v) = ready.pop() {
            order.push(v);
            for (to, _) in &self.succ[v] {
                indegree[*to] -= 1;
                if indegree[*to] == 0 {
                    ready.push(*to);
                }
            }
        }
        if order.len() == n {
            return Ok(order);
        }
        let stuck: Vec<bool> = indegree.iter().map(|d| *d > 0).collect();
        Err(self.find_cycle(&stuck))
    }

    /// Walks backwards among `stuck` nodes (each has a stuck predecessor, or Kahn's
    /// algorithm would have freed it) until a node repeats: the walk from its first visit,
    /// reversed, is a cycle.
    fn find_cycle(&self, stuck: &[bool]) -> Vec<(usize, usize, EdgeKind)> {
        let mut pred: Vec<Option<(usize, EdgeKind)>> = vec![None; self.len()];
        for (from, succ) in self.succ.iter().enumerate().filter(|(v, _)| stuck[*v]) {
            for &(to, kind) in succ {
                pred[to] = Some((from, kind));
            }
        }
        let start = stuck.iter().position(|s| *s).expect("a stuck node exists");
        let mut seen_at = vec![usize::MAX; self.len()];
        let mut path: Vec<(usize, usize, EdgeKind)> = Vec::new();
        let mut v = start;
        while seen_at[v] == usize::MAX {
            seen_at[v] = path.len();
            let (from, kind) = pred[v].expect("a stuck node has a stuck predecessor");
            path.push((from, v, kind));
            v = from;
        }
        let mut cycle = path.split_off(seen_at[v]);
        cycle.reverse();
        cycle
    }

    /// For each node, the set of its strict ancestors, computed along `order`.
    pub fn ancestors(&self, order: &[usize]) -> Vec<BitSet> {
        let n = self.len();
        let mut preds: Vec<Vec<usize>> = vec![Vec::new(); n];
        for (from, succ) in self.succ.iter().enumerate() {
            for (to, _) in succ {
                preds[*to].push(from);
            }
        }
        let mut anc = vec![BitSet::new(n); n];
        for &v in order {
            let mut acc = BitSet::new(n);
            for &p in &preds[v] {
                acc.union_with(&anc[p]);
                acc.insert(p);
            }
            anc[v] = acc;
        }
        anc
    }
}

/// A fixed-size set of node indices.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BitSet {
    words: Vec<u64>,
}

impl BitSet {
    pub fn new(bits: usize) -> BitSet {
        BitSet {
            words: vec![0; bits.div_ceil(64)],
        }
    }

    pub fn insert(&mut self, i: usize) {
        self.words[i / 64] |= 1 << (i % 64);
    }

    pub fn contains(&self, i: usize) -> bool {
        self.words[i / 64] & (1 << (i % 64)) != 0
    }

    pub fn union_with(&mut self, other: &BitSet) {
        for (a, b) in self.words.iter_mut().zip(&other.words) {
            *a |= *b;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn orders_a_dag_and_computes_ancestors() {
        let mut g = Graph::new(4);
        g.add(0, 1, EdgeKind::Session);
        g.add(1, 2, EdgeKind::WriteRead);
        g.add(0, 3, EdgeKind::WriteRead);
        let order = g.topo_order().expect("acyclic");
        let anc = g.ancestors(&order);
        assert!(anc[2].contains(0) && anc[2].contains(1) && !anc[2].contains(3));
        assert!(!anc[0].contains(0));
    }

    #[test]
    fn reports_the_cycle_it_finds() {
        let mut g = Graph::new(4);
        g.add(0, 1, EdgeKind::Session);
        g.add(1, 2, EdgeKind::WriteRead);
        g.add(2, 1, EdgeKind::Arbitration);
        g.add(2, 3, EdgeKind::Session);
        let cycle = g.topo_order().expect_err("cyclic");
        assert_eq!(cycle.len(), 2);
        assert_eq!(cycle[0].1, cycle[1].0);
        assert_eq!(cycle[1].1, cycle[0].0);
    }
}
