//! Unit tests of every command, through [`Conn::execute`] against the in-memory backend.

use crate::commands::COMMANDS;
use crate::conn::{Conn, Outcome, Shared};
use crate::memory::{MemoryCluster, MemoryFactory, MemoryOptions};
use crate::reply::{Proto, Reply};
use bytes::Bytes;
use std::sync::atomic::AtomicUsize;
use std::sync::Arc;

fn shared(
    cluster: &MemoryCluster,
    dc: usize,
    password: Option<&str>,
) -> Arc<Shared<MemoryFactory>> {
    Arc::new(Shared {
        factory: cluster.factory(dc),
        password: password.map(Into::into),
        clients: AtomicUsize::new(1),
    })
}

fn options(dcs: usize) -> MemoryOptions {
    MemoryOptions {
        dcs,
        ..MemoryOptions::default()
    }
}

/// One connection to DC 0 of a fresh one-DC cluster.
fn conn() -> Conn<MemoryFactory> {
    let cluster = MemoryCluster::new(options(1));
    Conn::new(shared(&cluster, 0, None), 1)
}

/// Runs a command given as space-separated words.
async fn run<F: crate::session::SessionFactory>(c: &mut Conn<F>, cmd: &str) -> Reply {
    run_outcome(c, cmd).await.reply
}

async fn run_outcome<F: crate::session::SessionFactory>(c: &mut Conn<F>, cmd: &str) -> Outcome {
    let args = cmd.split(' ').map(|w| Bytes::from(w.to_string())).collect();
    c.execute(args).await
}

fn bulk(text: &str) -> Reply {
    Reply::text(text)
}

/// Asserts an error reply that starts with `prefix` and contains every one of `words`.
fn assert_err(reply: &Reply, prefix: &str, words: &[&str]) {
    let Reply::Error(text) = reply else {
        panic!("expected an error starting with {prefix}, got {reply:?}");
    };
    assert!(
        text.starts_with(prefix),
        "{text:?} should start with {prefix:?}"
    );
    for w in words {
        assert!(text.contains(w), "{text:?} should contain {w:?}");
    }
}

#[tokio::test]
async fn ping_and_echo() {
    let mut c = conn();
    assert_eq!(run(&mut c, "PING").await, Reply::Simple("PONG"));
    assert_eq!(run(&mut c, "ping hi").await, bulk("hi"));
    assert_eq!(run(&mut c, "ECHO x").await, bulk("x"));
    assert_err(&run(&mut c, "ECHO").await, "ERR wrong number", &["'echo'"]);
}

#[tokio::test]
async fn get_set_with_options() {
    let mut c = conn();
    assert_eq!(run(&mut c, "GET k").await, Reply::Nil);
    assert_eq!(run(&mut c, "SET k v").await, Reply::Ok);
    assert_eq!(run(&mut c, "GET k").await, bulk("v"));
    assert_eq!(run(&mut c, "SET k w NX").await, Reply::Nil);
    assert_eq!(run(&mut c, "SET k w XX").await, Reply::Ok);
    assert_eq!(run(&mut c, "SET k z GET").await, bulk("w"));
    assert_eq!(run(&mut c, "SET n v XX").await, Reply::Nil);
    assert_eq!(run(&mut c, "SET n v NX").await, Reply::Ok);
    assert_err(&run(&mut c, "SET k v EX 10").await, "ERR", &["expiration"]);
    assert_err(&run(&mut c, "SET k v BOGUS").await, "ERR syntax error", &[]);
    assert_eq!(run(&mut c, "GET k").await, bulk("z"));
}

#[tokio::test]
async fn del_and_exists_on_every_type() {
    let mut c = conn();
    run(&mut c, "SET r v").await;
    run(&mut c, "INCRBY n 5").await;
    run(&mut c, "SADD s a b").await;
    assert_eq!(run(&mut c, "EXISTS r n s missing r").await, Reply::Int(4));
    assert_eq!(run(&mut c, "DEL r n s missing r").await, Reply::Int(3));
    assert_eq!(run(&mut c, "EXISTS r n s").await, Reply::Int(0));
    assert_eq!(run(&mut c, "GET r").await, Reply::Nil);
    assert_eq!(run(&mut c, "SCARD s").await, Reply::Int(0));
    assert_eq!(run(&mut c, "DEL r").await, Reply::Int(0));
    assert_eq!(run(&mut c, "SET r again").await, Reply::Ok);
    assert_eq!(run(&mut c, "GET r").await, bulk("again"));
}

#[tokio::test]
async fn mget_and_mset() {
    let mut c = conn();
    assert_eq!(run(&mut c, "MSET a 1 b 2").await, Reply::Ok);
    run(&mut c, "INCR n").await;
    run(&mut c, "SADD s x").await;
    let got = run(&mut c, "MGET a b missing n s").await;
    let want = vec![bulk("1"), bulk("2"), Reply::Nil, bulk("1"), Reply::Nil];
    assert_eq!(got, Reply::Array(want));
    assert_err(
        &run(&mut c, "MSET a 1 b").await,
        "ERR wrong number",
        &["'mset'"],
    );
}

#[tokio::test]
async fn counters() {
    let mut c = conn();
    assert_eq!(run(&mut c, "INCR n").await, Reply::Int(1));
    assert_eq!(run(&mut c, "INCRBY n 10").await, Reply::Int(11));
    assert_eq!(run(&mut c, "DECR n").await, Reply::Int(10));
    assert_eq!(run(&mut c, "DECRBY n 4").await, Reply::Int(6));
    assert_eq!(run(&mut c, "GET n").await, bulk("6"));
    assert_err(
        &run(&mut c, "INCRBY n x").await,
        "ERR value is not an integer",
        &[],
    );
    let max = format!("INCRBY n {}", i64::MAX);
    assert_err(&run(&mut c, &max).await, "ERR", &["overflow"]);
    let min = format!("DECRBY n {}", i64::MIN);
    assert_err(&run(&mut c, &min).await, "ERR", &["overflow"]);
    assert_eq!(run(&mut c, "GET n").await, bulk("6"));
}

#[tokio::test]
async fn sets() {
    let mut c = conn();
    assert_eq!(run(&mut c, "SADD s a b a").await, Reply::Int(2));
    assert_eq!(run(&mut c, "SADD s a c").await, Reply::Int(1));
    assert_eq!(run(&mut c, "SISMEMBER s a").await, Reply::Int(1));
    assert_eq!(run(&mut c, "SISMEMBER s z").await, Reply::Int(0));
    assert_eq!(run(&mut c, "SCARD s").await, Reply::Int(3));
    assert_eq!(run(&mut c, "SREM s a z").await, Reply::Int(1));
    let members = Reply::Set(vec![bulk("b"), bulk("c")]);
    assert_eq!(run(&mut c, "SMEMBERS s").await, members);
    assert_eq!(run(&mut c, "SMEMBERS none").await, Reply::Set(Vec::new()));
}

#[tokio::test]
async fn repeated_adds_keep_one_member() {
    let mut c = conn();
    for _ in 0..100 {
        run(&mut c, "SADD s a").await;
    }
    assert_eq!(run(&mut c, "SREM s a").await, Reply::Int(1));
    assert_eq!(run(&mut c, "SCARD s").await, Reply::Int(0));
}

/// The backend keeps one tag per member however often it is re-added, in both DCs.
#[test]
fn re_adds_keep_one_tag_per_member() {
    use crate::session::SessionFactory;
    use causeway_core::{Key, ObjType, Request, Response, TxnKind, Update};
    let cluster = MemoryCluster::new(options(2));
    let mut sessions = [cluster.factory(0).open(), cluster.factory(1).open()];
    let txn = |s: &mut crate::memory::MemorySession, req: Request| {
        s.handle(Request::Begin {
            kind: TxnKind::Causal,
            label: None,
        });
        let resp = s.handle(req);
        s.handle(Request::Commit);
        resp
    };
    for round in 0..50 {
        let add = Request::Update {
            key: Key::from("s"),
            update: Update::Add(b"a".to_vec()),
        };
        txn(&mut sessions[round % 2], add);
        cluster.replicate();
    }
    for s in &mut sessions {
        let read = Request::Read {
            keys: vec![(Key::from("s"), ObjType::Set)],
        };
        let Response::Values(values) = txn(s, read) else {
            panic!("a read answers values");
        };
        assert_eq!(values[0].observed.len(), 1, "{:?}", values[0]);
    }
}

#[tokio::test]
async fn wrongtype_on_every_pair_of_types() {
    let mut c = conn();
    run(&mut c, "SET r v").await;
    run(&mut c, "INCR n").await;
    run(&mut c, "SADD s a").await;
    for cmd in [
        "SADD r x", "SCARD r", "SET n v", "SADD n x", "GET s", "INCR s", "SET s v",
    ] {
        assert_err(&run(&mut c, cmd).await, "WRONGTYPE", &[]);
    }
    // A string that holds no integer is no counter, in Redis's words.
    assert_err(&run(&mut c, "INCR r").await, "ERR", &["not an integer"]);
    assert_eq!(
        run(&mut c, "GET r").await,
        bulk("v"),
        "a refused write changes nothing"
    );
    assert_eq!(run(&mut c, "GET n").await, bulk("1"));
}

#[tokio::test]
async fn unknown_commands_and_arity() {
    let mut c = conn();
    let reply = run(&mut c, "SWAPDB now").await;
    assert_err(&reply, "ERR unknown command 'SWAPDB'", &["'now'"]);
    assert_err(
        &run(&mut c, "GET").await,
        "ERR wrong number of arguments for 'get'",
        &[],
    );
    assert_err(&run(&mut c, "GET a b").await, "ERR wrong number", &[]);
}

#[tokio::test]
async fn multi_exec_is_one_transaction() {
    let mut c = conn();
    assert_eq!(run(&mut c, "MULTI").await, Reply::Ok);
    assert_eq!(run(&mut c, "SET a 1").await, Reply::Simple("QUEUED"));
    assert_eq!(run(&mut c, "INCR n").await, Reply::Simple("QUEUED"));
    assert_eq!(run(&mut c, "GET a").await, Reply::Simple("QUEUED"));
    assert_eq!(run(&mut c, "PING").await, Reply::Simple("QUEUED"));
    let want = vec![Reply::Ok, Reply::Int(1), bulk("1"), Reply::Simple("PONG")];
    assert_eq!(run(&mut c, "EXEC").await, Reply::Array(want));
    assert_eq!(run(&mut c, "MULTI").await, Reply::Ok);
    assert_eq!(run(&mut c, "EXEC").await, Reply::Array(Vec::new()));
}

#[tokio::test]
async fn multi_errors() {
    let mut c = conn();
    assert_err(&run(&mut c, "EXEC").await, "ERR EXEC without MULTI", &[]);
    assert_err(
        &run(&mut c, "DISCARD").await,
        "ERR DISCARD without MULTI",
        &[],
    );
    run(&mut c, "MULTI").await;
    assert_err(
        &run(&mut c, "MULTI").await,
        "ERR MULTI calls can not be nested",
        &[],
    );
    run(&mut c, "SET a 1").await;
    assert_eq!(run(&mut c, "DISCARD").await, Reply::Ok);
    assert_eq!(run(&mut c, "GET a").await, Reply::Nil);
    run(&mut c, "MULTI").await;
    run(&mut c, "SET a 1").await;
    assert_err(&run(&mut c, "NOSUCH").await, "ERR unknown command", &[]);
    assert_err(&run(&mut c, "EXEC").await, "EXECABORT", &[]);
    assert_eq!(
        run(&mut c, "GET a").await,
        Reply::Nil,
        "a discarded EXEC writes nothing"
    );
}

