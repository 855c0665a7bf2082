//! Limits on every input, queue, batch and message. Protocols and front ends check them
//! and answer `Error::LimitExceeded` rather than grow without bound.

/// Largest key, in bytes.
pub const KEY_LEN_MAX: usize = 1024;
/// Largest register value or set element, in bytes.
pub const VALUE_LEN_MAX: usize = 1 << 20;
/// Most keys in one read request.
pub const READ_KEYS_MAX: usize = 1024;
/// Most fields a hash shows; an `HSET` or `HINCRBY` of a new field past them is refused.
/// At most [`TXN_UPDATES_MAX`], so one transaction deletes a whole hash.
pub const HASH_FIELDS_MAX: usize = 1024;
/// Largest hash field name, in bytes.
pub const HASH_FIELD_LEN_MAX: usize = 1024;
/// Largest hash field value, in bytes: a full hash (fields and values at their limits)
/// stays within half of [`FRAME_LEN_MAX`], so a read of it fits in one message.
pub const HASH_VALUE_LEN_MAX: usize = 6 << 10;
const _: () = assert!(HASH_FIELDS_MAX <= TXN_UPDATES_MAX);
const _: () =
    assert!(HASH_FIELDS_MAX * (HASH_FIELD_LEN_MAX + HASH_VALUE_LEN_MAX) <= FRAME_LEN_MAX / 2);
/// Most elements a list holds; a push past them is refused. A list read travels in one
/// message, so this and [`LIST_BYTES_MAX`] keep a whole list within [`FRAME_LEN_MAX`]
/// (values plus at most 3 bytes of length each); 65,536 takes `redis-benchmark`'s
/// default suite (40,000 pushes to one list before its pops).
pub const LIST_ELEMS_MAX: usize = 65_536;
/// Largest list element, in bytes.
pub const LIST_ELEM_LEN_MAX: usize = 64 << 10;
/// Most bytes (summed element lengths) a list holds: half of [`FRAME_LEN_MAX`], so a
/// read of a full list fits in one message with room for its framing.
pub const LIST_BYTES_MAX: usize = FRAME_LEN_MAX / 2;
const _: () = assert!(LIST_BYTES_MAX + LIST_ELEMS_MAX * 64 <= FRAME_LEN_MAX);
/// Most members a sorted set holds; a `ZADD` or `ZINCRBY` of a new member past them is
/// refused. A sorted-set read travels in one message: members, at most 3 bytes of length
/// and 10 of score each, within [`FRAME_LEN_MAX`] with [`ZSET_BYTES_MAX`].
pub const ZSET_MEMBERS_MAX: usize = 131_072;
/// Largest sorted-set member, in bytes.
pub const ZSET_MEMBER_LEN_MAX: usize = 64 << 10;
/// Most bytes (summed member lengths) a sorted set holds: half of [`FRAME_LEN_MAX`].
pub const ZSET_BYTES_MAX: usize = FRAME_LEN_MAX / 2;
const _: () = assert!(ZSET_BYTES_MAX + ZSET_MEMBERS_MAX * 64 <= FRAME_LEN_MAX);
/// Most updates buffered in one transaction.
pub const TXN_UPDATES_MAX: usize = 4096;
/// Most transactions a coordinator runs at once (each open session holds at most one).
pub const COORD_TXNS_MAX: usize = 65_536;
/// Most requests a partition holds waiting (for a clock or a stable vector) before it
/// refuses new ones as unavailable.
pub const WAITING_REQUESTS_MAX: usize = 65_536;
/// Most transactions in one replication batch message.
pub const REPLICATION_BATCH_MAX: usize = 512;
/// Largest encoded message, in bytes (transports refuse bigger frames).
pub const FRAME_LEN_MAX: usize = 16 << 20;
/// Most versions kept per key before the oldest ones are folded into a checkpoint even if
/// a snapshot might still need them (such a snapshot's read then aborts its transaction).
/// A safety valve for a GC point that stalls, not a working limit: at 256, PaRiS's 50:50
/// YCSB at Zipf 0.99 (a hot key taking thousands of writes within one UST lag of ~400 ms)
/// aborted 36% of its txns "snapshot too old" at 256 clients/DC, and none at 4096.
pub const VERSIONS_PER_KEY_MAX: usize = 4096;

/// Longest client password (RESP `AUTH`, the native client's Hello), in bytes: a
/// connection must be able to authenticate within its small pre-authentication budget
/// (the front ends allow a few KiB before authentication).
pub const PASSWORD_LEN_MAX: usize = 512;
/// Largest frame (native client or peer) a connection may send before it has
/// authenticated, in bytes: a Hello, a proof. Frame readers never reserve room for a
/// larger declared length until the connection has authenticated.
pub const PREAUTH_FRAME_LEN_MAX: usize = 4 << 10;

/// Longest transaction type label (`Request::Begin::label`), in bytes.
pub const TXN_LABEL_MAX: usize = 64;

/// The capacity of an emptied output buffer a driver or adapter keeps for its next machine
/// call ([`crate::Ctx::into_buffer`]), at most: a call that emitted more (a catch-up burst)
/// gives its buffer back to the allocator.
pub const LENT_OUTPUTS_MAX: usize = 256;

/// Most keys one [`crate::Request::ListKeys`] answers (a page of `KEYS` or `SCAN`).
pub const LIST_KEYS_MAX: usize = 4096;
/// Most keys one [`crate::Request::ListKeys`] examines at the node, listed or not (keys
/// whose newest state shows nothing are skipped), so a partition of deleted keys costs a
/// bounded step per request.
pub const LIST_VISIT_MAX: usize = 4 * LIST_KEYS_MAX;
