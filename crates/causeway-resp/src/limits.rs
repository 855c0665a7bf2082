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
/// Largest command (and argument, and inline line) of a connection that has not
/// authenticated yet, in bytes: room for `HELLO 3 AUTH default <password> SETNAME
/// <name>` with the longest password and name, and no more (issue 75: 300 connections
/// streaming a 2 MB `SET` before `AUTH` pinned 663 MiB).
pub const PREAUTH_COMMAND_BYTES_MAX: usize = 4 << 10;
/// Most bytes a connection may send in all before it authenticates; past them it is told
/// so and closed (it can only have been answered `NOAUTH`).
pub const PREAUTH_BYTES_MAX: usize = 8 << 10;
/// Capacity of an unauthenticated connection's input buffer, in bytes.
pub const PREAUTH_BUFFER_BYTES: usize = 1 << 10;
/// Most connections of one RESP endpoint that have not authenticated yet (default of
/// `RespConfig::unauthenticated_max`); one more is told so and closed.
pub const UNAUTHENTICATED_MAX: usize = 1024;
/// How long a connection may take to authenticate, in milliseconds (default of
/// `RespConfig::auth_timeout_ms`); then it is told so and closed.
pub const AUTH_TIMEOUT_MS: u64 = 10_000;
/// How long an authenticated connection may stay idle (no command) before it is closed,
/// in milliseconds (default of `RespConfig::idle_timeout_ms`): a client that vanished
/// without a FIN or RST stops holding its session after this long.
pub const IDLE_TIMEOUT_MS: u64 = 300_000;
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
/// Bytes read at a time while draining the input of an unauthenticated connection.
pub const PREAUTH_DRAIN_BUFFER_BYTES: usize = 1 << 10;
/// Initial capacity of a connection's input and output buffers, in bytes.
pub const CONN_BUFFER_BYTES: usize = 16 << 10;
/// TCP keepalive of a RESP connection: first probe after this much silence, in
/// milliseconds, then one per interval; dropped after the retries go unanswered.
pub const KEEPALIVE_IDLE_MS: u64 = 30_000;
pub const KEEPALIVE_INTERVAL_MS: u64 = 10_000;
pub const KEEPALIVE_RETRIES: u32 = 3;
