//! The request parser: RESP arrays of bulk strings, what every client library sends, and
//! inline commands, a line of words (`PING\r\n`: what `redis-benchmark`'s PING_INLINE, a
//! person typing into `nc` or `telnet`, and old clients send), split as Redis splits them
//! (`sdssplitargs`: `"..."` with escapes, `'...'`). An inline line is bounded by
//! [`INLINE_LEN_MAX`], as Redis bounds it; larger commands go as arrays.
//!
//! Input that is no Redis command at all (a binary frame where a command belongs, as
//! Causeway's native client sends, or a TLS handshake) is refused with [`NOT_RESP`], to
//! which the server adds where such a client belongs.
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
//! the payload is awaited, so a client cannot make the server buffer without bound; each
//! refusal names the limit it hit. Before a connection authenticates it parses under
//! [`ParseLimits::PREAUTH`] (a few KiB per command), after under [`ParseLimits::FULL`].

use crate::limits::{
    ARGS_MAX, BULK_LEN_MAX, COMMAND_BYTES_MAX, INLINE_LEN_MAX, PREAUTH_COMMAND_BYTES_MAX,
};
use bytes::{Bytes, BytesMut};
use std::fmt;

/// Input that is not a valid request. The connection answers it and closes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProtocolError(pub String);

impl ProtocolError {
    /// Whether the input is no Redis command at all (see [`NOT_RESP`]).
    pub fn is_foreign(&self) -> bool {
        self.0.starts_with(NOT_RESP)
    }
}

impl fmt::Display for ProtocolError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Protocol error: {}", self.0)
    }
}

impl std::error::Error for ProtocolError {}

fn err<T>(what: impl Into<String>) -> Result<T, ProtocolError> {
    Err(ProtocolError(what.into()))
}

/// What input that is no Redis command is told (binary bytes where a command or an inline
/// line belongs); the rest of the message says what it looks like.
pub const NOT_RESP: &str = "this port speaks the Redis protocol (RESP) and the input is not RESP";

/// What an unterminated quote in an inline command is told (Redis's words).
const UNBALANCED: &str = "unbalanced quotes in request";

/// `n` bytes, with its size in MiB or KiB when it is a whole number of them.
pub fn bytes_text(n: usize) -> String {
    match n {
        n if n >= 1 << 20 && n % (1 << 20) == 0 => format!("{n} bytes ({} MiB)", n >> 20),
        n if n >= 1 << 10 && n % (1 << 10) == 0 => format!("{n} bytes ({} KiB)", n >> 10),
        n => format!("{n} bytes"),
    }
}

/// The bounds one command is parsed under.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ParseLimits {
    /// Largest single argument, in bytes.
    pub bulk_len_max: usize,
    /// Largest whole command on the wire, in bytes.
    pub command_bytes_max: usize,
    /// Longest inline command, its end of line included, in bytes.
    pub inline_len_max: usize,
    /// What a refusal adds after "is at most" to say which limits these are.
    pub when: &'static str,
}

impl ParseLimits {
    /// An authenticated connection's limits.
    pub const FULL: ParseLimits = ParseLimits {
        bulk_len_max: BULK_LEN_MAX,
        command_bytes_max: COMMAND_BYTES_MAX,
        inline_len_max: INLINE_LEN_MAX,
        when: "",
    };
    /// A connection's limits before it authenticates: room for `AUTH` or `HELLO ... AUTH
    /// ... SETNAME ...`, and nothing a client that never authenticates could use to make
    /// the server hold memory.
    pub const PREAUTH: ParseLimits = ParseLimits {
        bulk_len_max: PREAUTH_COMMAND_BYTES_MAX,
        command_bytes_max: PREAUTH_COMMAND_BYTES_MAX,
        inline_len_max: PREAUTH_COMMAND_BYTES_MAX,
        when: " before AUTH",
    };
}

