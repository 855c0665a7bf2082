//! Conflict relations between strong transactions (UniStore §3, Partial Order-Restrictions
//! consistency): two committed strong transactions that conflict must be ordered by
//! causality. Causal transactions never conflict, whatever they touch.
//!
//! - The default relation, for ad-hoc strong transactions: two conflict when they write a
//!   common key, or one reads a key the other writes.
//! - A declared relation: rules `A B pattern`, naming two transaction types (a
//!   [`TxnRecord::label`]) and a key pattern. A transaction of type `A` and one of type `B`
//!   conflict when each touches (reads or writes) a key matching `pattern` with the same
//!   captured segment. RUBiS's relation ([`ConflictRelation::rubis`]) has three rules.
//!
//! A strong transaction whose label no rule names (or that has none) is ad-hoc: it
//! conflicts with every strong transaction by the default rule. That keeps the relation
//! symmetric: certifying a declared transaction against an ad-hoc one can only use the rule
//! both understand.
//!
//! Textual form (the `check --conflicts` argument): `default`, `rubis`, or rules separated
//! by `;`, each `A B pattern`, e.g. `registerUser registerUser users/{}/name`.

use crate::history::{HOp, TxnRecord};
use causeway_core::Key;
use std::fmt;

pub use causeway_core::conflict::{ConflictRule, KeyPattern};

/// Why two strong transactions conflict: the key (or the rendered pattern) and the rule.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Conflict {
    pub key: String,
    pub why: String,
}

/// A txn's captures under the rules that name its type: `(rule index, capture)`, sorted.
pub(crate) type Tokens = Vec<(usize, Vec<u8>)>;

/// Which strong transactions conflict: the default rule, plus declared rules (none for the
/// default relation). See the module docs.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ConflictRelation {
    rules: Vec<ConflictRule>,
}

impl ConflictRelation {
    /// The default relation: every strong transaction is ad-hoc.
    pub fn ad_hoc() -> ConflictRelation {
        ConflictRelation::default()
    }

    pub fn declared(rules: Vec<ConflictRule>) -> ConflictRelation {
        ConflictRelation { rules }
    }

    /// RUBiS (UniStore §8.1, after Red-Blue): registerUser with registerUser on the
    /// nickname, storeBuyNow with storeBuyNow on the item, storeBid with closeAuction on
    /// the item (keys as `causeway-sim`'s RUBiS workload lays them out).
    pub fn rubis() -> ConflictRelation {
        ConflictRelation::declared(causeway_core::conflict::rubis_rules())
    }

    /// `default`, `rubis`, or `A B pattern` rules separated by `;`.
    pub fn parse(text: &str) -> Result<ConflictRelation, String> {
        causeway_core::conflict::parse_rules(text).map(ConflictRelation::declared)
    }

    pub fn rules(&self) -> &[ConflictRule] {
        &self.rules
    }

    /// Whether `t` is a declared transaction (its label named by a rule), not ad-hoc.
    pub fn is_declared(&self, t: &TxnRecord) -> bool {
        t.label
            .as_deref()
            .is_some_and(|l| self.rules.iter().any(|r| r.names(l)))
    }

    /// The captures of every key `t` touches under each rule naming its type.
    pub(crate) fn tokens(&self, t: &TxnRecord) -> Tokens {
        let Some(label) = t.label.as_deref() else {
            return Tokens::new();
        };
        let mut tokens = Tokens::new();
        for (i, rule) in self
            .rules
            .iter()
            .enumerate()
            .filter(|(_, r)| r.names(label))
        {
            for key in touched(t) {
                if let Some(c) = rule.pattern.capture(key) {
                    tokens.push((i, c.to_vec()));
                }
            }
        }
        tokens.sort();
        tokens.dedup();
        tokens
    }

    /// The declared conflict of two declared transactions, from their [`Self::tokens`].
    pub(crate) fn declared_conflict(
        &self,
        (x, x_tokens): (&TxnRecord, &Tokens),
        (y, y_tokens): (&TxnRecord, &Tokens),
    ) -> Option<Conflict> {
        let (lx, ly) = (x.label.as_deref()?, y.label.as_deref()?);
        let common = x_tokens.iter().find(|(i, c)| {
            self.rules[*i].pairs(lx, ly) && y_tokens.binary_search(&(*i, c.clone())).is_ok()
        })?;
        let rule = &self.rules[common.0];
        Some(Conflict {
            key: rule.pattern.render(&common.1),
            why: format!("{} with {} on {}", rule.a, rule.b, rule.pattern),
        })
    }

    /// Whether two strong transactions conflict, and on what (both must be strong: the
    /// caller decides that; causal transactions never conflict).
    pub fn conflict(&self, x: &TxnRecord, y: &TxnRecord) -> Option<Conflict> {
        if self.is_declared(x) && self.is_declared(y) {
            return self.declared_conflict((x, &self.tokens(x)), (y, &self.tokens(y)));
        }
        default_conflict(x, y)
    }
}

impl fmt::Display for ConflictRelation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.rules.is_empty() {
            return f.write_str("default");
        }
        let rules: Vec<String> = self
            .rules
            .iter()
            .map(|r| format!("{} {} {}", r.a, r.b, r.pattern))
            .collect();
        f.write_str(&rules.join("; "))
    }
}

/// Every key `t` reads or writes, in op order (repeats included).
fn touched(t: &TxnRecord) -> impl Iterator<Item = &Key> {
    t.ops.iter().map(|op| match op {
        HOp::Read { key, .. } | HOp::Write { key, .. } => key,
    })
}

