//! The order in which nodes list a partition's keys (`Request::ListKeys`): by position,
//! a 48-bit hash of the key fixed for every node, build and restart ([`key_position`]),
//! then by the key. A lister resumes from a position, never from a key, so a cursor over a
//! whole DC fits in the 64-bit number a Redis `SCAN` cursor is: the partition in the top
//! 16 bits ([`PARTITION_SHIFT`]), the position in the rest.
//!
//! A page ends at a position boundary (every key of a position, or none), so a key stored
//! for a whole walk is listed at least once whatever is written meanwhile (Redis's `SCAN`
//! guarantee); two keys of one position (a 48-bit collision) go in one page.

/// Bits of a key position.
pub const POSITION_BITS: u32 = 48;
/// Where a DC-wide cursor keeps the partition: partitions fit in 16 bits (at most one per
/// slot, 16,384).
pub const PARTITION_SHIFT: u32 = POSITION_BITS;
/// One past the largest position.
pub const POSITION_END: u64 = 1 << POSITION_BITS;

/// The key's position: FNV-1a (64 bits) folded to [`POSITION_BITS`]. Not the stores' own
/// seeded hash: every node of a DC, and every restart, must order keys alike.
pub fn key_position(key: &[u8]) -> u64 {
    const OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
    const PRIME: u64 = 0x0100_0000_01b3;
    let h = key
        .iter()
        .fold(OFFSET, |h, b| (h ^ u64::from(*b)).wrapping_mul(PRIME));
    (h ^ (h >> POSITION_BITS)) & (POSITION_END - 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn positions_are_fixed_and_below_the_end() {
        assert_eq!(key_position(b"a"), key_position(b"a"));
        assert_ne!(key_position(b"a"), key_position(b"b"));
        for k in 0..1000u32 {
            assert!(key_position(&k.to_be_bytes()) < POSITION_END);
        }
        // Fixed across builds: a cursor handed out by one node is resumed by another.
        assert_eq!(
            key_position(b""),
            0xcbf2_9ce4_8422_2325 & (POSITION_END - 1) ^ 0xcbf2
        );
    }
}
