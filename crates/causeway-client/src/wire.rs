//! The native client protocol, shared by this library and the server's client endpoint.
//!
//! A TCP connection carries frames: a 4-byte big-endian length, then that many bytes of a
//! postcard-encoded [`ClientFrame`] (client to server) or [`ServerFrame`] (server to
//! client); no frame may exceed `causeway_core::limits::FRAME_LEN_MAX`. The client opens
//! with `Hello` (with the password when the server has one); the server answers `Welcome` (naming the cluster, protocol, node, DC and
//! the session id it assigned) or `Refused` with a reason, and closes. Then each
//! `Request` gets exactly one `Response`, in order. One connection is one session: the
//! session's causal state lives in the server for as long as the connection is open.

use causeway_core::limits::FRAME_LEN_MAX;
use causeway_core::{Request, Response, Secret, SessionId};
use serde::{Deserialize, Serialize};
use std::io::{self, Read, Write};

/// Version of this frame format; a server refuses a client speaking another. 2: `Hello`
/// carries the password.
pub const CLIENT_WIRE_VERSION: u32 = 2;

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ClientFrame {
    Hello {
        wire_version: u32,
        /// The cluster the client expects; `None` accepts any.
        cluster: Option<String>,
        /// The server's password (the cluster file's `password`, as RESP's AUTH takes);
        /// ignored by a server without one. Sent in clear: see docs/OPERATIONS.md.
        password: Option<Secret>,
    },
    Request(Request),
}

/// What the server tells a client about the session it opened.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Welcome {
    pub cluster: String,
    pub protocol: String,
    pub node: String,
    pub dc: String,
    pub session: SessionId,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ServerFrame {
    Welcome(Welcome),
    Refused { reason: String },
    Response(Response),
}

/// Encodes a frame's payload (without the length prefix).
pub fn encode<T: Serialize>(frame: &T) -> io::Result<Vec<u8>> {
    let bytes = postcard::to_allocvec(frame)
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, format!("encode: {e}")))?;
    if bytes.len() > FRAME_LEN_MAX {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "frame of {} bytes exceeds the limit of {FRAME_LEN_MAX}",
                bytes.len()
            ),
        ));
    }
    Ok(bytes)
}

/// Decodes a frame's payload.
pub fn decode<'a, T: Deserialize<'a>>(bytes: &'a [u8]) -> io::Result<T> {
    postcard::from_bytes(bytes)
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, format!("decode: {e}")))
}

/// Writes one length-prefixed frame.
pub fn write_frame(w: &mut impl Write, payload: &[u8]) -> io::Result<()> {
    let len = u32::try_from(payload.len())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "frame too long"))?;
    let mut buf = Vec::with_capacity(4 + payload.len());
    buf.extend_from_slice(&len.to_be_bytes());
    buf.extend_from_slice(payload);
    w.write_all(&buf)?;
    w.flush()
}

/// Reads one length-prefixed frame, refusing one longer than [`FRAME_LEN_MAX`].
pub fn read_frame(r: &mut impl Read) -> io::Result<Vec<u8>> {
    let mut len = [0u8; 4];
    r.read_exact(&mut len)?;
    // A TLS record (alert 0x15 or handshake 0x16, version 3.x) where a length belongs:
    // the server speaks TLS and this connection does not.
    if matches!(len, [0x15 | 0x16, 0x03, _, _]) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "the server answered with TLS: connect with TLS (causeway cli/load --tls-ca CA_FILE, Options::tls_ca_file)",
        ));
    }
    if let Some(what) = foreign_answer(&len, r) {
        return Err(io::Error::new(io::ErrorKind::InvalidData, what));
    }
    let len = u32::from_be_bytes(len) as usize;
    if len > FRAME_LEN_MAX {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("peer sent a frame of {len} bytes, over the limit of {FRAME_LEN_MAX}"),
        ));
    }
    let mut payload = vec![0u8; len];
    r.read_exact(&mut payload)?;
    Ok(payload)
}

/// Most bytes of another protocol's answer line [`foreign_answer`] reads and shows.
pub const FOREIGN_LINE_MAX: usize = 512;

