//! Declared conflict relations between strong transactions (UniStore §3, PoR): rules
//! `A B pattern` naming two transaction types and a key pattern whose `{}` segment
//! captures the object the conflict is about. The checker (`causeway-check`) judges
//! histories with them; UniStore's certifier enforces them. Textual form: `default` (no
//! rules: every strong transaction is ad-hoc), `rubis`, or rules separated by `;`.

use crate::ids::{escape_bytes, Key};
use std::fmt;

/// One `/`-separated segment of a [`KeyPattern`].
#[derive(Clone, Debug, PartialEq, Eq)]
enum Segment {
    Literal(Vec<u8>),
    /// `*`: any one segment.
    Any,
    /// `{}`: any one segment, captured: the object the conflict is about.
    Capture,
}

/// A key pattern: `/`-separated segments, each a literal, `*` (any one segment) or `{}`
/// (any one segment, captured; exactly one per pattern). `items/{}/*` matches
/// `items/7/closed` capturing `7`, and not `items/7` or `items/7/a/b`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeyPattern {
    segments: Vec<Segment>,
}

impl KeyPattern {
    pub fn parse(text: &str) -> Result<KeyPattern, String> {
        let segments: Vec<Segment> = text
            .split('/')
            .map(|s| match s {
                "*" => Segment::Any,
                "{}" => Segment::Capture,
                _ => Segment::Literal(s.as_bytes().to_vec()),
            })
            .collect();
        let captures = segments.iter().filter(|s| **s == Segment::Capture).count();
        if captures != 1 {
            return Err(format!(
                "key pattern '{text}' needs exactly one '{{}}' segment, has {captures}"
            ));
        }
        Ok(KeyPattern { segments })
    }

    /// The captured segment when `key` matches.
    pub fn capture<'k>(&self, key: &'k Key) -> Option<&'k [u8]> {
        let parts: Vec<&[u8]> = key.0.split(|b| *b == b'/').collect();
        if parts.len() != self.segments.len() {
            return None;
        }
        let mut captured = None;
        for (seg, part) in self.segments.iter().zip(parts) {
            match seg {
                Segment::Literal(l) if l.as_slice() != part => return None,
                Segment::Capture => captured = Some(part),
                _ => {}
            }
        }
        captured
    }

    /// The pattern with its capture filled in: `items/7/*`.
    pub fn render(&self, capture: &[u8]) -> String {
        let parts: Vec<String> = self
            .segments
            .iter()
            .map(|seg| match seg {
                Segment::Literal(l) => escape_bytes(l),
                Segment::Any => "*".into(),
                Segment::Capture => escape_bytes(capture),
            })
            .collect();
        parts.join("/")
    }
}

impl fmt::Display for KeyPattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let parts: Vec<String> = self
            .segments
            .iter()
            .map(|seg| match seg {
                Segment::Literal(l) => String::from_utf8_lossy(l).into_owned(),
                Segment::Any => "*".into(),
                Segment::Capture => "{}".into(),
            })
            .collect();
        f.write_str(&parts.join("/"))
    }
}

/// Transactions of type `a` and of type `b` conflict on a common capture of `pattern`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConflictRule {
    pub a: String,
    pub b: String,
    pub pattern: KeyPattern,
}

impl ConflictRule {
    pub fn new(a: &str, b: &str, pattern: &str) -> Result<ConflictRule, String> {
        Ok(ConflictRule {
            a: a.into(),
            b: b.into(),
            pattern: KeyPattern::parse(pattern)?,
        })
    }

    /// Whether the rule pairs the types `x` and `y` (in either order).
    pub fn pairs(&self, x: &str, y: &str) -> bool {
        (self.a == x && self.b == y) || (self.a == y && self.b == x)
    }

    /// Whether the rule names the type `label`.
    pub fn names(&self, label: &str) -> bool {
        self.a == label || self.b == label
    }
}

/// RUBiS (UniStore §8.1, after Red-Blue): registerUser with registerUser on the nickname,
/// storeBuyNow with storeBuyNow on the item, storeBid with closeAuction on the item (keys
/// as `causeway-sim`'s RUBiS workload lays them out).
pub fn rubis_rules() -> Vec<ConflictRule> {
    let rule = |a, b, p| ConflictRule::new(a, b, p).expect("a valid pattern");
    vec![
        rule("registerUser", "registerUser", "users/{}/name"),
        rule("storeBuyNow", "storeBuyNow", "items/{}/*"),
        rule("storeBid", "closeAuction", "items/{}/*"),
    ]
}

/// Parses `default` / `ad-hoc` (no rules), `rubis`, or `A B pattern` rules separated by
/// `;` (at most [`RULES_MAX`]).
pub fn parse_rules(text: &str) -> Result<Vec<ConflictRule>, String> {
    match text.trim() {
        "default" | "ad-hoc" => return Ok(Vec::new()),
        "rubis" => return Ok(rubis_rules()),
        _ => {}
    }
    let mut rules = Vec::new();
    for rule in text.split(';').filter(|r| !r.trim().is_empty()) {
        let words: Vec<&str> = rule.split_whitespace().collect();
        let [a, b, pattern] = words[..] else {
            return Err(format!(
                "conflict rule '{}' should be 'TYPE TYPE PATTERN'",
                rule.trim()
            ));
        };
        rules.push(ConflictRule::new(a, b, pattern)?);
    }
    if rules.is_empty() {
        return Err("no conflict rules; use default, rubis or 'TYPE TYPE PATTERN; ...'".into());
    }
    if rules.len() > RULES_MAX {
        return Err(format!(
            "{} conflict rules, at most {RULES_MAX}",
            rules.len()
        ));
    }
    Ok(rules)
}

/// Most rules in one relation.
pub const RULES_MAX: usize = 64;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns_capture_one_segment_and_rules_parse() {
        let p = KeyPattern::parse("items/{}/*").unwrap();
        assert_eq!(p.capture(&Key::from("items/7/bids")), Some(&b"7"[..]));
        assert_eq!(p.capture(&Key::from("items/7")), None);
        assert_eq!(p.render(b"7"), "items/7/*");
        assert!(KeyPattern::parse("items/*").is_err());
        assert_eq!(parse_rules("default").unwrap(), Vec::new());
        assert_eq!(parse_rules("rubis").unwrap().len(), 3);
        let r = parse_rules("a b k/{}; c c x/{}/y").unwrap();
        assert!(r[0].pairs("b", "a") && r[1].names("c") && !r[1].names("a"));
        assert!(parse_rules("a b").is_err() && parse_rules(" ; ").is_err());
    }
}