#[tokio::test]
async fn exec_answers_wrongtype_per_command() {
    let mut c = conn();
    run(&mut c, "SADD r v").await;
    run(&mut c, "MULTI").await;
    run(&mut c, "INCR r").await;
    run(&mut c, "SET j 1").await;
    let got = run(&mut c, "EXEC").await;
    let Reply::Array(items) = got else {
        panic!("EXEC answers an array, got {got:?}");
    };
    assert_err(&items[0], "WRONGTYPE", &[]);
    assert_eq!(items[1], Reply::Ok);
    assert_eq!(run(&mut c, "GET j").await, bulk("1"));
}

#[tokio::test]
async fn multi_queue_is_bounded() {
    let mut c = conn();
    run(&mut c, "MULTI").await;
    for _ in 0..crate::limits::MULTI_QUEUE_MAX {
        assert_eq!(run(&mut c, "INCR n").await, Reply::Simple("QUEUED"));
    }
    assert_err(&run(&mut c, "INCR n").await, "ERR", &["exceeds the limit"]);
    assert_err(&run(&mut c, "EXEC").await, "EXECABORT", &[]);
}

#[tokio::test]
async fn interactive_transactions() {
    let cluster = MemoryCluster::new(options(1));
    let mut c = Conn::new(shared(&cluster, 0, None), 1);
    let mut other = Conn::new(shared(&cluster, 0, None), 2);
    assert_eq!(run(&mut c, "TX.BEGIN").await, Reply::Ok);
    assert_eq!(run(&mut c, "SET a 1").await, Reply::Ok);
    assert_eq!(run(&mut c, "INCR n").await, Reply::Int(1));
    assert_eq!(
        run(&mut c, "GET a").await,
        bulk("1"),
        "a transaction reads its writes"
    );
    assert_eq!(
        run(&mut other, "GET a").await,
        Reply::Nil,
        "not visible before commit"
    );
    assert_err(&run(&mut c, "TX.BEGIN").await, "ERR TX.BEGIN inside", &[]);
    assert_err(&run(&mut c, "MULTI").await, "ERR MULTI is not allowed", &[]);
    assert_eq!(run(&mut c, "TX.COMMIT").await, Reply::Ok);
    assert_eq!(run(&mut other, "GET a").await, bulk("1"));
    assert_eq!(run(&mut c, "TX.BEGIN STRONG").await, Reply::Ok);
    run(&mut c, "SET a 2").await;
    assert_eq!(run(&mut c, "TX.ABORT").await, Reply::Ok);
    assert_eq!(
        run(&mut other, "GET a").await,
        bulk("1"),
        "an aborted write is gone"
    );
    assert_err(
        &run(&mut c, "TX.COMMIT").await,
        "ERR TX.COMMIT without TX.BEGIN",
        &[],
    );
    assert_err(&run(&mut c, "TX.BEGIN WEAK").await, "ERR syntax error", &[]);
}

#[tokio::test]
async fn capability_errors_name_protocol_and_capability() {
    let cluster = MemoryCluster::new(MemoryOptions {
        protocol: "eventual".into(),
        strong: false,
        tokens: false,
        ..MemoryOptions::default()
    });
    let mut c = Conn::new(shared(&cluster, 0, None), 1);
    let reply = run(&mut c, "TX.BEGIN STRONG").await;
    assert_err(&reply, "ERR", &["'eventual'", "strong transactions"]);
    assert_eq!(
        run(&mut c, "SET a 1").await,
        Reply::Ok,
        "not left in a transaction"
    );
    for cmd in ["CAUSAL.TOKEN", "CAUSAL.BARRIER", "CAUSAL.ATTACH 00"] {
        assert_err(
            &run(&mut c, cmd).await,
            "ERR",
            &["'eventual'", "causal tokens"],
        );
    }
}

#[tokio::test]
async fn causal_token_carries_the_past_across_dcs() {
    let cluster = MemoryCluster::new(options(2));
    let mut dc1 = Conn::new(shared(&cluster, 0, None), 1);
    let mut dc2 = Conn::new(shared(&cluster, 1, None), 2);
    run(&mut dc1, "SET x 1").await;
    let Reply::Bulk(token) = run(&mut dc1, "CAUSAL.TOKEN").await else {
        panic!("CAUSAL.TOKEN answers a bulk string");
    };
    assert_eq!(
        run(&mut dc2, "GET x").await,
        Reply::Nil,
        "not replicated yet"
    );
    let attach = format!("CAUSAL.ATTACH {}", String::from_utf8_lossy(&token));
    assert_eq!(run(&mut dc2, &attach).await, Reply::Ok);
    assert_eq!(
        run(&mut dc2, "GET x").await,
        bulk("1"),
        "the token's past is visible"
    );
    assert_eq!(run(&mut dc2, "CAUSAL.BARRIER").await, Reply::Ok);
    assert_err(
        &run(&mut dc2, "CAUSAL.ATTACH xyz").await,
        "ERR bad causal token",
        &[],
    );
    assert_err(
        &run(&mut dc2, "CAUSAL.ATTACH 00").await,
        "ERR bad causal token",
        &[],
    );
    run(&mut dc2, "MULTI").await;
    assert_err(
        &run(&mut dc2, "CAUSAL.TOKEN").await,
        "ERR",
        &["not allowed inside MULTI"],
    );
}

#[tokio::test]
async fn auth_protects_every_command() {
    let cluster = MemoryCluster::new(options(1));
    let mut c = Conn::new(shared(&cluster, 0, Some("secret")), 1);
    assert_err(&run(&mut c, "GET a").await, "NOAUTH", &[]);
    assert_err(&run(&mut c, "PING").await, "NOAUTH", &[]);
    assert_err(&run(&mut c, "AUTH wrong").await, "WRONGPASS", &[]);
    assert_err(&run(&mut c, "AUTH someone secret").await, "WRONGPASS", &[]);
    assert_err(&run(&mut c, "HELLO 3").await, "NOAUTH", &[]);
    assert_eq!(run(&mut c, "AUTH secret").await, Reply::Ok);
    assert_eq!(run(&mut c, "GET a").await, Reply::Nil);
    let mut h = Conn::new(shared(&cluster, 0, Some("secret")), 2);
    assert!(matches!(
        run(&mut h, "HELLO 3 AUTH default secret").await,
        Reply::Map(_)
    ));
    assert_eq!(run(&mut h, "PING").await, Reply::Simple("PONG"));
    let mut open = conn();
    assert_err(
        &run(&mut open, "AUTH x").await,
        "ERR AUTH <password> called without",
        &[],
    );
}

#[tokio::test]
async fn hello_switches_protocol() {
    let mut c = conn();
    assert_eq!(c.proto(), Proto::Resp2);
    let Reply::Map(fields) = run(&mut c, "HELLO 3 SETNAME app").await else {
        panic!("HELLO answers a map");
    };
    assert!(fields.contains(&(bulk("proto"), Reply::Int(3))));
    assert!(fields.contains(&(bulk("causeway_protocol"), bulk("memory"))));
    assert_eq!(c.proto(), Proto::Resp3);
    assert_eq!(run(&mut c, "CLIENT GETNAME").await, bulk("app"));
    assert_err(&run(&mut c, "HELLO 4").await, "NOPROTO", &[]);
    assert_err(&run(&mut c, "HELLO x").await, "ERR Protocol version", &[]);
    assert_err(&run(&mut c, "HELLO 2 BOGUS").await, "ERR syntax error", &[]);
    run(&mut c, "HELLO 2").await;
    assert_eq!(c.proto(), Proto::Resp2);
}

#[tokio::test]
async fn client_select_quit() {
    let mut c = conn();
    assert_eq!(run(&mut c, "CLIENT ID").await, Reply::Int(1));
    assert_eq!(run(&mut c, "CLIENT GETNAME").await, Reply::Nil);
    assert_eq!(run(&mut c, "CLIENT SETNAME me").await, Reply::Ok);
    assert_eq!(run(&mut c, "CLIENT GETNAME").await, bulk("me"));
    assert_err(
        &run(&mut c, "CLIENT SETNAME a\nb").await,
        "ERR Client names",
        &[],
    );
    assert_eq!(
        run(&mut c, "CLIENT SETINFO LIB-NAME redis-py").await,
        Reply::Ok
    );
    assert_err(
        &run(&mut c, "CLIENT KILL x").await,
        "ERR unknown subcommand",
        &[],
    );
    assert_eq!(run(&mut c, "SELECT 0").await, Reply::Ok);
    assert_err(
        &run(&mut c, "SELECT 1").await,
        "ERR DB index is out of range",
        &[],
    );
    let quit = run_outcome(&mut c, "QUIT").await;
    assert_eq!(quit.reply, Reply::Ok);
    assert!(quit.close);
}

/// `CLIENT SESSION` shows the scope the host gave the session, switches it, and refuses
/// another word; `CLIENT INFO` names it.
#[tokio::test]
async fn client_session_shows_and_switches_the_scope() {
    let mut c = conn();
    assert_eq!(run(&mut c, "CLIENT SESSION").await, bulk("connection"));
    assert_eq!(run(&mut c, "CLIENT SESSION endpoint").await, Reply::Ok);
    assert_eq!(run(&mut c, "CLIENT SESSION").await, bulk("endpoint"));
    match run(&mut c, "CLIENT INFO").await {
        Reply::Verbatim(line) => assert!(line.contains("session=endpoint"), "{line}"),
        other => panic!("CLIENT INFO answered {other:?}"),
    }
    assert_err(
        &run(&mut c, "CLIENT SESSION cluster").await,
        "ERR CLIENT SESSION takes ENDPOINT or CONNECTION",
        &[],
    );
    assert_err(
        &run(&mut c, "CLIENT SESSION a b").await,
        "ERR wrong number of arguments",
        &[],
    );
}

#[tokio::test]
async fn info_reports_protocol_dcs_and_gauges() {
    let cluster = MemoryCluster::new(options(3));
    let mut c = Conn::new(shared(&cluster, 1, None), 1);
    let Reply::Verbatim(text) = run(&mut c, "INFO").await else {
        panic!("INFO answers text");
    };
    for line in [
        "redis_version:",
        "protocol:memory",
        "dc:2",
        "dcs:dc1,dc2,dc3",
        "unreplicated_txns:0\r\n",
    ] {
        assert!(text.contains(line), "INFO lacks {line}: {text}");
    }
    let Reply::Verbatim(server) = run(&mut c, "INFO server").await else {
        panic!("INFO answers text");
    };
    assert!(server.contains("redis_version") && !server.contains("protocol:"));
}