/// Takes the next command off the front of `buf` under the full limits
/// ([`parse_command_within`]).
pub fn parse_command(buf: &mut BytesMut) -> Result<Option<Vec<Bytes>>, ProtocolError> {
    parse_command_within(buf, &ParseLimits::FULL)
}

/// Takes the next command off the front of `buf`: `Ok(Some(args))` with at least one
/// argument, `Ok(None)` when more bytes are needed, `Err` on malformed input or input
/// beyond `limits`. Empty commands (`*0`, `*-1`, a blank inline line) are consumed and
/// skipped.
pub fn parse_command_within(
    buf: &mut BytesMut,
    limits: &ParseLimits,
) -> Result<Option<Vec<Bytes>>, ProtocolError> {
    loop {
        let Some(&first) = buf.first() else {
            return Ok(None);
        };
        let parsed = if first == b'*' {
            parse_multibulk(buf, limits)?
        } else {
            parse_inline(buf, limits)?
        };
        match parsed {
            Some(args) if args.is_empty() => continue,
            other => return Ok(other),
        }
    }
}

/// Refuses input that cannot start an inline command: a TLS handshake, or a control byte
/// (Causeway's native client opens with a 4-byte big-endian length, so a zero byte).
fn refuse_foreign(buf: &[u8]) -> Result<(), ProtocolError> {
    match buf {
        [0x16, 0x03, ..] => err(format!(
            "{NOT_RESP}: it opens a TLS handshake, and this port speaks plain TCP"
        )),
        [c, ..] if c.is_ascii_control() && !c.is_ascii_whitespace() => err(format!(
            "{NOT_RESP}: binary bytes (byte {c:#04x}) where a command belongs"
        )),
        _ => Ok(()),
    }
}

/// An inline command: one line, ended by `\n` (a `\r` before it is dropped), split into
/// words ([`inline_arg`]).
fn parse_inline(
    buf: &mut BytesMut,
    limits: &ParseLimits,
) -> Result<Option<Vec<Bytes>>, ProtocolError> {
    refuse_foreign(buf)?;
    let line_max = limits.inline_len_max;
    let Some(nl) = buf.iter().take(line_max).position(|&b| b == b'\n') else {
        if buf.len() >= line_max {
            return err(format!(
                "too big inline request: a line{} is at most {}; send longer commands as \
                 RESP arrays of bulk strings",
                limits.when,
                bytes_text(line_max)
            ));
        }
        return Ok(None);
    };
    let line = buf.split_to(nl + 1);
    let body = &line[..nl];
    let body = body.strip_suffix(b"\r").unwrap_or(body);
    let mut args = Vec::new();
    let mut at = 0;
    loop {
        while body.get(at).is_some_and(u8::is_ascii_whitespace) {
            at += 1;
        }
        if at == body.len() {
            break;
        }
        if args.len() == ARGS_MAX {
            return err(format!(
                "too many arguments in an inline request: at most {ARGS_MAX}"
            ));
        }
        args.push(Bytes::from(inline_arg(body, &mut at)?));
    }
    Ok(Some(args))
}

/// The inline argument starting at `at` (not a space), leaving `at` after it: a word, where
/// `"..."` (with the escapes of [`escaped`]) and `'...'` (with `\'`) may quote spaces, as
/// Redis's `sdssplitargs` reads them; a closing quote must end the argument.
fn inline_arg(line: &[u8], at: &mut usize) -> Result<Vec<u8>, ProtocolError> {
    let mut arg = Vec::new();
    let mut quote: Option<u8> = None;
    while let Some(&c) = line.get(*at) {
        *at += 1;
        match (quote, c) {
            (None, b'"' | b'\'') => quote = Some(c),
            (None, c) if c.is_ascii_whitespace() => return Ok(arg),
            (None, c) => arg.push(c),
            (Some(q), c) if c == q => {
                if line.get(*at).is_some_and(|n| !n.is_ascii_whitespace()) {
                    return err(UNBALANCED);
                }
                quote = None;
            }
            (Some(b'"'), b'\\') => arg.push(escaped(line, at)?),
            (Some(_), b'\\') if line.get(*at) == Some(&b'\'') => {
                *at += 1;
                arg.push(b'\'');
            }
            (Some(_), c) => arg.push(c),
        }
    }
    match quote {
        Some(_) => err(UNBALANCED),
        None => Ok(arg),
    }
}

