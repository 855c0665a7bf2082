//! Peer authentication and password checks.
//!
//! Node links authenticate with a mutual challenge-response over the link's key: the
//! dialer's `Hello` carries a fresh random nonce, the listener answers `Challenge` with its
//! own nonce, the dialer proves first (`Proof`), and only then does the listener prove
//! (`Welcome`). A proof is HMAC-SHA256 keyed by the link key over a direction label, both
//! nonces, the cluster name and the dialer and listener node ids ([`proof`]), so a proof
//! recorded on one connection is worthless on another (fresh nonces), in the other
//! direction (label), or between other nodes (ids). Proofs are compared in constant time
//! ([`verify`]).
//!
//! **Link keys.** Every pair of nodes has its own key, derived from the cluster secret and
//! the two node ids ([`link_key`]). A node configured with the cluster secret (`secret` or
//! `secret_file`) derives them all; a node configured with its keyring (`keyring_dir`,
//! written by `causeway keyring`) holds only the keys of its own links ([`Keys::Ring`]),
//! so a node whose files leak cannot prove another node's id to anyone: the attacker
//! would need the key of a link it is not on. Without a secret the key is derived from
//! nothing: the exchange still runs, but proves nothing (the node needs `insecure`).

use hmac::{Hmac, Mac};
use sha2::Sha256;
use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;
use subtle::ConstantTimeEq;

/// Bytes of a handshake nonce and of a proof.
pub const NONCE_LEN: usize = 32;
pub const PROOF_LEN: usize = 32;

/// Bytes of a link key.
pub const LINK_KEY_LEN: usize = 32;

/// A handshake nonce.
pub type Nonce = [u8; NONCE_LEN];
/// The key of the link between two nodes ([`link_key`]).
pub type LinkKey = [u8; LINK_KEY_LEN];
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
            Direction::Dialer => b"causeway peer v5: dialer proof",
            Direction::Listener => b"causeway peer v5: listener proof",
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

/// The key of the link between nodes `a` and `b` of `cluster`, the same in both directions:
/// HMAC-SHA256 keyed by the cluster secret over a label, the cluster name and both ids
/// (the smaller first). Knowing it proves nothing about any other link.
pub fn link_key(secret: &[u8], cluster: &str, a: u32, b: u32) -> LinkKey {
    let mut mac = Hmac::<Sha256>::new_from_slice(secret).expect("HMAC takes any key length");
    let label: &[u8] = b"causeway link key v1";
    mac.update(&(label.len() as u64).to_be_bytes());
    mac.update(label);
    mac.update(&(cluster.len() as u64).to_be_bytes());
    mac.update(cluster.as_bytes());
    mac.update(&a.min(b).to_be_bytes());
    mac.update(&a.max(b).to_be_bytes());
    mac.finalize().into_bytes().into()
}

/// What a node proves its links with. `Debug` shows no key.
#[derive(Clone)]
pub enum Keys {
    /// The cluster secret (empty: none, nothing is proved): every link key derives from it.
    Secret(Arc<[u8]>),
    /// The keys of this node's own links, by peer id: no other link's.
    Ring(Arc<BTreeMap<u32, LinkKey>>),
}

impl Keys {
    /// The key of the link between `me` and `peer`; `None` when a keyring lacks it.
    pub fn link(&self, cluster: &str, me: u32, peer: u32) -> Option<LinkKey> {
        match self {
            Keys::Secret(secret) => Some(link_key(secret, cluster, me, peer)),
            Keys::Ring(ring) => ring.get(&peer).copied(),
        }
    }

    /// The keyring of node `me`: the keys of its links to every node in `peers`.
    pub fn ring_of(secret: &[u8], cluster: &str, me: u32, peers: &[u32]) -> Keys {
        let ring = peers
            .iter()
            .filter(|&&p| p != me)
            .map(|&p| (p, link_key(secret, cluster, me, p)))
            .collect();
        Keys::Ring(Arc::new(ring))
    }
}

impl fmt::Debug for Keys {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Keys::Secret(s) if s.is_empty() => f.write_str("Secret(none)"),
            Keys::Secret(_) => f.write_str("Secret(<redacted>)"),
            Keys::Ring(r) => write!(f, "Ring(<{} keys redacted>)", r.len()),
        }
    }
}

/// A fresh nonce from the operating system's CSPRNG.
pub fn nonce() -> Result<Nonce, String> {
    let mut n = [0u8; NONCE_LEN];
    getrandom::fill(&mut n).map_err(|e| format!("no randomness for a nonce: {e}"))?;
    Ok(n)
}

/// The proof `direction` gives of the link key `key` in the handshake `t`. Every
/// variable-length field is length-prefixed, so no two transcripts share an input.
pub fn proof(key: &[u8], direction: Direction, t: &Transcript) -> Proof {
    let mut mac = Hmac::<Sha256>::new_from_slice(key).expect("HMAC takes any key length");
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

/// Whether `given` is `direction`'s proof of the link key `key` in `t`, compared in
/// constant time.
pub fn verify(key: &[u8], direction: Direction, t: &Transcript, given: &Proof) -> bool {
    let expected = proof(key, direction, t);
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
    fn a_link_key_is_the_same_both_ways_and_differs_per_pair_and_cluster() {
        let k = link_key(b"secret", "c", 1, 2);
        assert_eq!(k, link_key(b"secret", "c", 2, 1));
        assert_ne!(k, link_key(b"secret", "c", 1, 3));
        assert_ne!(k, link_key(b"secret", "d", 1, 2));
        assert_ne!(k, link_key(b"Secret", "c", 1, 2));
    }

    #[test]
    fn a_keyring_proves_its_own_links_only() {
        let ring = Keys::ring_of(b"secret", "c", 1, &[0, 1, 2, 3]);
        let all = Keys::Secret(Arc::from(&b"secret"[..]));
        // Node 1's ring links it to 2 as the cluster secret does.
        assert_eq!(ring.link("c", 1, 2), all.link("c", 1, 2));
        assert_eq!(ring.link("c", 1, 1), None, "no link to itself");
        // Node 1 claiming to be node 3 towards node 2 needs the key of link 3-2, which
        // its ring lacks: the key it can use instead (its own link to 2) does not verify.
        let t = |d| Transcript {
            cluster: "c",
            dialer: d,
            dialer_nonce: &A,
            listener: 2,
            listener_nonce: &B,
        };
        let forged = proof(&ring.link("c", 1, 2).unwrap(), Direction::Dialer, &t(3));
        let k32 = all.link("c", 3, 2).unwrap();
        assert!(!verify(&k32, Direction::Dialer, &t(3), &forged));
        assert!(!format!("{ring:?} {all:?}").contains("secret"));
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