#[tokio::test]
async fn command_introspection() {
    let mut c = conn();
    assert_eq!(
        run(&mut c, "COMMAND COUNT").await,
        Reply::Int(COMMANDS.len() as i64)
    );
    let Reply::Array(all) = run(&mut c, "COMMAND").await else {
        panic!("COMMAND answers an array");
    };
    assert_eq!(all.len(), COMMANDS.len());
    let Reply::Map(docs) = run(&mut c, "COMMAND DOCS get nosuch").await else {
        panic!("COMMAND DOCS answers a map");
    };
    assert_eq!(docs.len(), 1);
    assert_eq!(docs[0].0, bulk("get"));
    let Reply::Array(info) = run(&mut c, "COMMAND INFO get nosuch").await else {
        panic!("COMMAND INFO answers an array");
    };
    assert_eq!(info[1], Reply::NilArray);
    let Reply::Map(config) = run(&mut c, "CONFIG GET save").await else {
        panic!("CONFIG GET answers a map");
    };
    assert_eq!(config, vec![(bulk("save"), bulk(""))]);
}

#[tokio::test]
async fn oversized_keys_and_values_are_refused() {
    let mut c = conn();
    let key = "k".repeat(causeway_core::limits::KEY_LEN_MAX + 1);
    assert_err(
        &run(&mut c, &format!("SET {key} v")).await,
        "ERR key length",
        &["limit"],
    );
    assert_err(
        &run(&mut c, &format!("GET {key}")).await,
        "ERR key length",
        &[],
    );
    let value = "v".repeat(causeway_core::limits::VALUE_LEN_MAX + 1);
    assert_err(
        &run(&mut c, &format!("SET k {value}")).await,
        "ERR value length",
        &[],
    );
    let many = vec!["k"; causeway_core::limits::READ_KEYS_MAX + 1].join(" ");
    assert_err(
        &run(&mut c, &format!("MGET {many}")).await,
        "ERR keys in one command",
        &[],
    );
    assert_eq!(run(&mut c, "PING").await, Reply::Simple("PONG"));
}

#[tokio::test]
async fn a_sadd_of_a_member_it_sees_writes_nothing_and_a_new_add_wins_across_dcs() {
    let cluster = MemoryCluster::new(options(2));
    let mut dc1 = Conn::new(shared(&cluster, 0, None), 1);
    let mut dc2 = Conn::new(shared(&cluster, 1, None), 2);
    run(&mut dc1, "SADD s a b").await;
    cluster.replicate();
    assert_eq!(run(&mut dc2, "SREM s a b").await, Reply::Int(2));
    assert_eq!(
        run(&mut dc1, "SADD s a").await,
        Reply::Int(0),
        "dc1 still sees a"
    );
    cluster.replicate();
    for c in [&mut dc1, &mut dc2] {
        assert_eq!(
            run(c, "SISMEMBER s a").await,
            Reply::Int(0),
            "the SADD wrote nothing: the remove stands, as if it came after it"
        );
    }
    // An add of a member the adder does not see wins over a concurrent remove of the
    // tags the remover saw (add-wins OR-set).
    run(&mut dc1, "SADD s c").await;
    cluster.replicate();
    assert_eq!(run(&mut dc2, "SREM s c").await, Reply::Int(1));
    assert_eq!(run(&mut dc1, "SREM s c").await, Reply::Int(1));
    assert_eq!(run(&mut dc1, "SADD s c").await, Reply::Int(1));
    cluster.replicate();
    for c in [&mut dc1, &mut dc2] {
        assert_eq!(run(c, "SISMEMBER s c").await, Reply::Int(1), "the add wins");
        assert_eq!(run(c, "SCARD s").await, Reply::Int(1));
    }
}

/// A key freed by `DEL` takes any type again (docs/REDIS.md): a set, deleted, becomes a
/// string, a counter, a set again; while it shows one type, the others are refused.
#[tokio::test]
async fn a_key_freed_by_del_takes_any_type() {
    let mut c = conn();
    run(&mut c, "SADD k a").await;
    assert_eq!(run(&mut c, "DEL k").await, Reply::Int(1));
    assert_eq!(run(&mut c, "SET k v").await, Reply::Ok);
    assert_eq!(run(&mut c, "GET k").await, bulk("v"));
    assert_eq!(run(&mut c, "TYPE k").await, Reply::Simple("string"));
    assert_eq!(run(&mut c, "EXISTS k").await, Reply::Int(1));
    assert_eq!(run(&mut c, "STRLEN k").await, Reply::Int(1));
    assert_err(&run(&mut c, "SADD k x").await, "WRONGTYPE", &[]);
    assert_err(&run(&mut c, "SMEMBERS k").await, "WRONGTYPE", &[]);
    assert_eq!(run(&mut c, "SET k w").await, Reply::Ok);
    assert_eq!(run(&mut c, "GET k").await, bulk("w"));
    assert_eq!(run(&mut c, "DEL k").await, Reply::Int(1));
    assert_eq!(run(&mut c, "GET k").await, Reply::Nil);
    assert_eq!(run(&mut c, "TYPE k").await, Reply::Simple("none"));
    assert_eq!(run(&mut c, "INCRBY k 5").await, Reply::Int(5));
    assert_eq!(run(&mut c, "INCR k").await, Reply::Int(6));
    assert_eq!(run(&mut c, "GET k").await, bulk("6"));
    assert_eq!(run(&mut c, "DEL k").await, Reply::Int(1));
    assert_eq!(run(&mut c, "SADD k b").await, Reply::Int(1));
    assert_eq!(run(&mut c, "SMEMBERS k").await, Reply::Set(vec![bulk("b")]));
    assert_eq!(run(&mut c, "TYPE k").await, Reply::Simple("set"));
    // And a string freed by DEL takes a set.
    run(&mut c, "SET r v").await;
    run(&mut c, "DEL r").await;
    assert_eq!(run(&mut c, "SADD r m").await, Reply::Int(1));
    assert_eq!(run(&mut c, "TYPE r").await, Reply::Simple("set"));
    assert_err(&run(&mut c, "GET r").await, "WRONGTYPE", &[]);
}

/// The rule across DCs: a write of another type after the `DEL` wins over a write of the
/// key's old type concurrent with them, whichever DC applies what first.
#[tokio::test]
async fn a_retyping_write_wins_over_a_concurrent_write_of_the_old_type() {
    let cluster = MemoryCluster::new(options(2));
    let mut dc1 = Conn::new(shared(&cluster, 0, None), 1);
    let mut dc2 = Conn::new(shared(&cluster, 1, None), 2);
    run(&mut dc1, "SADD k a").await;
    cluster.replicate();
    run(&mut dc1, "DEL k").await;
    assert_eq!(run(&mut dc1, "SET k v").await, Reply::Ok);
    assert_eq!(run(&mut dc2, "SADD k b").await, Reply::Int(1));
    cluster.replicate();
    for c in [&mut dc1, &mut dc2] {
        assert_eq!(run(c, "GET k").await, bulk("v"));
        assert_eq!(run(c, "TYPE k").await, Reply::Simple("string"));
    }
    // A DEL now removes the string and the hidden member alike: the key is free.
    assert_eq!(run(&mut dc2, "DEL k").await, Reply::Int(1));
    cluster.replicate();
    for c in [&mut dc1, &mut dc2] {
        assert_eq!(run(c, "TYPE k").await, Reply::Simple("none"));
    }
}

/// Inside `MULTI`/`EXEC` and a pipeline, a blind `SET` of a key freed by `DEL` follows
/// the rule of a command alone: it takes the key (a string part of a set key); a key that
/// still shows another type answers `WRONGTYPE` in its place, and the others run.
#[tokio::test]
async fn a_freed_key_takes_another_type_inside_multi_and_pipelines() {
    let mut c = conn();
    for k in ["m", "p", "q"] {
        run(&mut c, &format!("SADD {k} a")).await;
        run(&mut c, &format!("DEL {k}")).await;
    }
    run(&mut c, "SADD busy a").await;
    assert_eq!(run(&mut c, "MULTI").await, Reply::Ok);
    for cmd in ["SET m v", "GET m", "SET busy v", "INCR n"] {
        assert_eq!(run(&mut c, cmd).await, Reply::Simple("QUEUED"));
    }
    let exec = run(&mut c, "EXEC").await;
    let Reply::Array(replies) = exec else {
        panic!("EXEC answers an array: {exec:?}")
    };
    assert_eq!(replies[0], Reply::Ok);
    assert_eq!(replies[1], bulk("v"));
    assert_err(&replies[2], "WRONGTYPE", &[]);
    assert_eq!(replies[3], Reply::Int(1));
    assert_eq!(run(&mut c, "GET m").await, bulk("v"));
    assert_eq!(run(&mut c, "TYPE m").await, Reply::Simple("string"));
    // MSET too, and a MULTI of blind writes alone (the planned batch).
    run(&mut c, "MULTI").await;
    run(&mut c, "MSET q w x 1").await;
    assert_eq!(run(&mut c, "EXEC").await, Reply::Array(vec![Reply::Ok]));
    assert_eq!(run(&mut c, "GET q").await, bulk("w"));
    let replies = pipeline(&mut c, &["SET p v", "GET p", "SADD s a", "SET busy v"]).await;
    assert_eq!(replies[0], Reply::Ok);
    assert_eq!(replies[1], bulk("v"));
    assert_eq!(replies[2], Reply::Int(1));
    assert_err(&replies[3], "WRONGTYPE", &[]);
    assert_eq!(run(&mut c, "TYPE p").await, Reply::Simple("string"));
    assert_eq!(
        run(&mut c, "SMEMBERS busy").await,
        Reply::Set(vec![bulk("a")])
    );
    // An interactive transaction does not read for a blind write (a strong one would
    // conflict on the key): the SET of the freed key fails its commit, nothing applied.
    run(&mut c, "DEL busy").await;
    assert_eq!(run(&mut c, "TX.BEGIN").await, Reply::Ok);
    assert_eq!(run(&mut c, "SET busy v").await, Reply::Ok);
    assert_err(&run(&mut c, "TX.COMMIT").await, "WRONGTYPE", &[]);
    assert_eq!(run(&mut c, "TYPE busy").await, Reply::Simple("none"));
}

#[tokio::test]
async fn type_names_every_kind_of_key() {
    let mut c = conn();
    run(&mut c, "SET r v").await;
    run(&mut c, "INCR n").await;
    run(&mut c, "SADD s a").await;
    assert_eq!(run(&mut c, "TYPE r").await, Reply::Simple("string"));
    assert_eq!(run(&mut c, "TYPE n").await, Reply::Simple("string"));
    assert_eq!(run(&mut c, "TYPE s").await, Reply::Simple("set"));
    assert_eq!(run(&mut c, "TYPE missing").await, Reply::Simple("none"));
    run(&mut c, "DEL r").await;
    assert_eq!(run(&mut c, "TYPE r").await, Reply::Simple("none"));
}

#[test]
fn abort_errors_say_so_once() {
    let e = causeway_core::Error::Aborted("transaction aborted: prepare timed out".into());
    let want = "TXABORTED transaction aborted: prepare timed out";
    assert_eq!(crate::conn::error_reply(&e), Reply::Error(want.into()));
    let plain = causeway_core::Error::Aborted("conflict".into());
    let want = "TXABORTED transaction aborted: conflict";
    assert_eq!(crate::conn::error_reply(&plain), Reply::Error(want.into()));
}

