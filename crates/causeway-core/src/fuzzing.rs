//! Seeded pseudo-random mutation of fuzz corpus inputs, for the stable-Rust half of the
//! fuzzing (docs/OPERATIONS.md, "Fuzzing"). The libFuzzer targets under `fuzz/` need
//! nightly and cargo-fuzz; the default tests instead feed every corpus file and a few
//! thousand mutations of them through the very same property functions (each crate's
//! `fuzzing` module), so CI exercises the properties on every run. Deterministic: one seed
//! gives the same inputs on every machine, so a failure always reproduces.

use std::panic::{catch_unwind, AssertUnwindSafe};

/// Longest input a mutation makes, in bytes (libFuzzer's default `-max_len` is 4096).
pub const MUTATION_LEN_MAX: usize = 4096;
/// Most mutation steps applied to one input.
pub const MUTATION_STEPS_MAX: usize = 4;

/// Tokens spliced into inputs: the delimiters and boundary numbers the parsers branch on
/// (RESP, JSON, TOML, postcard varints), which random bytes rarely hit.
const TOKENS: &[&[u8]] = &[
    b"\r\n",
    b"*",
    b"$",
    b"-1",
    b"0",
    b"9223372036854775808",
    b"18446744073709551616",
    b"\"",
    b"{",
    b"}",
    b"[",
    b"]",
    b",",
    b":",
    b"=",
    b"\n",
    b"\\x",
    b"\\u0000",
    b"null",
    b"[[nodes]]",
    b"\x80",
    b"\xff\xff\xff\xff\x0f",
    b"\x00",
];

/// Marsaglia's xorshift64: tiny, seeded, and enough to pick mutations.
#[derive(Clone, Debug)]
pub struct XorShift(u64);

impl XorShift {
    pub fn new(seed: u64) -> XorShift {
        // The all-zero state is a fixed point of xorshift.
        XorShift(seed | 1)
    }

    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }

    /// A number in `0..n`.
    pub fn below(&mut self, n: usize) -> usize {
        assert!(n > 0, "an empty range has no member");
        (self.next_u64() % n as u64) as usize
    }
}

/// `input` changed by one to [`MUTATION_STEPS_MAX`] random steps; `others` are what a
/// splice may borrow from (the rest of the corpus).
pub fn mutate(input: &[u8], others: &[Vec<u8>], rng: &mut XorShift) -> Vec<u8> {
    let mut out = input.to_vec();
    for _ in 0..1 + rng.below(MUTATION_STEPS_MAX) {
        mutate_once(&mut out, others, rng);
    }
    out.truncate(MUTATION_LEN_MAX);
    out
}

fn mutate_once(out: &mut Vec<u8>, others: &[Vec<u8>], rng: &mut XorShift) {
    let at = rng.below(out.len() + 1);
    match rng.below(7) {
        0 if at < out.len() => out[at] ^= 1 << rng.below(8),
        1 if at < out.len() => out[at] = rng.next_u64() as u8,
        2 => out.insert(at, rng.next_u64() as u8),
        3 => {
            let end = at + rng.below(out.len() - at + 1).min(16);
            out.drain(at..end);
        }
        4 => {
            let token = TOKENS[rng.below(TOKENS.len())];
            out.splice(at..at, token.iter().copied());
        }
        5 => {
            // Repeats a slice: nested and repeated structures (pipelines, lists).
            let end = at + rng.below(out.len() - at + 1).min(64);
            let copy = out[at..end].to_vec();
            let to = rng.below(out.len() + 1);
            out.splice(to..to, copy);
        }
        _ if !others.is_empty() => {
            // Splices in the tail of another input from its middle.
            let other = &others[rng.below(others.len())];
            let from = rng.below(other.len() + 1);
            out.truncate(at);
            out.extend_from_slice(&other[from..]);
        }
        _ => out.push(rng.next_u64() as u8),
    }
}

/// Runs `property` on every input of `corpus` and on `mutations_per_input` mutations of
/// each; returns how many inputs ran. A panicking input is reported escaped, so it can be
/// added to the corpus as a regression file.
pub fn exercise(
    corpus: &[Vec<u8>],
    mutations_per_input: usize,
    seed: u64,
    mut property: impl FnMut(&[u8]),
) -> usize {
    let mut rng = XorShift::new(seed);
    let mut runs = 0;
    let mut run = |input: &[u8]| {
        if catch_unwind(AssertUnwindSafe(|| property(input))).is_err() {
            panic!(
                "the property failed on input {:?}",
                input.escape_ascii().to_string()
            );
        }
        runs += 1;
    };
    for input in corpus {
        run(input);
        for _ in 0..mutations_per_input {
            run(&mutate(input, corpus, &mut rng));
        }
    }
    runs
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mutations_are_deterministic_bounded_and_varied() {
        let corpus = vec![b"*1\r\n$4\r\nPING\r\n".to_vec(), b"{\"a\":1}".to_vec()];
        let make = |seed| {
            let mut rng = XorShift::new(seed);
            (0..200)
                .map(|i| mutate(&corpus[i % 2], &corpus, &mut rng))
                .collect::<Vec<_>>()
        };
        let a = make(7);
        assert_eq!(a, make(7), "one seed, one sequence");
        assert_ne!(a, make(8));
        assert!(a.iter().all(|m| m.len() <= MUTATION_LEN_MAX));
        let distinct: std::collections::BTreeSet<_> = a.iter().collect();
        assert!(distinct.len() > 150, "only {} distinct", distinct.len());
    }

    #[test]
    fn exercise_runs_every_input_and_names_a_failing_one() {
        let corpus = vec![b"ab".to_vec(), b"cd".to_vec()];
        let mut seen = Vec::new();
        let runs = exercise(&corpus, 3, 1, |input| seen.push(input.to_vec()));
        assert_eq!(runs, 8);
        assert_eq!(seen.len(), 8);
        assert!(seen.contains(&b"ab".to_vec()) && seen.contains(&b"cd".to_vec()));
        let failed = catch_unwind(|| exercise(&corpus, 0, 1, |input| assert_ne!(input, b"cd")));
        let message = failed.unwrap_err();
        let text = message.downcast_ref::<String>().expect("a formatted panic");
        assert!(text.contains("\"cd\""), "{text}");
    }
}
