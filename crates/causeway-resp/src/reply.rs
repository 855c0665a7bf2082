//! Replies and their encoding in RESP2 or RESP3 (chosen per connection by `HELLO`).
//!
//! RESP3-only types degrade as Redis degrades them for a RESP2 client: a map becomes a flat
//! array of keys and values, a set an array, null a nil bulk string, a verbatim string a
//! bulk string.

use bytes::{BufMut, Bytes, BytesMut};

/// The protocol version a connection speaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Proto {
    Resp2,
    Resp3,
}

/// One reply.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Reply {
    /// `+OK`.
    Ok,
    /// A status line (`+PONG`, `+QUEUED`).
    Simple(&'static str),
    /// An error line; the text starts with its code (`ERR`, `WRONGTYPE`, ...).
    Error(String),
    Int(i64),
    Bulk(Bytes),
    /// Absent value: nil bulk string in RESP2, `_` in RESP3.
    Nil,
    /// Absent array (an aborted `EXEC` in RESP2), `_` in RESP3.
    NilArray,
    Array(Vec<Reply>),
    Set(Vec<Reply>),
    Map(Vec<(Reply, Reply)>),
    /// Text shown as is (`INFO`): verbatim `txt` in RESP3, bulk in RESP2.
    Verbatim(String),
    /// A float already printed (a sorted set's score): a double in RESP3, bulk in RESP2.
    Double(String),
    /// Pairs (a sorted set's members `WITHSCORES`): an array of two-element arrays in
    /// RESP3, as Redis 7 answers, one flat array in RESP2.
    Pairs(Vec<(Reply, Reply)>),
}

impl Reply {
    /// An `ERR` error with `text`.
    pub fn err(text: impl AsRef<str>) -> Reply {
        Reply::Error(format!("ERR {}", text.as_ref()))
    }

    /// A bulk string from text.
    pub fn text(text: impl Into<String>) -> Reply {
        Reply::Bulk(Bytes::from(text.into()))
    }

    pub fn is_error(&self) -> bool {
        matches!(self, Reply::Error(_))
    }

    /// Appends the encoding of this reply to `out`.
    pub fn encode(&self, proto: Proto, out: &mut BytesMut) {
        match self {
            Reply::Ok => out.put_slice(b"+OK\r\n"),
            Reply::Simple(s) => line(out, b'+', s.as_bytes()),
            Reply::Error(e) => line(out, b'-', &sanitize(e)),
            Reply::Int(n) => int_line(out, b':', *n),
            Reply::Bulk(b) => bulk(out, b),
            Reply::Nil | Reply::NilArray if proto == Proto::Resp3 => out.put_slice(b"_\r\n"),
            Reply::Nil => out.put_slice(b"$-1\r\n"),
            Reply::NilArray => out.put_slice(b"*-1\r\n"),
            Reply::Array(items) => seq(out, b'*', items, proto),
            Reply::Set(items) => {
                let tag = if proto == Proto::Resp3 { b'~' } else { b'*' };
                seq(out, tag, items, proto)
            }
            Reply::Map(pairs) => map(out, pairs, proto),
            Reply::Verbatim(text) if proto == Proto::Resp3 => {
                int_line(out, b'=', text.len() as i64 + 4);
                out.put_slice(b"txt:");
                out.put_slice(text.as_bytes());
                out.put_slice(b"\r\n");
            }
            Reply::Verbatim(text) => bulk(out, text.as_bytes()),
            Reply::Double(text) if proto == Proto::Resp3 => line(out, b',', text.as_bytes()),
            Reply::Double(text) => bulk(out, text.as_bytes()),
            Reply::Pairs(pairs) if proto == Proto::Resp3 => {
                int_line(out, b'*', pairs.len() as i64);
                for (a, b) in pairs {
                    out.put_slice(b"*2\r\n");
                    a.encode(proto, out);
                    b.encode(proto, out);
                }
            }
            Reply::Pairs(pairs) => {
                int_line(out, b'*', 2 * pairs.len() as i64);
                for (a, b) in pairs {
                    a.encode(proto, out);
                    b.encode(proto, out);
                }
            }
        }
    }
}

