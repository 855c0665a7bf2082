//! Differential property tests of the request parser against `redis-protocol`'s RESP2
//! decoder (the oracle): on valid pipelines cut anywhere, and on arbitrary bytes.

use bytes::{Bytes, BytesMut};
use causeway_resp::parse::parse_command;
use proptest::prelude::*;
use redis_protocol::resp2::decode::decode_bytes;
use redis_protocol::resp2::types::BytesFrame;

/// Most commands in one generated pipeline.
const PIPELINE_LEN_MAX: usize = 8;

fn encode(cmd: &[Vec<u8>]) -> Vec<u8> {
    let mut out = format!("*{}\r\n", cmd.len()).into_bytes();
    for arg in cmd {
        out.extend_from_slice(format!("${}\r\n", arg.len()).as_bytes());
        out.extend_from_slice(arg);
        out.extend_from_slice(b"\r\n");
    }
    out
}

/// What the oracle makes of the front of `input`: `Some((args, consumed))` for a whole,
/// non-empty array of bulk strings.
fn oracle(input: &[u8]) -> Option<(Vec<Bytes>, usize)> {
    let (frame, consumed) = decode_bytes(&Bytes::copy_from_slice(input)).ok()??;
    let BytesFrame::Array(items) = frame else {
        return None;
    };
    let args: Option<Vec<Bytes>> = items
        .into_iter()
        .map(|f| match f {
            BytesFrame::BulkString(b) => Some(b),
            _ => None,
        })
        .collect();
    args.filter(|a| !a.is_empty()).map(|a| (a, consumed))
}

fn command() -> impl Strategy<Value = Vec<Vec<u8>>> {
    prop::collection::vec(prop::collection::vec(any::<u8>(), 0..40), 1..6)
}

proptest! {
    #[test]
    fn pipelines_cut_anywhere_parse_as_the_oracle_decodes(
        cmds in prop::collection::vec(command(), 1..PIPELINE_LEN_MAX),
        cut in any::<prop::sample::Index>(),
    ) {
        let wire: Vec<u8> = cmds.iter().flat_map(|c| encode(c)).collect();
        let cut = cut.index(wire.len() + 1);
        let mut buf = BytesMut::from(&wire[..cut]);
        let mut parsed = Vec::new();
        while let Some(args) = parse_command(&mut buf).expect("valid input") {
            parsed.push(args);
        }
        buf.extend_from_slice(&wire[cut..]);
        while let Some(args) = parse_command(&mut buf).expect("valid input") {
            parsed.push(args);
        }
        prop_assert!(buf.is_empty());
        let mut rest = &wire[..];
        for args in &parsed {
            let (want, used) = oracle(rest).expect("the oracle decodes what we encoded");
            prop_assert_eq!(args, &want);
            rest = &rest[used..];
        }
        prop_assert_eq!(parsed.len(), cmds.len());
    }

    #[test]
    fn arbitrary_bytes_never_parse_differently(
        input in prop::collection::vec(
            prop_oneof![Just(b'*'), Just(b'$'), Just(b'\r'), Just(b'\n'), Just(b'1'), Just(b'2'), any::<u8>()],
            0..64,
        ),
    ) {
        let mut buf = BytesMut::from(&input[..]);
        let ours = parse_command(&mut buf);
        let consumed = input.len() - buf.len();
        // Input not opening with a non-empty array is an inline command, or skipped: the
        // oracle decodes arrays only.
        let array = input.starts_with(b"*") && !input.starts_with(b"*0") && !input.starts_with(b"*-");
        match (ours, oracle(&input)) {
            (Ok(Some(_)), None) if !array => {}
            (Ok(Some(args)), want) => {
                prop_assert_eq!(Some((args, consumed)), want);
            }
            (_, Some((args, _))) if !input.starts_with(b"*0") => {
                prop_assert!(false, "the oracle decoded {:?} from {:?}, we did not", args, input);
            }
            _ => {}
        }
    }
}