/// A connection whose backend aborts the next `aborted_reads` reads ("snapshot too old").
fn conn_with_aborts(aborted_reads: usize) -> Conn<MemoryFactory> {
    let cluster = MemoryCluster::new(MemoryOptions {
        aborted_reads,
        ..options(1)
    });
    Conn::new(shared(&cluster, 0, None), 1)
}

#[tokio::test]
async fn a_standalone_command_that_aborts_runs_again_on_a_fresh_snapshot() {
    let mut c = conn_with_aborts(1);
    assert_eq!(run(&mut c, "INCR n").await, Reply::Int(1), "retried once");
    let retries = crate::limits::STANDALONE_RETRIES_MAX;
    let mut c = conn_with_aborts(retries + 1);
    assert_err(
        &run(&mut c, "INCR n").await,
        "TXABORTED",
        &["snapshot too old"],
    );
    // The connection is idle again: the next command is its own transaction.
    assert_eq!(run(&mut c, "INCR n").await, Reply::Int(1));
    assert_eq!(run(&mut c, "GET n").await, bulk("1"));
}

#[tokio::test]
async fn an_aborted_exec_leaves_the_connection_idle() {
    let mut c = conn_with_aborts(1);
    run(&mut c, "MULTI").await;
    run(&mut c, "INCR n").await;
    run(&mut c, "GET n").await;
    let reply = run(&mut c, "EXEC").await;
    assert!(
        matches!(&reply, Reply::Error(e) if e.contains("snapshot too old")),
        "{reply:?}"
    );
    assert_eq!(
        run(&mut c, "INCR n").await,
        Reply::Int(1),
        "nothing of EXEC"
    );
    assert_eq!(run(&mut c, "MULTI").await, Reply::Ok);
    assert_eq!(run(&mut c, "EXEC").await, Reply::Array(Vec::new()));
}

#[tokio::test]
async fn an_aborted_interactive_transaction_leaves_the_connection_idle() {
    let mut c = conn_with_aborts(1);
    assert_eq!(run(&mut c, "TX.BEGIN").await, Reply::Ok);
    run(&mut c, "SET a 1").await;
    assert_err(
        &run(&mut c, "GET a").await,
        "TXABORTED",
        &["snapshot too old"],
    );
    assert_err(
        &run(&mut c, "TX.COMMIT").await,
        "ERR TX.COMMIT without TX.BEGIN",
        &[],
    );
    assert_eq!(run(&mut c, "GET a").await, Reply::Nil, "the write is gone");
    assert_eq!(run(&mut c, "TX.BEGIN").await, Reply::Ok);
    assert_eq!(run(&mut c, "TX.COMMIT").await, Reply::Ok);
}

/// The in-memory backend, except that every strong txn fails certification at commit with
/// the reason a UniStore coordinator gives (the backend itself has no certification).
struct StrongConflicts(MemoryFactory);

struct StrongConflictsSession {
    inner: crate::memory::MemorySession,
    strong: bool,
}

const CONFLICT: &str = "conflict on key nick/ann with a strong txn not in the snapshot";

impl crate::session::SessionHandle for StrongConflictsSession {
    async fn call(&mut self, req: causeway_core::Request) -> causeway_core::Response {
        use causeway_core::{Request, Response, TxnKind};
        match req {
            Request::Begin { kind, .. } => self.strong = kind == TxnKind::Strong,
            Request::Commit if self.strong => {
                self.inner.call(Request::Abort).await;
                return Response::Aborted {
                    reason: CONFLICT.into(),
                };
            }
            _ => {}
        }
        self.inner.call(req).await
    }
}

impl crate::session::SessionFactory for StrongConflicts {
    type Handle = StrongConflictsSession;

    fn open(&self) -> StrongConflictsSession {
        StrongConflictsSession {
            inner: self.0.open(),
            strong: false,
        }
    }

    fn info(&self) -> crate::session::ServerInfo {
        self.0.info()
    }
}

#[tokio::test]
async fn a_strong_txn_that_fails_certification_answers_commit_with_the_conflict() {
    let cluster = MemoryCluster::new(options(1));
    let shared = Arc::new(Shared {
        factory: StrongConflicts(cluster.factory(0)),
        password: None,
        clients: AtomicUsize::new(1),
    });
    let mut c = Conn::new(shared, 1);
    let mut run = async |cmd: &str| {
        let args = cmd.split(' ').map(|w| Bytes::from(w.to_string())).collect();
        c.execute(args).await.reply
    };
    assert_eq!(run("TX.BEGIN STRONG").await, Reply::Ok);
    assert_eq!(run("GET nick/ann").await, Reply::Nil);
    assert_eq!(run("SET nick/ann me").await, Reply::Ok);
    let want = format!("TXABORTED transaction aborted: {CONFLICT}");
    assert_eq!(run("TX.COMMIT").await, Reply::Error(want));
    assert_eq!(
        run("GET nick/ann").await,
        Reply::Nil,
        "nothing of it took effect"
    );
    assert_err(
        &run("TX.COMMIT").await,
        "ERR TX.COMMIT without TX.BEGIN",
        &[],
    );
    // The client retries; a causal txn (not certified) commits.
    assert_eq!(run("TX.BEGIN").await, Reply::Ok);
    assert_eq!(run("SET nick/ann me").await, Reply::Ok);
    assert_eq!(run("TX.COMMIT").await, Reply::Ok);
    assert_eq!(run("GET nick/ann").await, bulk("me"));
}

/// The in-memory backend, counting what its sessions are asked ([`Counts`]); with
/// `fail_commits`, every commit fails without saying whether it took effect (as a lost
/// link would).
struct Counting {
    inner: MemoryFactory,
    counts: Arc<Counts>,
    fail_commits: bool,
}

/// What the sessions of a [`Counting`] backend were asked.
#[derive(Default)]
struct Counts {
    begins: AtomicUsize,
    /// Keys read (a read of two keys counts two).
    keys_read: AtomicUsize,
    /// Set `Add` updates.
    adds: AtomicUsize,
    /// Calls into the session (a batch counts one).
    batches: AtomicUsize,
}

fn bump(counter: &AtomicUsize, by: usize) {
    counter.fetch_add(by, std::sync::atomic::Ordering::Relaxed);
}

fn load(counter: &AtomicUsize) -> usize {
    counter.load(std::sync::atomic::Ordering::Relaxed)
}

struct CountingSession {
    inner: crate::memory::MemorySession,
    counts: Arc<Counts>,
    fail_commits: bool,
}

impl crate::session::SessionHandle for CountingSession {
    async fn call(&mut self, req: causeway_core::Request) -> causeway_core::Response {
        use causeway_core::{Error, Request, Response};
        match &req {
            Request::Begin { .. } => bump(&self.counts.begins, 1),
            Request::Read { keys } => bump(&self.counts.keys_read, keys.len()),
            Request::Update {
                update: causeway_core::Update::Add(_),
                ..
            } => bump(&self.counts.adds, 1),
            Request::Commit if self.fail_commits => {
                self.inner.call(Request::Abort).await;
                return Response::Error(Error::Unavailable("the link to the node is down".into()));
            }
            _ => {}
        }
        self.inner.call(req).await
    }

    async fn call_batch(
        &mut self,
        reqs: Vec<causeway_core::Request>,
    ) -> Vec<causeway_core::Response> {
        bump(&self.counts.batches, 1);
        crate::session::call_each(self, reqs).await
    }
}

impl crate::session::SessionFactory for Counting {
    type Handle = CountingSession;

    fn open(&self) -> CountingSession {
        CountingSession {
            inner: self.inner.open(),
            counts: self.counts.clone(),
            fail_commits: self.fail_commits,
        }
    }

    fn info(&self) -> crate::session::ServerInfo {
        self.inner.info()
    }
}

/// A connection counting what it asks its session (the counts are returned beside it).
fn counting_conn(cluster: &MemoryCluster, fail_commits: bool) -> (Conn<Counting>, Arc<Counts>) {
    let counts = Arc::new(Counts::default());
    let shared = Arc::new(Shared {
        factory: Counting {
            inner: cluster.factory(0),
            counts: counts.clone(),
            fail_commits,
        },
        password: None,
        clients: AtomicUsize::new(1),
    });
    (Conn::new(shared, 1), counts)
}

/// Runs the commands as one pipeline (each must be pipelinable).
async fn pipeline<F: crate::session::SessionFactory>(c: &mut Conn<F>, cmds: &[&str]) -> Vec<Reply> {
    let parsed = cmds
        .iter()
        .map(|cmd| {
            let args: Vec<Bytes> = cmd.split(' ').map(|w| Bytes::from(w.to_string())).collect();
            c.pipelinable(&args)
                .unwrap_or_else(|| panic!("{cmd} is pipelinable"))
        })
        .collect();
    c.run_pipelined(parsed).await
}

/// Transactions begun.
fn begun(counts: &Counts) -> usize {
    load(&counts.begins)
}

/// Keys the session was asked to read (a read of two keys counts two).
fn reads_sent(counts: &Counts) -> usize {
    load(&counts.keys_read)
}

/// Set `Add` updates sent to the session.
fn adds_sent(counts: &Counts) -> usize {
    load(&counts.adds)
}

/// Calls into the session (one per batch).
fn calls(counts: &Counts) -> usize {
    load(&counts.batches)
}

#[tokio::test]
async fn pipelined_commands_share_one_transaction_and_see_each_other() {
    let cluster = MemoryCluster::new(options(1));
    let (mut c, begins) = counting_conn(&cluster, false);
    let replies = pipeline(
        &mut c,
        &[
            "SET k v", "GET k", "INCR n", "INCR n", "SADD s a", "SCARD s",
        ],
    )
    .await;
    let want = [Reply::Ok, bulk("v"), Reply::Int(1), Reply::Int(2)];
    assert_eq!(replies[..4], want, "each reads what the earlier ones wrote");
    assert_eq!(replies[4..], [Reply::Int(1), Reply::Int(1)]);
    assert_eq!(begun(&begins), 1, "one transaction for the pipeline");
    let read_before = reads_sent(&begins);
    let replies = pipeline(&mut c, &["GET k", "GET missing", "GET k"]).await;
    assert_eq!(replies, [bulk("v"), Reply::Nil, bulk("v")]);
    assert_eq!(begun(&begins), 2, "pipelined GETs are one read");
    let keys_read = reads_sent(&begins) - read_before;
    assert_eq!(keys_read, 2, "a key asked for twice is read once");
    // A GET of a counter or a set is answered as alone (the counter's value, WRONGTYPE).
    let replies = pipeline(&mut c, &["GET n", "GET s", "GET k"]).await;
    assert_eq!(replies[0], bulk("2"));
    assert_err(&replies[1], "WRONGTYPE", &[]);
    assert_eq!(replies[2], bulk("v"));
    // Another connection sees all of the first pipeline.
    let mut other = Conn::new(shared(&cluster, 0, None), 2);
    assert_eq!(
        run(&mut other, "MGET k n").await,
        Reply::Array(vec![bulk("v"), bulk("2")])
    );
    // Pipelinable: only data commands that need the store, on an idle connection.
    let args =
        |cmd: &str| -> Vec<Bytes> { cmd.split(' ').map(|w| Bytes::from(w.to_string())).collect() };
    assert!(c.pipelinable(&args("PING")).is_none());
    assert!(
        c.pipelinable(&args("GET")).is_none(),
        "arity error: answered alone"
    );
    assert!(c.pipelinable(&args("MULTI")).is_none());
    c.execute(args("MULTI")).await;
    assert!(c.pipelinable(&args("GET k")).is_none(), "queued by MULTI");
}