/// Error and status lines may not contain CR or LF.
fn sanitize(text: &str) -> Vec<u8> {
    text.bytes()
        .map(|b| if b == b'\r' || b == b'\n' { b' ' } else { b })
        .collect()
}

fn line(out: &mut BytesMut, tag: u8, text: &[u8]) {
    out.reserve(text.len() + 3);
    out.put_u8(tag);
    out.put_slice(text);
    out.put_slice(b"\r\n");
}

/// `tag`, the decimal `n`, CRLF.
pub fn int_line(out: &mut BytesMut, tag: u8, n: i64) {
    let mut digits = [0u8; 20];
    let mut i = digits.len();
    let mut v = n.unsigned_abs();
    loop {
        i -= 1;
        digits[i] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    out.reserve(24);
    out.put_u8(tag);
    if n < 0 {
        out.put_u8(b'-');
    }
    out.put_slice(&digits[i..]);
    out.put_slice(b"\r\n");
}

fn bulk(out: &mut BytesMut, data: &[u8]) {
    int_line(out, b'$', data.len() as i64);
    out.reserve(data.len() + 2);
    out.put_slice(data);
    out.put_slice(b"\r\n");
}

fn seq(out: &mut BytesMut, tag: u8, items: &[Reply], proto: Proto) {
    int_line(out, tag, items.len() as i64);
    for item in items {
        item.encode(proto, out);
    }
}

fn map(out: &mut BytesMut, pairs: &[(Reply, Reply)], proto: Proto) {
    match proto {
        Proto::Resp3 => int_line(out, b'%', pairs.len() as i64),
        Proto::Resp2 => int_line(out, b'*', 2 * pairs.len() as i64),
    }
    for (k, v) in pairs {
        k.encode(proto, out);
        v.encode(proto, out);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn enc(r: &Reply, proto: Proto) -> String {
        let mut out = BytesMut::new();
        r.encode(proto, &mut out);
        String::from_utf8(out.to_vec()).unwrap()
    }

    #[test]
    fn encodes_scalars() {
        assert_eq!(enc(&Reply::Ok, Proto::Resp2), "+OK\r\n");
        assert_eq!(enc(&Reply::Int(-42), Proto::Resp2), ":-42\r\n");
        assert_eq!(
            enc(&Reply::Int(i64::MIN), Proto::Resp2),
            ":-9223372036854775808\r\n"
        );
        assert_eq!(enc(&Reply::text("hi"), Proto::Resp2), "$2\r\nhi\r\n");
        assert_eq!(enc(&Reply::Nil, Proto::Resp2), "$-1\r\n");
        assert_eq!(enc(&Reply::Nil, Proto::Resp3), "_\r\n");
        assert_eq!(enc(&Reply::err("a\r\nb"), Proto::Resp2), "-ERR a  b\r\n");
    }

    #[test]
    fn degrades_resp3_aggregates_for_resp2() {
        let m = Reply::Map(vec![(Reply::text("k"), Reply::Int(1))]);
        assert_eq!(enc(&m, Proto::Resp3), "%1\r\n$1\r\nk\r\n:1\r\n");
        assert_eq!(enc(&m, Proto::Resp2), "*2\r\n$1\r\nk\r\n:1\r\n");
        let s = Reply::Set(vec![Reply::text("a")]);
        assert_eq!(enc(&s, Proto::Resp3), "~1\r\n$1\r\na\r\n");
        assert_eq!(enc(&s, Proto::Resp2), "*1\r\n$1\r\na\r\n");
        let v = Reply::Verbatim("x".into());
        assert_eq!(enc(&v, Proto::Resp3), "=5\r\ntxt:x\r\n");
        assert_eq!(enc(&v, Proto::Resp2), "$1\r\nx\r\n");
    }
}
