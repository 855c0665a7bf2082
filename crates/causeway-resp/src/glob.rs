//! Redis glob patterns (`KEYS`, `SCAN ... MATCH`), as Redis's `stringmatchlen` reads
//! them: `*` any bytes, `?` one byte, `[abc]`, `[^abc]` and `[a-z]` one byte of a class
//! (a reversed range `[z-a]` is the same range), `\x` the byte `x` itself. An unclosed
//! `[` takes the rest of the pattern as its class, as Redis does.
//!
//! Matching is the greedy two-pointer walk that goes back only to the last `*`, so it
//! costs at most the pattern's length times the key's (a pattern of many `*` cannot blow
//! up as a recursive matcher does).

/// Longest pattern `KEYS` and `SCAN ... MATCH` take, in bytes (a key is at most
/// `causeway_core::limits::KEY_LEN_MAX` bytes, so no longer pattern is needed).
pub const PATTERN_LEN_MAX: usize = 1024;

/// One element of a parsed pattern.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Token {
    Star,
    Any,
    Byte(u8),
    Class {
        negated: bool,
        ranges: Vec<(u8, u8)>,
    },
}

impl Token {
    /// Whether this one-byte token matches `b` (never called on `Star`).
    fn matches(&self, b: u8) -> bool {
        match self {
            Token::Any => true,
            Token::Byte(x) => *x == b,
            Token::Class { negated, ranges } => {
                ranges.iter().any(|&(lo, hi)| lo <= b && b <= hi) != *negated
            }
            Token::Star => unreachable!("a star matches a run, not a byte"),
        }
    }
}

/// A parsed pattern.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Glob {
    tokens: Vec<Token>,
    /// `*` alone: everything matches, with no walk.
    all: bool,
}

impl Glob {
    /// Parses `pattern`; refuses one longer than [`PATTERN_LEN_MAX`].
    pub fn parse(pattern: &[u8]) -> Result<Glob, String> {
        if pattern.len() > PATTERN_LEN_MAX {
            return Err(format!(
                "pattern longer than {PATTERN_LEN_MAX} bytes (PATTERN_LEN_MAX)"
            ));
        }
        let mut tokens = Vec::with_capacity(pattern.len());
        let mut i = 0;
        while i < pattern.len() {
            let (token, next) = token_at(pattern, i);
            // Runs of `*` are one `*`.
            if !(token == Token::Star && tokens.last() == Some(&Token::Star)) {
                tokens.push(token);
            }
            i = next;
        }
        let all = tokens == [Token::Star];
        Ok(Glob { tokens, all })
    }

    /// Whether `text` matches the whole pattern.
    pub fn matches(&self, text: &[u8]) -> bool {
        if self.all {
            return true;
        }
        let (mut t, mut p) = (0, 0);
        // The last `*` seen and the text position it was tried at.
        let mut star: Option<(usize, usize)> = None;
        while t < text.len() {
            match self.tokens.get(p) {
                Some(Token::Star) => {
                    star = Some((p, t));
                    p += 1;
                }
                Some(tok) if tok.matches(text[t]) => {
                    p += 1;
                    t += 1;
                }
                _ => match star {
                    // Let the last `*` take one more byte and try again after it.
                    Some((sp, st)) => {
                        star = Some((sp, st + 1));
                        p = sp + 1;
                        t = st + 1;
                    }
                    None => return false,
                },
            }
        }
        self.tokens[p..].iter().all(|tok| *tok == Token::Star)
    }
}

/// The token starting at `pattern[i]` and where the next one starts.
fn token_at(pattern: &[u8], i: usize) -> (Token, usize) {
    match pattern[i] {
        b'*' => (Token::Star, i + 1),
        b'?' => (Token::Any, i + 1),
        b'\\' if i + 1 < pattern.len() => (Token::Byte(pattern[i + 1]), i + 2),
        b'[' => class_at(pattern, i + 1),
        b => (Token::Byte(b), i + 1),
    }
}

/// The class whose body starts at `pattern[i]` (after its `[`), and where it ends.
fn class_at(pattern: &[u8], mut i: usize) -> (Token, usize) {
    let negated = pattern.get(i) == Some(&b'^');
    if negated {
        i += 1;
    }
    let mut ranges = Vec::new();
    while i < pattern.len() && pattern[i] != b']' {
        let lo = match pattern[i] {
            b'\\' if i + 1 < pattern.len() => {
                i += 1;
                pattern[i]
            }
            b => b,
        };
        let is_range = pattern.get(i + 1) == Some(&b'-') && i + 2 < pattern.len();
        if is_range && pattern[i + 2] != b']' {
            let hi = pattern[i + 2];
            ranges.push((lo.min(hi), lo.max(hi)));
            i += 3;
        } else {
            ranges.push((lo, lo));
            i += 1;
        }
    }
    // Past the `]`, or at the end of an unclosed class.
    (Token::Class { negated, ranges }, (i + 1).min(pattern.len()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(pattern: &str, text: &str) -> bool {
        Glob::parse(pattern.as_bytes())
            .expect("a valid pattern")
            .matches(text.as_bytes())
    }

    #[test]
    fn stars_and_question_marks() {
        assert!(m("*", ""));
        assert!(m("*", "anything"));
        assert!(m("user:*", "user:1"));
        assert!(!m("user:*", "users:1"));
        assert!(m("*:1", "user:1"));
        assert!(m("a*b*c", "aXXbYYc"));
        assert!(!m("a*b*c", "aXXbYY"));
        assert!(m("h?llo", "hello"));
        assert!(!m("h?llo", "hllo"));
        assert!(m("**a**", "bab"));
        assert!(!m("", "x"));
        assert!(m("", ""));
    }

    #[test]
    fn classes_ranges_negation_and_escapes() {
        assert!(m("h[ae]llo", "hallo"));
        assert!(!m("h[ae]llo", "hillo"));
        assert!(m("h[^e]llo", "hallo"));
        assert!(!m("h[^e]llo", "hello"));
        assert!(m("h[a-b]llo", "hbllo"));
        assert!(
            m("h[b-a]llo", "hallo"),
            "a reversed range is the same range"
        );
        assert!(!m("h[a-b]llo", "hcllo"));
        assert!(m("a\\*b", "a*b"));
        assert!(!m("a\\*b", "axb"));
        assert!(m("[\\]]", "]"));
        assert!(m("x[ab", "xa"), "an unclosed class runs to the end");
        assert!(m("[a-]", "-"), "a dash before the end is a byte");
    }

    #[test]
    fn many_stars_cost_no_more_than_a_walk() {
        let pattern = "*a".repeat(200) + "b";
        let text = "a".repeat(1000);
        assert!(!m(&pattern, &text));
    }

    #[test]
    fn long_patterns_are_refused_naming_the_limit() {
        let e = Glob::parse(&[b'a'; PATTERN_LEN_MAX + 1]).unwrap_err();
        assert!(e.contains("PATTERN_LEN_MAX"), "{e}");
        assert!(Glob::parse(&[b'a'; PATTERN_LEN_MAX]).is_ok());
    }
}
