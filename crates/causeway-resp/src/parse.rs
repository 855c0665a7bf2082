//! The request parser: RESP arrays of bulk strings, what every client library sends.
//! Inline commands (what a person types into `nc`) are refused with a clear error, as
//! DESIGN.md asks: they are the one part of RESP no client library uses, and refusing them
//! keeps one request grammar whose every length is bounded before it is buffered.
//!
//! Hand-written because requests use a small corner of RESP and because measuring it
//! against `redis-protocol`'s general frame decoder (`examples/parse_bench.rs`, numbers in
//! BENCHMARKS.md) showed it several times faster on pipelined `SET`/`GET` batches. The
//! decoder is kept as the oracle of a differential property test (`tests/parser.rs`).
//!
//! The parser is incremental and stateless: it looks at the bytes buffered so far and
//! either takes one whole command off the front, asks for more bytes, or rejects the input.
//! Rescanning an incomplete command only walks its headers (payloads are skipped by
//! length), so a large value arriving in pieces costs one scan per read, not per byte.
//! Every length is checked against the limits in [`crate::limits`] before any byte of
//! the payload is awaited, so a client cannot make the server buffer without bound.

use crate::limits::{ARGS_MAX, BULK_LEN_MAX, COMMAND_BYTES_MAX};
use bytes::{Bytes, BytesMut};
use std::fmt;

/// Input that is not a valid request. The connection answers it and closes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProtocolError(pub String);

impl fmt::Display for ProtocolError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Protocol error: {}", self.0)
    }
}

impl std::error::Error for ProtocolError {}

fn err<T>(what: impl Into<String>) -> Result<T, ProtocolError> {
    Err(ProtocolError(what.into()))
}

/// What a request that does not start with `*` (an inline command typed into `nc`, or
/// garbage) is told before the connection closes.
pub const INLINE_REFUSED: &str = "inline commands are not supported; send RESP arrays of bulk \
     strings (redis-cli, redis-benchmark and every client library do)";

/// Takes the next command off the front of `buf`: `Ok(Some(args))` with at least one
/// argument, `Ok(None)` when more bytes are needed, `Err` on malformed input (including
/// inline commands, see [`INLINE_REFUSED`]). Empty commands (`*0`, `*-1`) are consumed and
/// skipped.
pub fn parse_command(buf: &mut BytesMut) -> Result<Option<Vec<Bytes>>, ProtocolError> {
    loop {
        let Some(&first) = buf.first() else {
            return Ok(None);
        };
        if first != b'*' {
            return err(INLINE_REFUSED);
        }
        match parse_multibulk(buf)? {
            Some(args) if args.is_empty() => continue,
            other => return Ok(other),
        }
    }
}

/// Where `\r\n` ends the line starting at `from` (index of the `\r`), if buffered.
fn line_end(buf: &[u8], from: usize) -> Option<usize> {
    buf.get(from..)?
        .windows(2)
        .position(|w| w == b"\r\n")
        .map(|off| from + off)
}

/// Parses a decimal length between `from` and the end of its line: `(value, next index)`.
/// `Ok(None)` when the line is not complete yet.
fn read_len(buf: &[u8], from: usize, what: &str) -> Result<Option<(i64, usize)>, ProtocolError> {
    let Some(end) = line_end(buf, from) else {
        if buf.len() - from > 32 {
            return err(format!("invalid {what} length"));
        }
        return Ok(None);
    };
    let digits = &buf[from..end];
    match parse_i64(digits) {
        Some(n) => Ok(Some((n, end + 2))),
        None => err(format!("invalid {what} length")),
    }
}

/// Parses a signed decimal integer with no sign but `-`, no spaces and no leading `+`.
pub fn parse_i64(digits: &[u8]) -> Option<i64> {
    let (neg, body) = match digits.split_first() {
        Some((b'-', rest)) => (true, rest),
        _ => (false, digits),
    };
    if body.is_empty() || body.len() > 19 {
        return None;
    }
    let mut n: u64 = 0;
    for &d in body {
        if !d.is_ascii_digit() {
            return None;
        }
        n = n.checked_mul(10)?.checked_add(u64::from(d - b'0'))?;
    }
    if neg {
        0i64.checked_sub_unsigned(n)
    } else {
        i64::try_from(n).ok()
    }
}

