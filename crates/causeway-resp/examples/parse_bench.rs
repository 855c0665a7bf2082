//! Measures the request parser against `redis-protocol`'s RESP2 frame decoder on the
//! pipelines `redis-benchmark -P 16` sends (SET and GET), in nanoseconds per command.
//!
//! `cargo run --release -p causeway-resp --example parse_bench`

use bytes::{Bytes, BytesMut};
use causeway_resp::parse::parse_command;
use redis_protocol::resp2::decode::decode_bytes_mut;
use redis_protocol::resp2::types::BytesFrame;
use std::hint::black_box;
use std::time::Instant;

/// Commands in one pipeline, as `-P 16` sends them.
const PIPELINE_DEPTH: usize = 16;
/// Pipelines parsed per measurement.
const ROUNDS: usize = 200_000;

fn pipeline() -> Vec<u8> {
    let set = b"*3\r\n$3\r\nSET\r\n$16\r\nkey:__rand_int__\r\n$3\r\nxxx\r\n";
    let get = b"*2\r\n$3\r\nGET\r\n$16\r\nkey:__rand_int__\r\n";
    (0..PIPELINE_DEPTH)
        .flat_map(|i| if i % 2 == 0 { &set[..] } else { &get[..] })
        .copied()
        .collect()
}

/// The decoder's frame as the front end needs it: the arguments.
fn frame_args(frame: BytesFrame) -> Vec<Bytes> {
    match frame {
        BytesFrame::Array(items) => items
            .into_iter()
            .filter_map(|f| match f {
                BytesFrame::BulkString(b) => Some(b),
                _ => None,
            })
            .collect(),
        _ => Vec::new(),
    }
}

fn measure(name: &str, wire: &[u8], mut parse_all: impl FnMut(&mut BytesMut) -> usize) {
    let start = Instant::now();
    let mut commands = 0;
    for _ in 0..ROUNDS {
        let mut buf = BytesMut::from(wire);
        commands += parse_all(&mut buf);
    }
    assert_eq!(
        commands,
        ROUNDS * PIPELINE_DEPTH,
        "{name} parsed every command"
    );
    let ns = start.elapsed().as_nanos() as f64 / commands as f64;
    println!("{name}: {ns:.1} ns/command");
}

fn main() {
    let wire = pipeline();
    for _ in 0..2 {
        measure("causeway parse_command", &wire, |buf| {
            let mut n = 0;
            while let Some(args) = parse_command(buf).expect("valid") {
                n += black_box(args).len().min(1);
            }
            n
        });
        measure("redis-protocol decode_bytes_mut", &wire, |buf| {
            let mut n = 0;
            while let Some((frame, _, _)) = decode_bytes_mut(buf).expect("valid") {
                n += black_box(frame_args(frame)).len().min(1);
            }
            n
        });
    }
}
