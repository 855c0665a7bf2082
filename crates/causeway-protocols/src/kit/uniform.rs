//! Uniformity tracking (UniStore §5.1, §5.4, Alg. 2 l.31-36): which transactions are known
//! to be stored in at least f+1 DCs including ours. A replica keeps the stable vector each
//! DC reported (`stableMatrix`, its own DC's row being its own stable vector) and derives
//! `uniformVec`: entry `j` is the highest local timestamp of DC `j` that some group of f+1
//! DCs including ours has all stored. Every vector only grows (joins), so a late or
//! reordered report never takes back what was claimed.
//!
//! The max over groups of the min over a group's rows (Alg. 2 l.33-35) is computed without
//! enumerating groups: the best group takes our DC and the f other DCs with the highest
//! entry `j`, so the answer is `min(own[j], f-th highest of the others' [j])`.

use causeway_core::Vc;

/// The f-th highest of `others` (1-based), capped by `own`: the best a group of f+1 DCs
/// including ours has all stored (Alg. 2 l.35). `f = 0` is `own`; too few others is 0.
pub fn group_floor(own: u64, others: &[u64], f: usize) -> u64 {
    if f == 0 {
        return own;
    }
    if others.len() < f {
        return 0;
    }
    let mut sorted = others.to_vec();
    sorted.sort_unstable_by(|a, b| b.cmp(a));
    own.min(sorted[f - 1])
}

/// A replica's stable matrix and uniform vector.
#[derive(Clone, Debug)]
pub struct Uniform {
    /// Our DC's index.
    d: usize,
    /// How many DC failures are tolerated: uniform means stored in f+1 DCs.
    f: usize,
    /// `stableMatrix[h]`: the highest stable vector DC `h` reported (row `d` is ours).
    matrix: Vec<Vc>,
    /// `uniformVec` (monotonic).
    vec: Vc,
}

impl Uniform {
    /// Tracking for DC `d` of `dcs`, tolerating `f` DC failures.
    pub fn new(dcs: usize, d: usize, f: usize) -> Uniform {
        assert!(d < dcs && f < dcs, "uniformity needs f < dcs and d < dcs");
        Uniform {
            d,
            f,
            matrix: vec![Vc::zero(dcs); dcs],
            vec: Vc::zero(dcs),
        }
    }

    pub fn f(&self) -> usize {
        self.f
    }

    /// `uniformVec`.
    pub fn vec(&self) -> &Vc {
        &self.vec
    }

    /// Records DC `h`'s stable vector (STABLEVEC, Alg. 2 l.31-32); ours is row `d`.
    pub fn report(&mut self, h: usize, stable: &Vc) {
        if let Some(row) = self.matrix.get_mut(h) {
            row.join(stable);
        }
    }

    /// Recomputes `uniformVec` from the matrix (Alg. 2 l.33-36); true if it advanced.
    pub fn recompute(&mut self) -> bool {
        let dcs = self.matrix.len();
        let mut advanced = false;
        for j in 0..dcs {
            let own = self.matrix[self.d].get(j);
            let others: Vec<u64> = (0..dcs)
                .filter(|h| *h != self.d)
                .map(|h| self.matrix[h].get(j))
                .collect();
            let ts = group_floor(own, &others, self.f);
            if ts > self.vec.get(j) {
                self.vec.set(j, ts);
                advanced = true;
            }
        }
        advanced
    }

    /// Adopts the remote entries of a snapshot or a client's past (Alg. 1 l.2-3, l.19-20,
    /// l.37-38): they were uniform where they were read, and uniformity is DC-independent.
    pub fn adopt_remote(&mut self, v: &Vc) {
        for i in (0..v.dcs.len()).filter(|i| *i != self.d) {
            if v.get(i) > self.vec.get(i) {
                self.vec.set(i, v.get(i));
            }
        }
    }

    /// Forces `uniformVec` to at least `v` (the `visible-before-uniform` mutation).
    pub fn force(&mut self, v: &Vc) {
        self.vec.join(v);
    }

    /// UNIFORM_BARRIER's condition (Alg. 1 l.50): our DC's entry of `past` is uniform.
    pub fn covers_local(&self, past: &Vc) -> bool {
        past.get(self.d) <= self.vec.get(self.d)
    }

    /// ATTACH's condition (Alg. 1 l.52): every remote entry of `past` is uniform here.
    pub fn covers_remote(&self, past: &Vc) -> bool {
        (0..past.dcs.len())
            .filter(|i| *i != self.d)
            .all(|i| past.get(i) <= self.vec.get(i))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vc(v: &[u64]) -> Vc {
        Vc {
            dcs: v.to_vec(),
            extra: Vec::new(),
        }
    }

    #[test]
    fn the_floor_is_the_best_group_of_f_plus_one() {
        assert_eq!(group_floor(10, &[3, 7, 5], 0), 10);
        assert_eq!(group_floor(10, &[3, 7, 5], 1), 7);
        assert_eq!(group_floor(10, &[3, 7, 5], 2), 5);
        assert_eq!(group_floor(4, &[3, 7, 5], 1), 4, "capped by our own row");
        assert_eq!(
            group_floor(10, &[3], 2),
            0,
            "fewer DCs than the group needs"
        );
    }

    #[test]
    #[allow(clippy::needless_range_loop)] // j is a DC index, into both the rows and the vector
    fn brute_force_over_groups_agrees() {
        // Alg. 2 l.33-35 literally, over every group of f+1 DCs that includes DC 0.
        let rows = [[9u64, 4, 6, 2], [5, 8, 1, 7], [3, 3, 9, 9], [6, 2, 2, 5]];
        for f in 0..4 {
            let mut u = Uniform::new(4, 0, f);
            for (h, r) in rows.iter().enumerate() {
                u.report(h, &vc(r));
            }
            u.recompute();
            for j in 0..4 {
                let mut best = 0;
                for mask in 0u32..16 {
                    if mask & 1 == 0 || mask.count_ones() as usize != f + 1 {
                        continue;
                    }
                    let min = (0..4)
                        .filter(|h| mask & (1 << h) != 0)
                        .map(|h| rows[h][j])
                        .min()
                        .unwrap();
                    best = best.max(min);
                }
                assert_eq!(u.vec().get(j), best, "f = {f}, entry {j}");
            }
        }
    }

    #[test]
    fn reports_only_grow_and_uniformity_never_goes_back() {
        let mut u = Uniform::new(3, 0, 1);
        u.report(0, &vc(&[10, 10, 10]));
        u.report(1, &vc(&[8, 10, 10]));
        assert!(u.recompute());
        assert_eq!(u.vec(), &vc(&[8, 10, 10]));
        u.report(1, &vc(&[2, 2, 2])); // a stale, reordered report
        assert!(!u.recompute());
        assert_eq!(u.vec(), &vc(&[8, 10, 10]));
    }

    #[test]
    fn barrier_and_attach_conditions() {
        let mut u = Uniform::new(3, 1, 1);
        u.adopt_remote(&vc(&[5, 99, 7]));
        assert_eq!(u.vec(), &vc(&[5, 0, 7]), "our own entry is never adopted");
        assert!(u.covers_remote(&vc(&[5, 50, 7])));
        assert!(!u.covers_remote(&vc(&[6, 0, 0])));
        assert!(!u.covers_local(&vc(&[0, 1, 0])));
        u.report(1, &vc(&[0, 4, 0]));
        u.report(2, &vc(&[0, 3, 0]));
        u.recompute();
        assert!(u.covers_local(&vc(&[0, 3, 0])));
        assert!(!u.covers_local(&vc(&[0, 4, 0])));
    }
}