#[tokio::test]
async fn a_pipelined_command_that_fails_leaves_nothing_and_the_others_run_alone() {
    let cluster = MemoryCluster::new(options(1));
    let (mut c, begins) = counting_conn(&cluster, false);
    let replies = pipeline(&mut c, &["SADD s a", "SET k v", "INCR s", "SET k2 w"]).await;
    assert_eq!(replies[..2], [Reply::Int(1), Reply::Ok]);
    assert_err(&replies[2], "WRONGTYPE", &[]);
    assert_eq!(replies[3], Reply::Ok);
    assert_eq!(begun(&begins), 1 + 4, "the group, then each command alone");
    assert_eq!(
        run(&mut c, "MGET k k2").await,
        Reply::Array(vec![bulk("v"), bulk("w")])
    );
    assert_eq!(run(&mut c, "SMEMBERS s").await, Reply::Set(vec![bulk("a")]));
}

#[tokio::test]
async fn a_pipeline_that_aborts_runs_each_command_alone_once() {
    let mut c = conn_with_aborts(1);
    let replies = pipeline(&mut c, &["INCR n", "INCR n", "GET n"]).await;
    assert_eq!(
        replies,
        [Reply::Int(1), Reply::Int(2), bulk("2")],
        "nothing applied twice"
    );
    let mut c = conn_with_aborts(1);
    let replies = pipeline(&mut c, &["GET a", "GET b"]).await;
    assert_eq!(replies, [Reply::Nil, Reply::Nil]);
    assert_eq!(
        run(&mut c, "SET a 1").await,
        Reply::Ok,
        "the connection is idle"
    );
}

#[tokio::test]
async fn a_pipeline_whose_commit_fails_answers_every_command_with_the_failure() {
    let cluster = MemoryCluster::new(options(1));
    let (mut c, begins) = counting_conn(&cluster, true);
    let replies = pipeline(&mut c, &["SET a 1", "INCR n"]).await;
    for reply in &replies {
        assert_err(reply, "TRYAGAIN", &["link"]);
    }
    assert_eq!(begun(&begins), 1, "not run again: it may have committed");
    let (mut c, _) = counting_conn(&cluster, false);
    assert_eq!(
        run(&mut c, "GET a").await,
        Reply::Nil,
        "this backend did not commit it"
    );
}

#[tokio::test]
async fn a_group_reads_each_key_once_and_sees_its_own_updates() {
    let cluster = MemoryCluster::new(options(1));
    let (mut c, counts) = counting_conn(&cluster, false);
    let cmds = [
        "INCR n",
        "INCR n",
        "INCRBY n 5",
        "DECR n",
        "SADD s b",
        "SADD s a",
        "SADD s b",
        "SCARD s",
        "SREM s b",
        "SISMEMBER s b",
        "SMEMBERS s",
        "SET k v",
        "GET k",
    ];
    let replies = pipeline(&mut c, &cmds).await;
    let want = [
        Reply::Int(1),
        Reply::Int(2),
        Reply::Int(7),
        Reply::Int(6),
        Reply::Int(1),
        Reply::Int(1),
        Reply::Int(0),
        Reply::Int(2),
        Reply::Int(1),
        Reply::Int(0),
        Reply::Set(vec![bulk("a")]),
        Reply::Ok,
        bulk("v"),
    ];
    assert_eq!(replies, want);
    assert_eq!(begun(&counts), 1);
    assert_eq!(reads_sent(&counts), 3, "n, s and k read once each");
}

#[tokio::test]
async fn a_group_sends_a_re_add_of_a_member_it_added_once() {
    let cluster = MemoryCluster::new(options(1));
    let (mut c, counts) = counting_conn(&cluster, false);
    let cmds = [
        "SADD s a", "SADD s a", "SADD s a", "SADD s b", "SREM s a", "SADD s a", "SADD s a",
        "SCARD s",
    ];
    let replies = pipeline(&mut c, &cmds).await;
    let want = [1, 0, 0, 1, 1, 1, 0, 2].map(Reply::Int);
    assert_eq!(replies, want);
    assert_eq!(begun(&counts), 1);
    assert_eq!(adds_sent(&counts), 3, "a, b, and a again after its removal");
    let (mut c, counts) = counting_conn(&cluster, false);
    let replies = pipeline(&mut c, &["SADD s a", "SADD s a", "SMEMBERS s"]).await;
    let members = Reply::Set(vec![bulk("a"), bulk("b")]);
    assert_eq!(replies, [Reply::Int(0), Reply::Int(0), members]);
    assert_eq!(
        adds_sent(&counts),
        0,
        "a member present before the group is not written again (Redis writes nothing)"
    );
    assert_eq!(run(&mut c, "SREM s a").await, Reply::Int(1));
    assert_eq!(run(&mut c, "SCARD s").await, Reply::Int(1));
}

#[tokio::test]
async fn a_groups_later_sadd_of_several_members_counts_only_the_new_ones() {
    let cluster = MemoryCluster::new(options(1));
    let (mut c, _) = counting_conn(&cluster, false);
    assert_eq!(run(&mut c, "SADD s x").await, Reply::Int(1));
    let (mut c, counts) = counting_conn(&cluster, false);
    let cmds = ["SADD s a", "SADD s a b x b c", "SADD s c d", "SCARD s"];
    let replies = pipeline(&mut c, &cmds).await;
    let want = [1, 2, 1, 5].map(Reply::Int);
    assert_eq!(
        replies, want,
        "x was there before, a came earlier in the group"
    );
    assert_eq!(begun(&counts), 1);
    assert_eq!(reads_sent(&counts), 1, "s read once, by the first SADD");
    assert_eq!(
        adds_sent(&counts),
        4,
        "a, b, c, d once each; x was there, so it is not written again"
    );
}

#[tokio::test]
async fn a_groups_later_increments_count_from_what_it_saw_and_refuse_an_overflow() {
    let cluster = MemoryCluster::new(options(1));
    let (mut c, counts) = counting_conn(&cluster, false);
    let max = format!("INCRBY n {}", i64::MAX);
    // SET NX keeps the group off the one-exchange plan (`crate::plan`), which would
    // send the overflowing increment and run each command alone when it is refused.
    let cmds = ["INCR n", "INCRBY n 5", max.as_str(), "DECR n", "SET k v NX"];
    let replies = pipeline(&mut c, &cmds).await;
    assert_eq!(replies[..2], [Reply::Int(1), Reply::Int(6)]);
    assert_err(&replies[2], "ERR", &["overflow"]);
    assert_eq!(replies[3..], [Reply::Int(5), Reply::Ok]);
    assert_eq!(begun(&counts), 1);
    assert_eq!(
        reads_sent(&counts),
        2,
        "n read once, by the first INCR, and k"
    );
    assert_eq!(
        run(&mut c, "GET n").await,
        bulk("5"),
        "the refused increment wrote nothing"
    );
}

/// A small deterministic generator (xorshift64*), so a failure replays from its seed.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) % n
    }
}

/// A random data command over three keys and two elements.
fn random_command(rng: &mut Rng) -> String {
    let key = ["a", "b", "c"][rng.below(3) as usize];
    let elem = ["x", "y"][rng.below(2) as usize];
    match rng.below(12) {
        0 => format!("GET {key}"),
        1 => format!("SET {key} v{}", rng.below(3)),
        2 => format!("INCR {key}"),
        3 => format!("DECRBY {key} 2"),
        4 => format!("DEL {key}"),
        5 => format!("SADD {key} {elem}"),
        6 => format!("SREM {key} {elem}"),
        7 => format!("SMEMBERS {key}"),
        8 => format!("SCARD {key}"),
        9 => format!("EXISTS {key}"),
        10 => format!("MGET a {key}"),
        _ => format!("SET {key} v{} NX", rng.below(3)),
    }
}

/// A random command of the kinds a group can plan ([`crate::plan`]), over three keys,
/// so types clash often (and a clash sends the group down the other path or alone).
fn random_plannable_command(rng: &mut Rng) -> String {
    let key = ["a", "b", "c"][rng.below(3) as usize];
    let elem = ["x", "y"][rng.below(2) as usize];
    match rng.below(10) {
        0 | 1 => format!("GET {key}"),
        2 => format!("SET {key} v{}", rng.below(3)),
        3 => format!("INCR {key}"),
        4 => format!("DECRBY {key} 2"),
        5 => format!("SADD {key} {elem}"),
        6 => format!("SCARD {key}"),
        7 => format!("SISMEMBER {key} {elem}"),
        8 => format!("SMEMBERS {key}"),
        _ => format!("MSET {key} w a w{}", rng.below(2)),
    }
}

/// Runs 40 seeds of 60 random commands one by one and as pipelines of 1 to 16, and
/// asserts the same replies and the same key types at the end.
async fn assert_pipelines_answer_as_one_by_one(command: fn(&mut Rng) -> String) {
    for seed in 1..=40u64 {
        let mut rng = Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
        let cmds: Vec<String> = (0..60).map(|_| command(&mut rng)).collect();
        let mut alone = conn();
        let mut want = Vec::new();
        for cmd in &cmds {
            want.push(run(&mut alone, cmd).await);
        }
        let mut piped = conn();
        let mut got = Vec::new();
        let mut at = 0;
        while at < cmds.len() {
            let len = (1 + rng.below(16) as usize).min(cmds.len() - at);
            let group: Vec<&str> = cmds[at..at + len].iter().map(String::as_str).collect();
            got.extend(pipeline(&mut piped, &group).await);
            at += len;
        }
        for (i, (g, w)) in got.iter().zip(&want).enumerate() {
            assert_eq!(g, w, "seed {seed}, command {i} ({}): {cmds:?}", cmds[i]);
        }
        for key in ["a", "b", "c"] {
            let cmd = format!("TYPE {key}");
            assert_eq!(run(&mut piped, &cmd).await, run(&mut alone, &cmd).await);
        }
    }
}

#[tokio::test]
async fn pipelines_answer_what_the_same_commands_answer_one_by_one() {
    assert_pipelines_answer_as_one_by_one(random_command).await;
}

#[tokio::test]
async fn planned_pipelines_answer_what_the_same_commands_answer_one_by_one() {
    assert_pipelines_answer_as_one_by_one(random_plannable_command).await;
}