/// What a server that does not speak this protocol answered, when `head` (the bytes where
/// a frame's length belongs) opens the answer of the Redis protocol (a RESP reply, as
/// Causeway's RESP endpoint, and its metrics endpoint to a client of another protocol,
/// send) or of HTTP: its first line (read from `r`, at most [`FOREIGN_LINE_MAX`] bytes)
/// and where this client belongs. `None` for a plausible frame length: a real frame's
/// length is below 2^24, so its first byte is 0 or 1, and none of these.
pub fn foreign_answer(head: &[u8; 4], r: &mut impl Read) -> Option<String> {
    let what = match head {
        [b'-' | b'+' | b'$' | b'*' | b':' | b'%' | b'_', ..] => "the Redis protocol (RESP)",
        b"HTTP" => "HTTP",
        _ => return None,
    };
    let mut line = head.to_vec();
    let mut byte = [0u8; 1];
    while line.len() < FOREIGN_LINE_MAX && !line.ends_with(b"\n") {
        match r.read(&mut byte) {
            Ok(1) => line.push(byte[0]),
            _ => break,
        }
    }
    let text = String::from_utf8_lossy(&line);
    let text = text.trim_end().trim_start_matches(['-', '+']);
    // A Causeway endpoint's answer names the native port itself.
    let hint = match text.contains("client port") {
        true => "",
        false => {
            "; connect to the DC's native client port (the cluster file's client_addr, e.g. \
             127.0.0.1:7101 for `causeway up`'s first DC)"
        }
    };
    Some(format!(
        "the server answered in {what}, not Causeway's native client protocol: \"{text}\"{hint}"
    ))
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_tls_record_where_a_length_belongs_says_the_server_speaks_tls() {
        let alert = [0x15u8, 0x03, 0x03, 0x00, 0x02, 0x02, 0x32];
        let e = super::read_frame(&mut &alert[..]).unwrap_err();
        assert!(e.to_string().contains("answered with TLS"), "{e}");
        let frame = [0u8, 0, 0, 1, 7];
        assert_eq!(super::read_frame(&mut &frame[..]).unwrap(), vec![7]);
    }

    use super::*;

    #[test]
    fn a_hello_debugs_without_its_password_and_encodes_it_as_before() {
        let hello = ClientFrame::Hello {
            wire_version: CLIENT_WIRE_VERSION,
            cluster: None,
            password: Some("s3cret-pass".into()),
        };
        assert!(!format!("{hello:?}").contains("s3cret"), "{hello:?}");
        let bytes = postcard::to_allocvec(&hello).unwrap();
        let tail = b"s3cret-pass";
        assert!(
            bytes.windows(tail.len()).any(|w| w == tail),
            "a plain string on the wire"
        );
        assert_eq!(postcard::from_bytes::<ClientFrame>(&bytes).unwrap(), hello);
    }

    #[test]
    fn a_resp_or_http_answer_where_a_length_belongs_is_named_with_its_line() {
        let resp = b"-ERR Protocol error: this port speaks RESP; its client port is 127.0.0.1:7101\r\nmore";
        let e = read_frame(&mut &resp[..]).unwrap_err().to_string();
        assert!(e.contains("the Redis protocol (RESP)"), "{e}");
        let line =
            "\"ERR Protocol error: this port speaks RESP; its client port is 127.0.0.1:7101\"";
        assert!(e.contains(line), "{e}");
        assert!(
            !e.contains("e.g. 127.0.0.1:7101"),
            "the server named the port: {e}"
        );
        let http = b"HTTP/1.1 404 Not Found\r\n\r\n";
        let e = read_frame(&mut &http[..]).unwrap_err().to_string();
        assert!(e.contains("in HTTP") && e.contains("404 Not Found"), "{e}");
        assert!(e.contains("native client port"), "where to go: {e}");
        let endless = vec![b'+'; 10 * FOREIGN_LINE_MAX];
        let e = read_frame(&mut &endless[..]).unwrap_err().to_string();
        assert!(
            e.len() < 2 * FOREIGN_LINE_MAX,
            "the line is bounded: {} bytes",
            e.len()
        );
    }

    #[test]
    fn frames_round_trip_and_oversized_ones_are_refused() {
        let frame = ClientFrame::Request(Request::Commit);
        let mut buf = Vec::new();
        write_frame(&mut buf, &encode(&frame).unwrap()).unwrap();
        let back: ClientFrame = decode(&read_frame(&mut buf.as_slice()).unwrap()).unwrap();
        assert_eq!(back, frame);
        let huge = ((FRAME_LEN_MAX + 1) as u32).to_be_bytes();
        let e = read_frame(&mut huge.as_slice()).unwrap_err();
        assert!(e.to_string().contains("over the limit"), "{e}");
    }
}
