//! Limits of the RESP front end. Input beyond a limit is answered with an error, never
//! buffered without bound: a malformed or oversized request closes the connection with a
//! `Protocol error`, an oversized command inside a valid frame gets an `ERR` reply.

use causeway_core::limits::{TXN_UPDATES_MAX, VALUE_LEN_MAX};

/// Most arguments in one command (the command name included): `MSET` with
/// `TXN_UPDATES_MAX` pairs fits.
pub const ARGS_MAX: usize = 2 * TXN_UPDATES_MAX + 1;
/// Largest single argument, in bytes: a largest value, with room for a hex-encoded
/// causal token of the same size.
pub const BULK_LEN_MAX: usize = 2 * VALUE_LEN_MAX;
/// Largest whole command on the wire, in bytes.
pub const COMMAND_BYTES_MAX: usize = 16 << 20;
/// Longest inline command (a line of words, what `PING\r\n` or a person typing into
/// `nc` sends), in bytes, its end of line included: Redis's own limit
/// (`PROTO_INLINE_MAX_SIZE`). Longer commands go as RESP arrays of bulk strings.
pub const INLINE_LEN_MAX: usize = 64 << 10;
/// Most commands answered in one batch before the replies are written out: bounds the
/// reply buffer of a deeply pipelined client.
pub const PIPELINE_DEPTH_MAX: usize = 1024;
/// Reply bytes buffered before they are written out even inside a pipeline batch.
pub const REPLY_BUFFER_MAX: usize = 1 << 20;
/// Most pipelined standalone commands run as one transaction (`Conn::run_pipelined`):
/// bounds the transaction's size and the replies held back until it commits.
pub const PIPELINE_TXN_COMMANDS_MAX: usize = 64;
/// Most members one `SRANDMEMBER` answers (a negative count repeats members, so the set's
/// size does not bound it).
pub const RANDOM_MEMBERS_MAX: usize = 1 << 16;
/// Most commands queued between `MULTI` and `EXEC`.
pub const MULTI_QUEUE_MAX: usize = 1024;
/// Most open client connections per RESP endpoint.
pub const CONNECTIONS_MAX: usize = 10_000;
/// Longest client name (`CLIENT SETNAME`), in bytes.
pub const CLIENT_NAME_LEN_MAX: usize = 256;
/// How many times a standalone command that aborted (nothing of it took effect) runs
/// again on a fresh snapshot before its error is answered.
pub const STANDALONE_RETRIES_MAX: usize = 2;
/// Longest causal token accepted by `CAUSAL.ATTACH`, in hex digits.
pub const TOKEN_HEX_LEN_MAX: usize = BULK_LEN_MAX;
/// How long a shutdown waits for open connections to finish their command, in
/// milliseconds, before it drops them.
pub const SHUTDOWN_GRACE_MS: u64 = 2_000;
/// After answering malformed input, how long the connection keeps reading what the client
/// still sends before it closes, in milliseconds, and how many bytes at most
/// (`server::drain_input`): a 20 MB `SET` refused at its length is read to its end, so the
/// client sees the error rather than a reset.
pub const ERROR_DRAIN_MS: u64 = 2_000;
pub const ERROR_DRAIN_BYTES_MAX: usize = 64 << 20;
/// Initial capacity of a connection's input and output buffers, in bytes.
pub const CONN_BUFFER_BYTES: usize = 16 << 10;
/// TCP keepalive of a RESP connection: first probe after this much silence, in
/// milliseconds, then one per interval; dropped after the retries go unanswered.
pub const KEEPALIVE_IDLE_MS: u64 = 30_000;
pub const KEEPALIVE_INTERVAL_MS: u64 = 10_000;
pub const KEEPALIVE_RETRIES: u32 = 3;