/// The byte an escape inside `"..."` stands for (`at` is just after its backslash):
/// `\n`, `\r`, `\t`, `\b`, `\a`, `\xHH`, and any other byte for itself.
fn escaped(line: &[u8], at: &mut usize) -> Result<u8, ProtocolError> {
    let Some(&c) = line.get(*at) else {
        return err(UNBALANCED);
    };
    *at += 1;
    let hex = |b: u8| (b as char).to_digit(16);
    if c == b'x' {
        if let Some([h, l]) = line.get(*at..*at + 2) {
            if let (Some(h), Some(l)) = (hex(*h), hex(*l)) {
                *at += 2;
                return Ok((h * 16 + l) as u8);
            }
        }
    }
    Ok(match c {
        b'n' => b'\n',
        b'r' => b'\r',
        b't' => b'\t',
        b'b' => 8,
        b'a' => 7,
        other => other,
    })
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
fn parse_multibulk(
    buf: &mut BytesMut,
    limits: &ParseLimits,
) -> Result<Option<Vec<Bytes>>, ProtocolError> {
    let Some((count, mut pos)) = read_len(buf, 1, "multibulk")? else {
        return Ok(None);
    };
    if count <= 0 {
        let _ = buf.split_to(pos);
        return Ok(Some(Vec::new()));
    }
    if count as u64 > ARGS_MAX as u64 {
        return err(format!(
            "invalid multibulk length {count}: a command has at most {ARGS_MAX} arguments"
        ));
    }
    let mut spans = Vec::with_capacity(count as usize);
    for _ in 0..count {
        match buf.get(pos) {
            None => return incomplete(buf, limits),
            Some(b'$') => {}
            Some(&other) => return err(format!("expected '$', got '{}'", other as char)),
        }
        let Some((len, start)) = read_len(buf, pos + 1, "bulk")? else {
            return incomplete(buf, limits);
        };
        if len < 0 {
            return err("invalid bulk length");
        }
        if len as u64 > limits.bulk_len_max as u64 {
            return err(format!(
                "invalid bulk length {len}: an argument{} is at most {}",
                limits.when,
                bytes_text(limits.bulk_len_max)
            ));
        }
        let end = start + len as usize;
        if end > limits.command_bytes_max {
            return err(too_big(limits));
        }
        if buf.len() < end + 2 {
            return incomplete(buf, limits);
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
fn incomplete(buf: &BytesMut, limits: &ParseLimits) -> Result<Option<Vec<Bytes>>, ProtocolError> {
    if buf.len() > limits.command_bytes_max {
        return err(too_big(limits));
    }
    Ok(None)
}

fn too_big(limits: &ParseLimits) -> String {
    format!(
        "command too big: a command{} is at most {}",
        limits.when,
        bytes_text(limits.command_bytes_max)
    )
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

    fn words(cmd: &[Vec<u8>]) -> Vec<String> {
        cmd.iter()
            .map(|a| String::from_utf8_lossy(a).into_owned())
            .collect()
    }

    #[test]
    fn parses_inline_commands_as_redis_splits_them() {
        let cmds = parse_all(
            b"PING\r\n  set  k v \r\n\r\nGET \"a b\\n\\x41\\\"\" 'it\\'s' x\"y z\"\nECHO \"\"\r\n*1\r\n$4\r\nPING\r\n",
        )
        .unwrap();
        let got: Vec<Vec<String>> = cmds.iter().map(|c| words(c)).collect();
        let want: Vec<Vec<&str>> = vec![
            vec!["PING"],
            vec!["set", "k", "v"],
            vec!["GET", "a b\nA\"", "it's", "xy z"],
            vec!["ECHO", ""],
            vec!["PING"],
        ];
        assert_eq!(got, want, "a blank line is skipped, arrays and lines mix");
    }

    #[test]
    fn an_inline_command_waits_for_its_line_and_is_bounded() {
        let mut buf = BytesMut::from(&b"SET k va"[..]);
        assert_eq!(parse_command(&mut buf), Ok(None));
        assert_eq!(buf.len(), 8, "nothing consumed");
        let long = vec![b'a'; INLINE_LEN_MAX];
        let e = parse_all(&long).unwrap_err();
        assert!(
            e.0.contains("too big inline request") && e.0.contains("65536 bytes (64 KiB)"),
            "{e}"
        );
        let mut fits = vec![b'a'; INLINE_LEN_MAX - 1];
        fits.push(b'\n');
        assert_eq!(parse_all(&fits).unwrap()[0][0].len(), INLINE_LEN_MAX - 1);
        for bad in [&b"GET \"a\r\n"[..], b"GET 'a\r\n", b"GET \"a\"b\r\n"] {
            let e = parse_all(bad).unwrap_err();
            assert!(e.0.contains("unbalanced quotes"), "{bad:?}: {e}");
        }
    }

    #[test]
    fn binary_or_tls_input_is_refused_as_another_protocol() {
        for input in [
            &[0u8, 0, 0, 9, 1][..],
            &[0x16, 0x03, 0x01, 0, 5],
            b"\x01PING\r\n",
        ] {
            let e = parse_all(input).unwrap_err();
            assert!(e.is_foreign(), "{input:?}: {e}");
        }
        assert!(parse_all(b"\tPING\r\n").is_ok(), "a tab is a space");
        assert!(!parse_all(b"*x\r\n").unwrap_err().is_foreign());
    }

    #[test]
    fn rejects_malformed_and_oversized_input() {
        assert!(parse_all(b"*x\r\n").is_err());
        assert!(parse_all(b"*1\r\n:5\r\n").is_err());
        assert!(parse_all(b"*1\r\n$-1\r\n").is_err());
        assert!(parse_all(b"*1\r\n$3\r\nGETxx").is_err());
        let big = format!("*{}\r\n", ARGS_MAX + 1);
        assert!(parse_all(big.as_bytes()).is_err());
        let bulk = format!("*1\r\n${}\r\n", 20_000_000);
        let e = parse_all(bulk.as_bytes()).unwrap_err();
        assert!(
            e.0.contains("at most 2097152 bytes (2 MiB)"),
            "the limit is named: {e}"
        );
        assert!(parse_all(b"*99999999999999999999999999999999999999\r\n").is_err());
    }

    #[test]
    fn before_auth_a_command_is_bounded_to_a_few_kib() {
        let pre = |input: &[u8]| {
            let mut buf = BytesMut::from(input);
            parse_command_within(&mut buf, &ParseLimits::PREAUTH)
        };
        let auth = b"*2\r\n$4\r\nAUTH\r\n$6\r\nsecret\r\n";
        assert_eq!(pre(auth).unwrap().unwrap().len(), 2, "AUTH fits");
        let head = b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$2000000\r\nxxxx";
        let e = pre(head).unwrap_err();
        assert!(
            e.0.contains("an argument before AUTH is at most 4096 bytes (4 KiB)"),
            "refused at its declared length, before its bytes: {e}"
        );
        assert_eq!(
            parse_all(head),
            Ok(vec![]),
            "after AUTH it waits for the value"
        );
        let k = "k".repeat(3000);
        let two = format!("*3\r\n$3\r\nSET\r\n$3000\r\n{k}\r\n$3000\r\n");
        let e = pre(two.as_bytes()).unwrap_err();
        assert!(e.0.contains("a command before AUTH is at most"), "{e}");
        let e = pre(&vec![b'a'; PREAUTH_COMMAND_BYTES_MAX]).unwrap_err();
        assert!(e.0.contains("a line before AUTH is at most"), "{e}");
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
