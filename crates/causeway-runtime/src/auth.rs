//! Peer authentication and password checks.
//!
//! Node links authenticate with a mutual challenge-response over the cluster secret
//! (`secret` or `secret_file` in the cluster file): the dialer's `Hello` carries a fresh
//! random nonce, the listener answers `Challenge` with its own nonce and its proof, the
//! dialer answers `Proof`. A proof is HMAC-SHA256 keyed by the secret over a direction
//! label, both nonces, the cluster name and the dialer and listener node ids
//! ([`proof`]), so a proof recorded on one connection is worthless on another (fresh
//! nonces), in the other direction (label), or between other nodes (ids). Proofs are
//! compared in constant time ([`verify`]). Without a secret the key is empty: the
//! exchange still runs, but proves nothing (the node warns at startup).

use hmac::{Hmac, Mac};
use sha2::Sha256;
use subtle::ConstantTimeEq;

/// Bytes of a handshake nonce and of a proof.
pub const NONCE_LEN: usize = 32;
pub const PROOF_LEN: usize = 32;

/// A handshake nonce.
pub type Nonce = [u8; NONCE_LEN];
/// An HMAC-SHA256 proof of the secret.
pub type Proof = [u8; PROOF_LEN];

/// Which side of a handshake proves: the two proofs of one handshake differ.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Direction {
    /// The node that dialed (sends `Hello`, then `Proof`).
    Dialer,
    /// The node that accepted (sends `Challenge`).
    Listener,
}

impl Direction {
    fn label(self) -> &'static [u8] {
        match self {
            Direction::Dialer => b"causeway peer v4: dialer proof",
            Direction::Listener => b"causeway peer v4: listener proof",
        }
    }
}

/// What one handshake's proofs cover besides the direction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Transcript<'a> {
    pub cluster: &'a str,
    /// The dialer's node id and nonce.
    pub dialer: u32,
    pub dialer_nonce: &'a Nonce,
    /// The listener's node id and nonce.
    pub listener: u32,
    pub listener_nonce: &'a Nonce,
}

/// A fresh nonce from the operating system's CSPRNG.
pub fn nonce() -> Result<Nonce, String> {
    let mut n = [0u8; NONCE_LEN];
    getrandom::fill(&mut n).map_err(|e| format!("no randomness for a nonce: {e}"))?;
    Ok(n)
}

/// The proof `direction` gives of `secret` in the handshake `t`. Every variable-length
/// field is length-prefixed, so no two transcripts share an input.
pub fn proof(secret: &[u8], direction: Direction, t: &Transcript) -> Proof {
    let mut mac = Hmac::<Sha256>::new_from_slice(secret).expect("HMAC takes any key length");
    let label = direction.label();
    mac.update(&(label.len() as u64).to_be_bytes());
    mac.update(label);
    mac.update(&(t.cluster.len() as u64).to_be_bytes());
    mac.update(t.cluster.as_bytes());
    mac.update(&t.dialer.to_be_bytes());
    mac.update(t.dialer_nonce);
    mac.update(&t.listener.to_be_bytes());
    mac.update(t.listener_nonce);
    let out: Proof = mac.finalize().into_bytes().into();
    out
}

/// Whether `given` is `direction`'s proof of `secret` in `t`, compared in constant time.
pub fn verify(secret: &[u8], direction: Direction, t: &Transcript, given: &Proof) -> bool {
    let expected = proof(secret, direction, t);
    bool::from(expected.ct_eq(given))
}

/// Whether two secrets (passwords) are equal, in time independent of where they differ.
/// The length is not hidden.
pub fn same_secret(a: &[u8], b: &[u8]) -> bool {
    bool::from(a.ct_eq(b))
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: Nonce = [1; NONCE_LEN];
    const B: Nonce = [2; NONCE_LEN];
    const C: Nonce = [3; NONCE_LEN];

    fn t<'a>(dialer_nonce: &'a Nonce, listener_nonce: &'a Nonce) -> Transcript<'a> {
        Transcript {
            cluster: "local",
            dialer: 1,
            dialer_nonce,
            listener: 0,
            listener_nonce,
        }
    }

    #[test]
    fn the_right_secret_verifies_and_a_wrong_one_is_refused() {
        let p = proof(b"s3cret", Direction::Dialer, &t(&A, &B));
        assert!(verify(b"s3cret", Direction::Dialer, &t(&A, &B), &p));
        assert!(!verify(b"s3creT", Direction::Dialer, &t(&A, &B), &p));
        assert!(!verify(b"", Direction::Dialer, &t(&A, &B), &p));
        let forged = proof(b"guess", Direction::Dialer, &t(&A, &B));
        assert!(!verify(b"s3cret", Direction::Dialer, &t(&A, &B), &forged));
    }

    #[test]
    fn swapped_nonces_another_direction_or_other_nodes_are_refused() {
        let p = proof(b"k", Direction::Dialer, &t(&A, &B));
        assert!(!verify(b"k", Direction::Dialer, &t(&B, &A), &p), "swapped");
        assert!(
            !verify(b"k", Direction::Listener, &t(&A, &B), &p),
            "reflected"
        );
        let mut other = t(&A, &B);
        other.dialer = 2;
        assert!(!verify(b"k", Direction::Dialer, &other, &p), "other node");
        let mut other = t(&A, &B);
        other.cluster = "prod";
        assert!(
            !verify(b"k", Direction::Dialer, &other, &p),
            "other cluster"
        );
    }

    #[test]
    fn a_replayed_proof_fails_against_a_fresh_listener_nonce() {
        let recorded = proof(b"k", Direction::Dialer, &t(&A, &B));
        assert!(!verify(b"k", Direction::Dialer, &t(&A, &C), &recorded));
        let (n1, n2) = (nonce().unwrap(), nonce().unwrap());
        assert_ne!(n1, n2, "nonces are fresh");
    }

    #[test]
    fn secrets_compare_equal_only_when_identical() {
        assert!(same_secret(b"abc", b"abc"));
        assert!(!same_secret(b"abc", b"abd"));
        assert!(!same_secret(b"abc", b"abcd"));
        assert!(same_secret(b"", b""));
    }
}
