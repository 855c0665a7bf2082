//! The peer messages of a command served at another node of its DC (the START with its
//! first request, and the answers to it), encoded by hand (`kit::postcard_form`) into
//! exactly the bytes postcard writes for them through serde, so the receiver decodes
//! them with postcard as before and the peer wire does not change.
//!
//! On a DC of two nodes, an INCR of a key on the other node sends a `StartWith` there and
//! gets a `ReadCommitResult` back; through serde, each encode cost about 1,500
//! instructions (BENCHMARKS.md, issue 14). Every other message goes through serde. The
//! tests (`msg_enc_tests.rs`) check the bytes against postcard's for every variant
//! written here.

use super::msg::{First, Msg};
use crate::kit::postcard_form::Writer;
use causeway_core::{Error, ReadValue, TxnId, Vc};

/// `Msg`'s variant indexes (the enum's order; the tests compare with serde's bytes).
const START_WITH_TAG: u64 = 0;
const READ_RESULT_TAG: u64 = 4;
const COMMIT_RESULT_TAG: u64 = 5;
const READ_COMMIT_RESULT_TAG: u64 = 6;

/// Appends `msg`'s postcard bytes to `out` if it is one of the messages this module
/// encodes (then true; else false, and `out` is untouched).
pub fn encode_into(msg: &Msg, out: &mut Vec<u8>) -> bool {
    let mut w = Writer(out);
    match msg {
        Msg::StartWith {
            txn,
            kind,
            label,
            cvc,
            first,
            observed,
        } => {
            w.varint(START_WITH_TAG);
            w.txn(txn);
            w.txn_kind(*kind);
            w.option_bytes(label.as_deref().map(str::as_bytes));
            w.vc(cvc);
            write_first(&mut w, first);
            w.bool(*observed);
        }
        Msg::ReadResult { txn, req, result } => {
            header(&mut w, READ_RESULT_TAG, txn, *req);
            match result {
                Ok((values, svc)) => {
                    w.varint(0);
                    write_read(&mut w, values, svc);
                }
                Err(e) => write_error(&mut w, e),
            }
        }
        Msg::CommitResult { txn, req, result } => {
            header(&mut w, COMMIT_RESULT_TAG, txn, *req);
            write_vc_result(&mut w, result);
        }
        Msg::ReadCommitResult {
            txn,
            req,
            read: (values, svc),
            commit,
        } => {
            header(&mut w, READ_COMMIT_RESULT_TAG, txn, *req);
            write_read(&mut w, values, svc);
            write_vc_result(&mut w, commit);
        }
        _ => return false,
    }
    true
}

/// The variant's index, then the `txn` and `req` fields every answer starts with.
fn header(w: &mut Writer, tag: u64, txn: &TxnId, req: u64) {
    w.varint(tag);
    w.txn(txn);
    w.varint(req);
}

fn write_first(w: &mut Writer, first: &First) {
    match first {
        First::Read { req, keys, updates } => {
            w.varint(0);
            w.varint(*req);
            w.typed_keys(keys);
            w.updates(updates);
        }
        First::Commit { req, updates } => {
            w.varint(1);
            w.varint(*req);
            w.updates(updates);
        }
        First::ReadCommit {
            req,
            keys,
            updates,
            then,
        } => {
            w.varint(2);
            w.varint(*req);
            w.typed_keys(keys);
            w.updates(updates);
            w.updates(then);
        }
    }
}

/// The values read and the snapshot they were read at (a tuple: its fields in order).
fn write_read(w: &mut Writer, values: &[ReadValue], svc: &Vc) {
    w.read_values(values);
    w.vc(svc);
}

fn write_vc_result(w: &mut Writer, result: &Result<Vc, Error>) {
    match result {
        Ok(vc) => {
            w.varint(0);
            w.vc(vc);
        }
        Err(e) => write_error(w, e),
    }
}

/// `Err(e)`: rare, and an `Error` has many shapes, so serde writes it.
fn write_error(w: &mut Writer, e: &Error) {
    w.varint(1);
    w.serde(e);
}