fn written(t: &TxnRecord) -> impl Iterator<Item = &Key> {
    t.ops.iter().filter_map(|op| match op {
        HOp::Write { key, .. } => Some(key),
        HOp::Read { .. } => None,
    })
}

fn read(t: &TxnRecord) -> impl Iterator<Item = &Key> {
    t.ops.iter().filter_map(|op| match op {
        HOp::Read { key, .. } => Some(key),
        HOp::Write { .. } => None,
    })
}

/// The default rule: a common written key, or a key one reads and the other writes.
pub fn default_conflict(x: &TxnRecord, y: &TxnRecord) -> Option<Conflict> {
    let found = |why: String, key: &Key| {
        Some(Conflict {
            key: key.to_string(),
            why,
        })
    };
    if let Some(k) = written(x).find(|k| written(y).any(|w| w == *k)) {
        return found(format!("both {} and {} write {k}", x.id, y.id), k);
    }
    for (r, w) in [(x, y), (y, x)] {
        if let Some(k) = read(r).find(|k| written(w).any(|v| v == *k)) {
            return found(format!("{} reads {k}, which {} writes", r.id, w.id), k);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use causeway_core::{DcId, ObjType, ObjValue, OpId, SessionId, TxnId, TxnKind, Update};

    fn txn(session: u64, label: Option<&str>, reads: &[&str], writes: &[&str]) -> TxnRecord {
        let id = TxnId {
            session: SessionId(session),
            seq: 1,
        };
        let mut ops: Vec<HOp> = reads
            .iter()
            .map(|k| HOp::Read {
                key: Key::from(*k),
                obj: ObjType::Lww,
                value: ObjValue::Lww(None),
                observed: Vec::new(),
            })
            .collect();
        for (i, k) in writes.iter().enumerate() {
            ops.push(HOp::Write {
                key: Key::from(*k),
                update: Update::Assign(b"v".to_vec()),
                id: OpId {
                    txn: id,
                    index: i as u32,
                },
            });
        }
        TxnRecord {
            id,
            session: SessionId(session),
            dc: DcId(0),
            kind: TxnKind::Strong,
            label: label.map(String::from),
            start_ns: 0,
            end_ns: 0,
            ops,
            outcome: crate::Outcome::Committed,
        }
    }

    #[test]
    fn patterns_capture_one_segment() {
        let p = KeyPattern::parse("items/{}/*").expect("valid");
        assert_eq!(p.capture(&Key::from("items/7/closed")), Some(&b"7"[..]));
        assert_eq!(p.capture(&Key::from("items/7")), None);
        assert_eq!(p.capture(&Key::from("items/7/a/b")), None);
        assert_eq!(p.capture(&Key::from("users/7/name")), None);
        assert_eq!(p.render(b"7"), "items/7/*");
        assert_eq!(p.to_string(), "items/{}/*");
        assert!(KeyPattern::parse("items/*").is_err());
        assert!(KeyPattern::parse("{}/{}").is_err());
    }

    #[test]
    fn the_default_rule_is_write_write_or_read_write() {
        let rel = ConflictRelation::ad_hoc();
        let ww = rel.conflict(&txn(1, None, &[], &["k"]), &txn(2, None, &[], &["k"]));
        assert_eq!(ww.expect("write-write").key, "k");
        let rw = rel.conflict(&txn(1, None, &["k"], &["a"]), &txn(2, None, &[], &["k"]));
        assert!(rw.expect("read-write").why.contains("reads k"));
        let rr = rel.conflict(&txn(1, None, &["k"], &["a"]), &txn(2, None, &["k"], &["b"]));
        assert_eq!(rr, None, "two reads of a key do not conflict");
    }

    #[test]
    fn rubis_declares_its_three_pairs() {
        let rel = ConflictRelation::rubis();
        let bid = txn(
            1,
            Some("storeBid"),
            &["items/7/closed"],
            &["items/7/max_bid"],
        );
        let close = txn(
            2,
            Some("closeAuction"),
            &["items/7/max_bid"],
            &["items/7/closed"],
        );
        let other = txn(
            3,
            Some("closeAuction"),
            &["items/8/max_bid"],
            &["items/8/closed"],
        );
        let bid2 = txn(
            4,
            Some("storeBid"),
            &["items/7/closed"],
            &["items/7/max_bid"],
        );
        assert_eq!(
            rel.conflict(&bid, &close).expect("same item").key,
            "items/7/*"
        );
        assert_eq!(rel.conflict(&bid, &other), None, "another item");
        assert_eq!(rel.conflict(&bid, &bid2), None, "bids do not conflict");
        let reg = |s| {
            txn(
                s,
                Some("registerUser"),
                &["users/5/name"],
                &["users/5/name"],
            )
        };
        assert_eq!(
            rel.conflict(&reg(5), &reg(6)).expect("nick").key,
            "users/5/name"
        );
        // An ad-hoc strong txn conflicts by the default rule, even with a declared one.
        let adhoc = txn(9, None, &[], &["items/7/max_bid"]);
        assert!(rel.conflict(&adhoc, &bid).is_some());
    }

    #[test]
    fn relations_parse_and_print() {
        let rel = ConflictRelation::parse("rubis").expect("rubis");
        let again = ConflictRelation::parse(&rel.to_string()).expect("round trip");
        assert_eq!(rel, again);
        assert_eq!(
            ConflictRelation::parse("default"),
            Ok(ConflictRelation::ad_hoc())
        );
        assert!(ConflictRelation::parse("a b").is_err());
        assert!(ConflictRelation::parse("").is_err());
    }
}