#[tokio::test]
async fn a_planned_group_is_one_call_and_two_when_it_adds_to_a_set() {
    let cluster = MemoryCluster::new(options(1));
    let (mut c, counts) = counting_conn(&cluster, false);
    let sadds = ["SADD s a"; 16];
    let replies = pipeline(&mut c, &sadds).await;
    let mut want = vec![Reply::Int(0); 16];
    want[0] = Reply::Int(1);
    assert_eq!(replies, want);
    assert_eq!(
        calls(&counts),
        2,
        "the read, then the add with the commit (SADD writes what the read lacks)"
    );
    assert_eq!((reads_sent(&counts), adds_sent(&counts)), (1, 1));
    // The member is there now: the group is a read and a read-only commit.
    let replies = pipeline(&mut c, &sadds).await;
    assert_eq!(replies, vec![Reply::Int(0); 16]);
    assert_eq!(
        (calls(&counts), adds_sent(&counts)),
        (4, 1),
        "nothing written"
    );
    let (mut c, counts) = counting_conn(&cluster, false);
    let cmds = [
        "GET k",
        "SET k v",
        "GET k",
        "INCR n",
        "INCRBY n 4",
        "SADD s a b",
        "SISMEMBER s b",
        "SCARD s",
        "MSET x 1 y 2",
        "GET x",
        "SMEMBERS s",
    ];
    let replies = pipeline(&mut c, &cmds).await;
    let want = [
        Reply::Nil,
        Reply::Ok,
        bulk("v"),
        Reply::Int(1),
        Reply::Int(5),
        Reply::Int(1),
        Reply::Int(1),
        Reply::Int(2),
        Reply::Ok,
        bulk("1"),
        Reply::Set(vec![bulk("a"), bulk("b")]),
    ];
    assert_eq!(
        replies, want,
        "each sees the snapshot and the earlier writes"
    );
    assert_eq!(
        calls(&counts),
        2,
        "the read, then the writes and the commit"
    );
    assert_eq!(reads_sent(&counts), 4, "k, n, s and x, once each");
    let mut other = Conn::new(shared(&cluster, 0, None), 2);
    let all = Reply::Array(["v", "1", "2", "5"].map(bulk).to_vec());
    assert_eq!(run(&mut other, "MGET k x y n").await, all);
}

#[tokio::test]
async fn a_planned_group_the_store_refuses_runs_each_command_alone() {
    let cluster = MemoryCluster::new(options(1));
    let (mut c, counts) = counting_conn(&cluster, false);
    assert_eq!(run(&mut c, "SET str v").await, Reply::Ok);
    let begun_before = begun(&counts);
    // The read of str as a set fails: nothing of the group took effect.
    let replies = pipeline(&mut c, &["INCR n", "SADD str x", "INCR n"]).await;
    assert_eq!(replies[0], Reply::Int(1));
    assert_err(&replies[1], "WRONGTYPE", &[]);
    assert_eq!(replies[2], Reply::Int(2));
    assert_eq!(
        begun(&counts) - begun_before,
        1 + 3,
        "the group, then each alone"
    );
    // An increment that would overflow what it observes is refused at the commit.
    let max = format!("INCRBY m {}", i64::MAX);
    let replies = pipeline(&mut c, &[max.as_str(), "INCR m", "INCR n"]).await;
    assert_eq!(replies[0], Reply::Int(i64::MAX));
    assert_err(&replies[1], "ERR", &["overflow"]);
    assert_eq!(replies[2], Reply::Int(3), "n counted once per INCR");
    assert_eq!(run(&mut c, "GET m").await, bulk(&i64::MAX.to_string()));
    // A commit that may have taken effect is answered to every command, not run again.
    let (mut c, counts) = counting_conn(&cluster, true);
    let replies = pipeline(&mut c, &["SADD s a", "INCR n"]).await;
    for reply in &replies {
        assert_err(reply, "TRYAGAIN", &["link"]);
    }
    assert_eq!(begun(&counts), 1);
}

/// `MULTI`, the commands (each answered `QUEUED`), then `EXEC`'s answer.
async fn exec<F: crate::session::SessionFactory>(c: &mut Conn<F>, queue: &[&str]) -> Reply {
    assert_eq!(run(c, "MULTI").await, Reply::Ok);
    for cmd in queue {
        assert_eq!(run(c, cmd).await, Reply::Simple("QUEUED"));
    }
    run(c, "EXEC").await
}

#[tokio::test]
async fn an_exec_whose_writes_need_no_read_is_planned() {
    let cluster = MemoryCluster::new(options(1));
    let (mut c, counts) = counting_conn(&cluster, false);
    let queue = [
        "INCR n", "INCR n", "SADD s a", "SET k v", "GET k", "SCARD s",
    ];
    let got = exec(&mut c, &queue).await;
    let want = [
        Reply::Int(1),
        Reply::Int(2),
        Reply::Int(1),
        Reply::Ok,
        bulk("v"),
        Reply::Int(1),
    ];
    assert_eq!(got, Reply::Array(want.to_vec()));
    assert_eq!(
        calls(&counts),
        2,
        "the read, then the updates and the commit (SADD writes what the read lacks)"
    );
    // Refused by the store (an increment that would overflow): run one by one in one
    // transaction, the error in its place, the rest applied.
    let max = format!("INCRBY n {}", i64::MAX);
    let got = exec(&mut c, &[max.as_str(), "SADD s b", "INCR n"]).await;
    let Reply::Array(items) = got else {
        panic!("EXEC answers an array, got {got:?}");
    };
    assert_err(&items[0], "ERR", &["overflow"]);
    assert_eq!(items[1..], [Reply::Int(1), Reply::Int(3)]);
    assert_eq!(run(&mut c, "SCARD s").await, Reply::Int(2));
    // An abort is answered, not run again; a commit that may have taken effect answers
    // the failure.
    let mut c = conn_with_aborts(1);
    let got = exec(&mut c, &["INCR n", "SADD s a"]).await;
    assert!(
        matches!(&got, Reply::Error(e) if e.contains("snapshot too old")),
        "{got:?}"
    );
    assert_eq!(
        run(&mut c, "INCR n").await,
        Reply::Int(1),
        "nothing of EXEC"
    );
    let (mut c, _) = counting_conn(&cluster, true);
    assert_err(
        &exec(&mut c, &["INCR n", "SADD s a"]).await,
        "TRYAGAIN",
        &["link"],
    );
}

#[tokio::test]
async fn append_strlen_setnx_and_getset() {
    let mut c = conn();
    assert_eq!(run(&mut c, "APPEND k ab").await, Reply::Int(2));
    assert_eq!(run(&mut c, "APPEND k cd").await, Reply::Int(4));
    assert_eq!(run(&mut c, "GET k").await, bulk("abcd"));
    assert_eq!(run(&mut c, "STRLEN k").await, Reply::Int(4));
    assert_eq!(run(&mut c, "STRLEN missing").await, Reply::Int(0));
    assert_eq!(run(&mut c, "SETNX k x").await, Reply::Int(0));
    assert_eq!(run(&mut c, "SETNX j x").await, Reply::Int(1));
    assert_eq!(run(&mut c, "GETSET j y").await, bulk("x"));
    assert_eq!(run(&mut c, "GETSET fresh y").await, Reply::Nil);
    assert_eq!(run(&mut c, "GET j").await, bulk("y"));
    run(&mut c, "INCRBY n -120").await;
    assert_eq!(run(&mut c, "STRLEN n").await, Reply::Int(4), "\"-120\"");
    run(&mut c, "SADD s a").await;
    assert_eq!(run(&mut c, "SETNX s x").await, Reply::Int(0), "s exists");
    assert_err(&run(&mut c, "APPEND s x").await, "WRONGTYPE", &[]);
    assert_err(&run(&mut c, "STRLEN s").await, "WRONGTYPE", &[]);
    run(&mut c, "DEL k").await;
    assert_eq!(run(&mut c, "APPEND k z").await, Reply::Int(1), "after DEL");
    // In one transaction, each command sees the ones before it.
    run(&mut c, "MULTI").await;
    run(&mut c, "APPEND t 1").await;
    run(&mut c, "APPEND t 23").await;
    run(&mut c, "STRLEN t").await;
    let want = Reply::Array(vec![Reply::Int(1), Reply::Int(3), Reply::Int(3)]);
    assert_eq!(run(&mut c, "EXEC").await, want);
}

#[tokio::test]
async fn spop_and_srandmember_draw_from_the_snapshot() {
    let mut c = conn();
    assert_eq!(run(&mut c, "SPOP s").await, Reply::Nil);
    assert_eq!(run(&mut c, "SRANDMEMBER s").await, Reply::Nil);
    assert_eq!(run(&mut c, "SRANDMEMBER s 3").await, Reply::Array(vec![]));
    run(&mut c, "SADD s a b c d e").await;
    let members = ["a", "b", "c", "d", "e"].map(bulk);
    let Reply::Array(three) = run(&mut c, "SRANDMEMBER s 3").await else {
        panic!("an array");
    };
    assert_eq!(three.len(), 3);
    assert!(three.iter().all(|m| members.contains(m)), "{three:?}");
    let Reply::Array(all) = run(&mut c, "SRANDMEMBER s 9").await else {
        panic!("an array");
    };
    assert_eq!(all.len(), 5, "distinct: no more than the set holds");
    let Reply::Array(repeats) = run(&mut c, "SRANDMEMBER s -12").await else {
        panic!("an array");
    };
    assert_eq!(repeats.len(), 12, "a negative count may repeat");
    assert_eq!(
        run(&mut c, "SCARD s").await,
        Reply::Int(5),
        "nothing removed"
    );
    let one = run(&mut c, "SPOP s").await;
    assert!(members.contains(&one), "{one:?}");
    let Reply::Array(two) = run(&mut c, "SPOP s 2").await else {
        panic!("an array");
    };
    assert_eq!(two.len(), 2);
    assert!(!two.contains(&one), "popped once");
    assert_eq!(run(&mut c, "SCARD s").await, Reply::Int(2));
    let Reply::Array(rest) = run(&mut c, "SPOP s 10").await else {
        panic!("an array");
    };
    assert_eq!(rest.len(), 2);
    assert_eq!(run(&mut c, "SCARD s").await, Reply::Int(0));
    run(&mut c, "SET r v").await;
    assert_err(&run(&mut c, "SPOP r").await, "WRONGTYPE", &[]);
}

/// The documented conflict rules across DCs: concurrent `APPEND`s, last writer wins;
/// concurrent `SPOP`s of a one-member set both return it; an `SADD` of the member
/// concurrent with a `SPOP` survives it.
#[tokio::test]
async fn concurrent_appends_and_spops_resolve_by_their_types_rules() {
    let cluster = MemoryCluster::new(options(2));
    let mut dc1 = Conn::new(shared(&cluster, 0, None), 1);
    let mut dc2 = Conn::new(shared(&cluster, 1, None), 2);
    run(&mut dc1, "SET k base").await;
    run(&mut dc1, "SADD s only").await;
    cluster.replicate();
    assert_eq!(run(&mut dc1, "APPEND k -one").await, Reply::Int(8));
    assert_eq!(run(&mut dc2, "APPEND k -two").await, Reply::Int(8));
    assert_eq!(run(&mut dc1, "SPOP s").await, bulk("only"));
    assert_eq!(run(&mut dc2, "SPOP s").await, bulk("only"), "both pop it");
    run(&mut dc2, "SADD s only").await;
    cluster.replicate();
    let v1 = run(&mut dc1, "GET k").await;
    assert_eq!(v1, run(&mut dc2, "GET k").await, "the DCs agree");
    assert!(
        v1 == bulk("base-one") || v1 == bulk("base-two"),
        "one append wins whole: {v1:?}"
    );
    for c in [&mut dc1, &mut dc2] {
        assert_eq!(
            run(c, "SMEMBERS s").await,
            Reply::Set(vec![bulk("only")]),
            "dc2's add after its SPOP, concurrent with dc1's SPOP, survives it"
        );
    }
}