/// A `*N\r\n($len\r\npayload\r\n)*N` command.
fn parse_multibulk(buf: &mut BytesMut) -> Result<Option<Vec<Bytes>>, ProtocolError> {
    let Some((count, mut pos)) = read_len(buf, 1, "multibulk")? else {
        return Ok(None);
    };
    if count <= 0 {
        let _ = buf.split_to(pos);
        return Ok(Some(Vec::new()));
    }
    if count as u64 > ARGS_MAX as u64 {
        return err("invalid multibulk length");
    }
    let mut spans = Vec::with_capacity(count as usize);
    for _ in 0..count {
        match buf.get(pos) {
            None => return incomplete(buf),
            Some(b'$') => {}
            Some(&other) => return err(format!("expected '$', got '{}'", other as char)),
        }
        let Some((len, start)) = read_len(buf, pos + 1, "bulk")? else {
            return incomplete(buf);
        };
        if len < 0 || len as u64 > BULK_LEN_MAX as u64 {
            return err("invalid bulk length");
        }
        let end = start + len as usize;
        if end > COMMAND_BYTES_MAX {
            return err("command too big");
        }
        if buf.len() < end + 2 {
            return incomplete(buf);
        }
        if &buf[end..end + 2] != b"\r\n" {
            return err("bulk string not terminated by CRLF");
        }
        spans.push((start, end));
        pos = end + 2;
    }
    let frame = buf.split_to(pos).freeze();
    Ok(Some(
        spans.into_iter().map(|(s, e)| frame.slice(s..e)).collect(),
    ))
}

/// More bytes are needed; refuses to wait when the command is already too big.
fn incomplete(buf: &BytesMut) -> Result<Option<Vec<Bytes>>, ProtocolError> {
    if buf.len() > COMMAND_BYTES_MAX {
        return err("command too big");
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_all(input: &[u8]) -> Result<Vec<Vec<Vec<u8>>>, ProtocolError> {
        let mut buf = BytesMut::from(input);
        let mut out = Vec::new();
        while let Some(args) = parse_command(&mut buf)? {
            out.push(args.iter().map(|a| a.to_vec()).collect());
        }
        Ok(out)
    }

    #[test]
    fn parses_pipelined_arrays() {
        let cmds =
            parse_all(b"*1\r\n$4\r\nPING\r\n*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$0\r\n\r\n").unwrap();
        assert_eq!(cmds.len(), 2);
        assert_eq!(cmds[0], vec![b"PING".to_vec()]);
        assert_eq!(cmds[1], vec![b"SET".to_vec(), b"k".to_vec(), b"".to_vec()]);
    }

    #[test]
    fn waits_for_incomplete_input_at_every_cut() {
        let whole = b"*2\r\n$3\r\nGET\r\n$5\r\nhello\r\n";
        for cut in 0..whole.len() {
            let mut buf = BytesMut::from(&whole[..cut]);
            assert_eq!(parse_command(&mut buf), Ok(None), "cut at {cut}");
            assert_eq!(buf.len(), cut, "nothing consumed at cut {cut}");
        }
    }

    #[test]
    fn refuses_inline_commands() {
        let e = parse_all(b"PING\r\n").unwrap_err();
        assert!(
            e.to_string().contains("inline commands are not supported"),
            "{e}"
        );
        assert!(parse_all(b"\r\n").is_err());
    }

    #[test]
    fn rejects_malformed_and_oversized_input() {
        assert!(parse_all(b"*x\r\n").is_err());
        assert!(parse_all(b"*1\r\n:5\r\n").is_err());
        assert!(parse_all(b"*1\r\n$-1\r\n").is_err());
        assert!(parse_all(b"*1\r\n$3\r\nGETxx").is_err());
        let big = format!("*{}\r\n", ARGS_MAX + 1);
        assert!(parse_all(big.as_bytes()).is_err());
        let bulk = format!("*1\r\n${}\r\n", BULK_LEN_MAX + 1);
        assert!(parse_all(bulk.as_bytes()).is_err());
        assert!(parse_all(b"*99999999999999999999999999999999999999\r\n").is_err());
    }

    #[test]
    fn parses_integers_strictly() {
        assert_eq!(parse_i64(b"-12"), Some(-12));
        assert_eq!(parse_i64(b"9223372036854775807"), Some(i64::MAX));
        assert_eq!(parse_i64(b"9223372036854775808"), None);
        assert_eq!(parse_i64(b"-9223372036854775808"), Some(i64::MIN));
        assert_eq!(parse_i64(b"-9223372036854775809"), None);
        assert_eq!(parse_i64(b"+1"), None);
        assert_eq!(parse_i64(b""), None);
        assert_eq!(parse_i64(b"-"), None);
        assert_eq!(parse_i64(b"1 "), None);
    }
}
