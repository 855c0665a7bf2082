//! The fuzz property of the request parser, shared by the `resp_command` libFuzzer target
//! (`fuzz/fuzz_targets/resp_command.rs`) and the corpus test (`tests/fuzz_corpus.rs`), so
//! the two cannot drift apart. Beyond "does not panic" it checks that parsing is
//! incremental (bytes arriving in two reads parse as they do in one), that every parsed
//! command is within the limits, and that a command re-encoded by the crate's own RESP
//! encoder parses back to the same arguments.

use crate::commands::lookup;
use crate::limits::{ARGS_MAX, BULK_LEN_MAX};
use crate::parse::{parse_command, ProtocolError};
use crate::reply::{Proto, Reply};
use bytes::{Bytes, BytesMut};

/// What one parser run made of its input.
#[derive(Debug, PartialEq)]
struct Parsed {
    commands: Vec<Vec<Bytes>>,
    failed: bool,
}

/// Runs the parser properties on `data`, panicking when one fails.
pub fn resp_command(data: &[u8]) {
    let mut buf = BytesMut::from(data);
    let mut whole = Parsed {
        commands: Vec::new(),
        failed: false,
    };
    whole.failed = parse_all(&mut buf, &mut whole.commands).is_err();
    if !whole.failed {
        let rest = buf.clone();
        assert_eq!(
            parse_command(&mut buf),
            Ok(None),
            "asking again changes nothing"
        );
        assert_eq!(buf, rest, "an incomplete command is not consumed");
    }
    // A cut anywhere (picked by the input itself) is a client's write split in two reads.
    let cut = data
        .last()
        .map_or(0, |&b| usize::from(b) * data.len() / 255);
    assert_eq!(parse_in_two(data, cut), whole, "cut at {cut}");
    for args in &whole.commands {
        check_command(args);
    }
}

fn parse_all(buf: &mut BytesMut, out: &mut Vec<Vec<Bytes>>) -> Result<(), ProtocolError> {
    while let Some(args) = parse_command(buf)? {
        out.push(args);
    }
    Ok(())
}

fn parse_in_two(data: &[u8], cut: usize) -> Parsed {
    let mut commands = Vec::new();
    let mut buf = BytesMut::from(&data[..cut]);
    let failed = parse_all(&mut buf, &mut commands).is_err() || {
        buf.extend_from_slice(&data[cut..]);
        parse_all(&mut buf, &mut commands).is_err()
    };
    Parsed { commands, failed }
}

/// A parsed command is within the limits, round-trips through the RESP encoder, and
/// finds its command-table entry whatever the case of its name.
fn check_command(args: &[Bytes]) {
    assert!(
        (1..=ARGS_MAX).contains(&args.len()),
        "{} arguments",
        args.len()
    );
    assert!(args.iter().all(|a| a.len() <= BULK_LEN_MAX));
    let reply = Reply::Array(args.iter().cloned().map(Reply::Bulk).collect());
    let mut wire = BytesMut::new();
    reply.encode(Proto::Resp2, &mut wire);
    let back = parse_command(&mut wire).expect("an encoded command parses");
    assert_eq!(
        back.as_deref(),
        Some(args),
        "re-encoded command parses back"
    );
    assert!(wire.is_empty(), "the whole encoding is one command");
    let upper = args[0].to_ascii_uppercase();
    assert_eq!(
        lookup(&args[0]).map(|s| s.name),
        lookup(&upper).map(|s| s.name),
        "command names are case-insensitive"
    );
}