/// A string `SET` wrote counts when it holds a decimal integer (the issue's `SET cnt 10`
/// then `INCR cnt`), alone, in a pipeline-like group and in `MULTI`; text is refused as
/// Redis refuses it, and a deleted string counts from 0.
#[tokio::test]
async fn a_string_set_to_an_integer_counts() {
    let mut c = conn();
    assert_eq!(run(&mut c, "SET cnt 10").await, Reply::Ok);
    assert_eq!(run(&mut c, "INCR cnt").await, Reply::Int(11));
    assert_eq!(run(&mut c, "INCRBY cnt 5").await, Reply::Int(16));
    assert_eq!(run(&mut c, "DECR cnt").await, Reply::Int(15));
    assert_eq!(run(&mut c, "DECRBY cnt 20").await, Reply::Int(-5));
    assert_eq!(run(&mut c, "GET cnt").await, bulk("-5"));
    assert_eq!(run(&mut c, "TYPE cnt").await, Reply::Simple("string"));
    assert_eq!(run(&mut c, "SET cnt 3").await, Reply::Ok);
    assert_eq!(run(&mut c, "INCR cnt").await, Reply::Int(4));
    assert_eq!(run(&mut c, "APPEND cnt 0").await, Reply::Int(2));
    assert_eq!(run(&mut c, "INCR cnt").await, Reply::Int(41));
    run(&mut c, "SET big 9223372036854775807").await;
    assert_err(&run(&mut c, "INCR big").await, "ERR", &["overflow"]);
    run(&mut c, "SET text abc").await;
    assert_err(&run(&mut c, "INCR text").await, "ERR", &["not an integer"]);
    assert_eq!(run(&mut c, "GET text").await, bulk("abc"));
    run(&mut c, "DEL text").await;
    assert_eq!(
        run(&mut c, "INCRBY text 7").await,
        Reply::Int(7),
        "after DEL"
    );
    assert_eq!(run(&mut c, "GET text").await, bulk("7"));
    run(&mut c, "MULTI").await;
    run(&mut c, "SET m 5").await;
    run(&mut c, "INCR m").await;
    run(&mut c, "INCR m").await;
    run(&mut c, "GET m").await;
    assert_eq!(
        run(&mut c, "EXEC").await,
        Reply::Array(vec![Reply::Ok, Reply::Int(6), Reply::Int(7), bulk("7")])
    );
}

/// Concurrent `SET` and `INCR` in two DCs: the increment the `SET` did not observe
/// survives it (docs/REDIS.md), whichever the `SET` is arbitrated against.
#[tokio::test]
async fn a_set_concurrent_with_an_incr_keeps_the_increment() {
    let cluster = MemoryCluster::new(options(2));
    let mut dc1 = Conn::new(shared(&cluster, 0, None), 1);
    let mut dc2 = Conn::new(shared(&cluster, 1, None), 2);
    run(&mut dc1, "SET c 10").await;
    cluster.replicate();
    assert_eq!(run(&mut dc1, "INCRBY c 2").await, Reply::Int(12));
    assert_eq!(run(&mut dc2, "SET c 20").await, Reply::Ok);
    assert_eq!(run(&mut dc1, "INCR c").await, Reply::Int(13));
    cluster.replicate();
    for c in [&mut dc1, &mut dc2] {
        assert_eq!(
            run(c, "GET c").await,
            bulk("23"),
            "20 plus the 3 it did not see"
        );
    }
    // A SET that saw the increments replaces them.
    assert_eq!(run(&mut dc2, "SET c 1").await, Reply::Ok);
    cluster.replicate();
    for c in [&mut dc1, &mut dc2] {
        assert_eq!(run(c, "GET c").await, bulk("1"));
    }
}

/// The hash commands as Redis answers them: HSET counts new fields, HGETALL is a map
/// (a flat array in RESP2), HINCRBY counts, HDEL counts removed fields, a hash with no
/// field is absent and its key freed for another type, WRONGTYPE between types.
#[tokio::test]
async fn hashes_answer_as_redis() {
    let mut c = conn();
    assert_eq!(run(&mut c, "HSET h a 1 b 2").await, Reply::Int(2));
    assert_eq!(run(&mut c, "HSET h a 3 c 4 c 5").await, Reply::Int(1));
    assert_eq!(run(&mut c, "HGET h a").await, bulk("3"));
    assert_eq!(
        run(&mut c, "HGET h c").await,
        bulk("5"),
        "the last value given"
    );
    assert_eq!(run(&mut c, "HGET h zz").await, Reply::Nil);
    assert_eq!(run(&mut c, "HGET none a").await, Reply::Nil);
    let mget = Reply::Array(vec![bulk("3"), Reply::Nil, bulk("2")]);
    assert_eq!(run(&mut c, "HMGET h a x b").await, mget);
    let all = Reply::Map(vec![
        (bulk("a"), bulk("3")),
        (bulk("b"), bulk("2")),
        (bulk("c"), bulk("5")),
    ]);
    assert_eq!(run(&mut c, "HGETALL h").await, all);
    assert_eq!(run(&mut c, "HLEN h").await, Reply::Int(3));
    assert_eq!(run(&mut c, "HEXISTS h b").await, Reply::Int(1));
    assert_eq!(run(&mut c, "HEXISTS h x").await, Reply::Int(0));
    let keys = Reply::Array(vec![bulk("a"), bulk("b"), bulk("c")]);
    assert_eq!(run(&mut c, "HKEYS h").await, keys);
    assert_eq!(run(&mut c, "HSETNX h a 9").await, Reply::Int(0));
    assert_eq!(run(&mut c, "HSETNX h d 9").await, Reply::Int(1));
    assert_eq!(run(&mut c, "HINCRBY h a 10").await, Reply::Int(13));
    assert_eq!(run(&mut c, "HINCRBY h n -2").await, Reply::Int(-2));
    assert_eq!(run(&mut c, "HGET h n").await, bulk("-2"));
    run(&mut c, "HSET h t text").await;
    assert_err(
        &run(&mut c, "HINCRBY h t 1").await,
        "ERR",
        &["not an integer"],
    );
    assert_err(
        &run(&mut c, "HINCRBY h a x").await,
        "ERR",
        &["not an integer"],
    );
    assert_eq!(run(&mut c, "HDEL h a b zz a").await, Reply::Int(2));
    assert_eq!(run(&mut c, "HLEN h").await, Reply::Int(4));
    assert_eq!(run(&mut c, "TYPE h").await, Reply::Simple("hash"));
    assert_eq!(run(&mut c, "EXISTS h").await, Reply::Int(1));
    assert_err(&run(&mut c, "GET h").await, "WRONGTYPE", &[]);
    assert_err(&run(&mut c, "SADD h x").await, "WRONGTYPE", &[]);
    run(&mut c, "SET s v").await;
    assert_err(&run(&mut c, "HSET s f v").await, "WRONGTYPE", &[]);
    assert_err(&run(&mut c, "HGET s f").await, "WRONGTYPE", &[]);
    assert_err(&run(&mut c, "HSET h f").await, "ERR", &["wrong number"]);
    // A hash with no field is absent; DEL frees the key for any type, and back.
    assert_eq!(run(&mut c, "HDEL h c d n t").await, Reply::Int(4));
    assert_eq!(run(&mut c, "EXISTS h").await, Reply::Int(0));
    assert_eq!(run(&mut c, "TYPE h").await, Reply::Simple("none"));
    assert_eq!(run(&mut c, "HGETALL h").await, Reply::Map(Vec::new()));
    assert_eq!(run(&mut c, "SET h v").await, Reply::Ok);
    assert_eq!(run(&mut c, "DEL h").await, Reply::Int(1));
    assert_eq!(run(&mut c, "HSET h f 1").await, Reply::Int(1));
    assert_eq!(run(&mut c, "DEL h s").await, Reply::Int(2));
    assert_eq!(run(&mut c, "HSET s f 1").await, Reply::Int(1));
    assert_eq!(run(&mut c, "TYPE s").await, Reply::Simple("hash"));
    let long = "x".repeat(causeway_core::limits::HASH_VALUE_LEN_MAX + 1);
    let reply = run(&mut c, &format!("HSET s f {long}")).await;
    assert_err(&reply, "ERR", &["hash value length", "limit"]);
}

/// Across DCs: concurrent HINCRBYs add up, and an HSET concurrent with an HDEL of its
/// field survives it, whichever DC applies what first.
#[tokio::test]
async fn hashes_resolve_concurrent_writes_by_their_rules() {
    let cluster = MemoryCluster::new(options(2));
    let mut dc1 = Conn::new(shared(&cluster, 0, None), 1);
    let mut dc2 = Conn::new(shared(&cluster, 1, None), 2);
    run(&mut dc1, "HSET h f old n 1").await;
    cluster.replicate();
    assert_eq!(run(&mut dc1, "HDEL h f").await, Reply::Int(1));
    assert_eq!(run(&mut dc2, "HSET h f new").await, Reply::Int(0));
    assert_eq!(run(&mut dc1, "HINCRBY h n 2").await, Reply::Int(3));
    assert_eq!(run(&mut dc2, "HINCRBY h n 5").await, Reply::Int(6));
    cluster.replicate();
    for c in [&mut dc1, &mut dc2] {
        assert_eq!(run(c, "HGET h f").await, bulk("new"), "the HSET survives");
        assert_eq!(run(c, "HGET h n").await, bulk("8"), "increments add up");
    }
}

/// The list commands as Redis answers them: pushes answer the length, LPUSH of several
/// values reverses them, pops with and without a count, LRANGE and LINDEX with negative
/// indexes, an emptied list is absent and its key freed for another type, WRONGTYPE
/// between types, the limits named.
#[tokio::test]
async fn lists_answer_as_redis() {
    let mut c = conn();
    assert_eq!(run(&mut c, "RPUSH l a b c").await, Reply::Int(3));
    assert_eq!(run(&mut c, "LPUSH l x y").await, Reply::Int(5));
    let all = |vs: &[&str]| Reply::Array(vs.iter().map(|v| bulk(v)).collect());
    assert_eq!(
        run(&mut c, "LRANGE l 0 -1").await,
        all(&["y", "x", "a", "b", "c"])
    );
    assert_eq!(run(&mut c, "LRANGE l -2 99").await, all(&["b", "c"]));
    assert_eq!(run(&mut c, "LRANGE l 3 1").await, all(&[]));
    assert_eq!(run(&mut c, "LLEN l").await, Reply::Int(5));
    assert_eq!(run(&mut c, "LINDEX l -1").await, bulk("c"));
    assert_eq!(run(&mut c, "LINDEX l 9").await, Reply::Nil);
    assert_eq!(run(&mut c, "LPOP l").await, bulk("y"));
    assert_eq!(run(&mut c, "RPOP l 2").await, all(&["c", "b"]));
    assert_eq!(run(&mut c, "TYPE l").await, Reply::Simple("list"));
    assert_eq!(run(&mut c, "EXISTS l").await, Reply::Int(1));
    assert_err(&run(&mut c, "GET l").await, "WRONGTYPE", &[]);
    assert_err(&run(&mut c, "SADD l m").await, "WRONGTYPE", &[]);
    assert_err(&run(&mut c, "HSET l f v").await, "WRONGTYPE", &[]);
    run(&mut c, "SET s v").await;
    assert_err(&run(&mut c, "LPUSH s v").await, "WRONGTYPE", &[]);
    assert_err(&run(&mut c, "LRANGE s 0 -1").await, "WRONGTYPE", &[]);
    assert_err(&run(&mut c, "LPOP l -1").await, "ERR", &["positive"]);
    assert_err(&run(&mut c, "LPUSH l").await, "ERR", &["wrong number"]);
    // Popped empty: absent, nil replies, and the key takes another type.
    assert_eq!(run(&mut c, "LPOP l 5").await, all(&["x", "a"]));
    assert_eq!(run(&mut c, "EXISTS l").await, Reply::Int(0));
    assert_eq!(run(&mut c, "LPOP l").await, Reply::Nil);
    assert_eq!(run(&mut c, "RPOP l 2").await, Reply::NilArray);
    assert_eq!(run(&mut c, "LLEN l").await, Reply::Int(0));
    assert_eq!(run(&mut c, "SET l v").await, Reply::Ok);
    assert_eq!(run(&mut c, "DEL l").await, Reply::Int(1));
    assert_eq!(run(&mut c, "RPUSH l q").await, Reply::Int(1));
    assert_eq!(run(&mut c, "DEL l s").await, Reply::Int(2));
    assert_eq!(run(&mut c, "TYPE l").await, Reply::Simple("none"));
    assert_eq!(run(&mut c, "RPUSH s 1").await, Reply::Int(1));
    assert_eq!(run(&mut c, "TYPE s").await, Reply::Simple("list"));
    let long = "x".repeat(causeway_core::limits::LIST_ELEM_LEN_MAX + 1);
    let reply = run(&mut c, &format!("RPUSH s {long}")).await;
    assert_err(&reply, "ERR", &["LIST_ELEM_LEN_MAX"]);
    // MULTI: a push then a pop of it in one transaction.
    run(&mut c, "MULTI").await;
    run(&mut c, "RPUSH m a b").await;
    run(&mut c, "RPOP m").await;
    let exec = run(&mut c, "EXEC").await;
    assert_eq!(exec, Reply::Array(vec![Reply::Int(2), bulk("b")]));
    assert_eq!(run(&mut c, "LRANGE m 0 -1").await, all(&["a"]));
}

/// Across DCs: concurrent pushes at one end both stay, in one order everywhere; two DCs
/// popping the head concurrently both get it and it is removed once; an element pushed
/// concurrently with a pop survives it.
#[tokio::test]
async fn lists_resolve_concurrent_writes_by_their_rules() {
    let cluster = MemoryCluster::new(options(2));
    let mut dc1 = Conn::new(shared(&cluster, 0, None), 1);
    let mut dc2 = Conn::new(shared(&cluster, 1, None), 2);
    run(&mut dc1, "RPUSH l a b c").await;
    cluster.replicate();
    assert_eq!(run(&mut dc1, "LPOP l").await, bulk("a"));
    assert_eq!(run(&mut dc2, "LPOP l").await, bulk("a"), "the same head");
    assert_eq!(run(&mut dc2, "RPUSH l z").await, Reply::Int(3));
    assert_eq!(run(&mut dc1, "RPUSH l y").await, Reply::Int(3));
    cluster.replicate();
    let one = run(&mut dc1, "LRANGE l 0 -1").await;
    assert_eq!(run(&mut dc2, "LRANGE l 0 -1").await, one, "one order");
    let Reply::Array(elems) = &one else {
        panic!("an array: {one:?}")
    };
    assert_eq!(elems.len(), 4, "a removed once, both pushes stay: {one:?}");
    assert_eq!(&elems[..2], &[bulk("b"), bulk("c")]);
    // DC 1 pops everything it sees while DC 2 pushes: DC 2's element survives.
    assert_eq!(run(&mut dc1, "DEL l").await, Reply::Int(1));
    assert_eq!(run(&mut dc2, "LPUSH l new").await, Reply::Int(5));
    cluster.replicate();
    for c in [&mut dc1, &mut dc2] {
        let only = Reply::Array(vec![bulk("new")]);
        assert_eq!(run(c, "LRANGE l 0 -1").await, only);
    }
}

fn dbl(text: &str) -> Reply {
    Reply::Double(text.into())
}

/// The sorted-set commands as Redis answers them: ZADD's options, scores in Redis's text,
/// ranges by index and by score, ranks, pops, and the key's type.
#[tokio::test]
async fn sorted_sets_answer_as_redis() {
    let mut c = conn();
    assert_eq!(run(&mut c, "ZADD z 3 c 1 a 2 b").await, Reply::Int(3));
    assert_eq!(run(&mut c, "ZINCRBY z 2.5 a").await, dbl("3.5"));
    assert_eq!(run(&mut c, "ZSCORE z a").await, dbl("3.5"));
    assert_eq!(run(&mut c, "ZSCORE z nope").await, Reply::Nil);
    let all = |vs: &[&str]| Reply::Array(vs.iter().map(|v| bulk(v)).collect());
    assert_eq!(run(&mut c, "ZRANGE z 0 -1").await, all(&["b", "c", "a"]));
    assert_eq!(
        run(&mut c, "ZRANGE z 0 0 WITHSCORES").await,
        Reply::Pairs(vec![(bulk("b"), dbl("2"))])
    );
    assert_eq!(run(&mut c, "ZREVRANGE z 0 1").await, all(&["a", "c"]));
    assert_eq!(
        run(&mut c, "ZRANGEBYSCORE z (2 +inf").await,
        all(&["c", "a"])
    );
    assert_eq!(
        run(&mut c, "ZRANGE z +inf -inf BYSCORE REV LIMIT 1 1").await,
        all(&["c"])
    );
    assert_eq!(run(&mut c, "ZCOUNT z -inf (3.5").await, Reply::Int(2));
    assert_eq!(run(&mut c, "ZRANK z a").await, Reply::Int(2));
    assert_eq!(run(&mut c, "ZREVRANK z a").await, Reply::Int(0));
    assert_eq!(run(&mut c, "ZCARD z").await, Reply::Int(3));
    assert_eq!(run(&mut c, "ZADD z NX 9 a 9 d").await, Reply::Int(1));
    assert_eq!(run(&mut c, "ZADD z XX CH 8 a 8 e").await, Reply::Int(1));
    assert_eq!(run(&mut c, "ZADD z GT 1 a").await, Reply::Int(0));
    assert_eq!(run(&mut c, "ZADD z INCR 1 b").await, dbl("3"));
    assert_eq!(run(&mut c, "ZADD z XX INCR 1 nope").await, Reply::Nil);
    assert_eq!(
        run(&mut c, "ZPOPMIN z").await,
        Reply::Array(vec![bulk("b"), dbl("3")])
    );
    assert_eq!(
        run(&mut c, "ZPOPMAX z 2").await,
        Reply::Pairs(vec![(bulk("d"), dbl("9")), (bulk("a"), dbl("8"))])
    );
    assert_eq!(run(&mut c, "TYPE z").await, Reply::Simple("zset"));
    assert_err(
        &run(&mut c, "ZADD z nan x").await,
        "ERR",
        &["not a valid float"],
    );
    assert_err(
        &run(&mut c, "ZADD z NX XX 1 x").await,
        "ERR",
        &["not compatible"],
    );
    assert_err(&run(&mut c, "ZADD z 1 x 2").await, "ERR", &["syntax"]);
    assert_err(&run(&mut c, "ZCOUNT z x 1").await, "ERR", &["not a float"]);
    assert_err(&run(&mut c, "ZINCRBY z inf x").await, "ERR", &["2^62"]);
    assert_err(&run(&mut c, "GET z").await, "WRONGTYPE", &[]);
    run(&mut c, "SET s v").await;
    assert_err(&run(&mut c, "ZADD s 1 m").await, "WRONGTYPE", &[]);
    // Removed empty: absent, and the key takes another type.
    assert_eq!(run(&mut c, "ZREM z c x").await, Reply::Int(1));
    assert_eq!(run(&mut c, "EXISTS z").await, Reply::Int(0));
    assert_eq!(run(&mut c, "ZPOPMIN z").await, Reply::Array(vec![]));
    assert_eq!(run(&mut c, "SET z v").await, Reply::Ok);
    assert_eq!(run(&mut c, "DEL z").await, Reply::Int(1));
    assert_eq!(run(&mut c, "ZADD z inf m").await, Reply::Int(1));
    assert_eq!(run(&mut c, "ZSCORE z m").await, dbl("inf"));
    assert_eq!(run(&mut c, "DEL z").await, Reply::Int(1));
    assert_eq!(run(&mut c, "TYPE z").await, Reply::Simple("none"));
}

/// Across two DCs: concurrent ZADDs of one member keep the later, ZINCRBYs add up on top
/// of a concurrent ZADD, and a ZREM concurrent with a ZADD loses (add-wins).
#[tokio::test]
async fn sorted_sets_resolve_concurrent_writes_by_their_rules() {
    let cluster = MemoryCluster::new(options(2));
    let mut dc1 = Conn::new(shared(&cluster, 0, None), 1);
    let mut dc2 = Conn::new(shared(&cluster, 1, None), 2);
    run(&mut dc1, "ZADD z 1 m 1 n").await;
    cluster.replicate();
    run(&mut dc1, "ZINCRBY z 2 m").await;
    run(&mut dc2, "ZINCRBY z 3 m").await;
    run(&mut dc2, "ZADD z 10 n").await;
    run(&mut dc1, "ZREM z n").await;
    cluster.replicate();
    let one = run(&mut dc1, "ZRANGE z 0 -1 WITHSCORES").await;
    assert_eq!(
        run(&mut dc2, "ZRANGE z 0 -1 WITHSCORES").await,
        one,
        "converged"
    );
    let want = Reply::Pairs(vec![(bulk("m"), dbl("6")), (bulk("n"), dbl("10"))]);
    assert_eq!(one, want, "increments add up, the ZADD survives the ZREM");
    run(&mut dc1, "ZADD z 5 m").await;
    run(&mut dc2, "ZADD z 7 m").await;
    cluster.replicate();
    let a = run(&mut dc1, "ZSCORE z m").await;
    assert_eq!(run(&mut dc2, "ZSCORE z m").await, a);
    assert!(a == dbl("5") || a == dbl("7"), "one ZADD wins: {a:?}");
}
