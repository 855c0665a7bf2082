//! The command table: every command the front end knows, with its Redis arity, flags, key
//! positions and documentation, for dispatch, arity errors and `COMMAND` (which redis-cli
//! and cluster-aware clients read at start).

use crate::reply::Reply;

/// How a command is handled.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Group {
    /// Connection management, answered by the front end (never queued by `MULTI`).
    Connection,
    /// Runs in a transaction; queued by `MULTI`.
    Data,
    /// `MULTI`, `EXEC`, `DISCARD` and Causeway's `TX.*`.
    Transaction,
    /// Causeway's `CAUSAL.*`: session calls outside transactions.
    Causal,
}

/// One command.
#[derive(Debug)]
pub struct Spec {
    /// Upper-case name.
    pub name: &'static str,
    /// Redis arity: `n` exactly n arguments (the name included), `-n` at least n.
    pub arity: i32,
    pub group: Group,
    pub flags: &'static [&'static str],
    /// First key, last key (-1: the last argument), step; zeros when there are no keys.
    pub keys: (i32, i32, i32),
    pub summary: &'static str,
}

const W: &[&str] = &["write", "denyoom"];
const WF: &[&str] = &["write", "denyoom", "fast"];
const R: &[&str] = &["readonly"];
const RF: &[&str] = &["readonly", "fast"];
const C: &[&str] = &["fast", "noscript", "loading", "stale"];

const fn spec(
    name: &'static str,
    arity: i32,
    group: Group,
    flags: &'static [&'static str],
    keys: (i32, i32, i32),
    summary: &'static str,
) -> Spec {
    Spec {
        name,
        arity,
        group,
        flags,
        keys,
        summary,
    }
}

use Group::{Causal, Connection as Conn, Data, Transaction as Txn};

/// Every command, most frequent first (lookup is a linear scan).
pub static COMMANDS: &[Spec] = &[
    spec(
        "GET",
        2,
        Data,
        RF,
        (1, 1, 1),
        "Returns the value of a register or a counter.",
    ),
    spec(
        "SET",
        -3,
        Data,
        W,
        (1, 1, 1),
        "Assigns a register (NX, XX, GET supported).",
    ),
    spec(
        "INCR",
        2,
        Data,
        WF,
        (1, 1, 1),
        "Increments a counter by one.",
    ),
    spec(
        "SADD",
        -3,
        Data,
        WF,
        (1, 1, 1),
        "Adds members to an add-wins set.",
    ),
    spec(
        "HSET",
        -4,
        Data,
        WF,
        (1, 1, 1),
        "Assigns fields of a hash; answers how many were new.",
    ),
    spec(
        "HGET",
        3,
        Data,
        RF,
        (1, 1, 1),
        "Returns the value of a hash field.",
    ),
    spec(
        "HMSET",
        -4,
        Data,
        WF,
        (1, 1, 1),
        "Assigns fields of a hash (answers OK).",
    ),
    spec(
        "HSETNX",
        4,
        Data,
        WF,
        (1, 1, 1),
        "Assigns a hash field the snapshot lacks.",
    ),
    spec(
        "HMGET",
        -3,
        Data,
        RF,
        (1, 1, 1),
        "Returns the values of hash fields.",
    ),
    spec(
        "HGETALL",
        2,
        Data,
        R,
        (1, 1, 1),
        "Returns every field and value of a hash.",
    ),
    spec(
        "HKEYS",
        2,
        Data,
        R,
        (1, 1, 1),
        "Returns the fields of a hash.",
    ),
    spec(
        "HVALS",
        2,
        Data,
        R,
        (1, 1, 1),
        "Returns the values of a hash.",
    ),
    spec(
        "HDEL",
        -3,
        Data,
        WF,
        (1, 1, 1),
        "Removes the hash fields the transaction sees.",
    ),
    spec(
        "HINCRBY",
        4,
        Data,
        WF,
        (1, 1, 1),
        "Increments a hash field (concurrent increments add up).",
    ),
    spec(
        "HLEN",
        2,
        Data,
        RF,
        (1, 1, 1),
        "Returns the number of fields of a hash.",
    ),
    spec(
        "HEXISTS",
        3,
        Data,
        RF,
        (1, 1, 1),
        "Whether a hash holds a field.",
    ),
    spec(
        "LPUSH",
        -3,
        Data,
        WF,
        (1, 1, 1),
        "Pushes values at the head of a list; answers its length.",
    ),
    spec(
        "RPUSH",
        -3,
        Data,
        WF,
        (1, 1, 1),
        "Pushes values at the tail of a list; answers its length.",
    ),
    spec(
        "LPOP",
        -2,
        Data,
        WF,
        (1, 1, 1),
        "Pops elements the transaction sees from the head of a list.",
    ),
    spec(
        "RPOP",
        -2,
        Data,
        WF,
        (1, 1, 1),
        "Pops elements the transaction sees from the tail of a list.",
    ),
    spec(
        "LRANGE",
        4,
        Data,
        R,
        (1, 1, 1),
        "Returns a range of a list's elements by index.",
    ),
    spec(
        "LLEN",
        2,
        Data,
        RF,
        (1, 1, 1),
        "Returns the number of elements of a list.",
    ),
    spec(
        "LINDEX",
        3,
        Data,
        R,
        (1, 1, 1),
        "Returns the element of a list at an index.",
    ),
    spec(
        "ZADD",
        -4,
        Data,
        WF,
        (1, 1, 1),
        "Adds members with scores to a sorted set, or updates their scores.",
    ),
    spec(
        "ZINCRBY",
        4,
        Data,
        WF,
        (1, 1, 1),
        "Increments the score of a sorted set's member; answers the new score.",
    ),
    spec(
        "ZREM",
        -3,
        Data,
        WF,
        (1, 1, 1),
        "Removes members the transaction sees from a sorted set.",
    ),
    spec(
        "ZSCORE",
        3,
        Data,
        RF,
        (1, 1, 1),
        "Returns the score of a sorted set's member.",
    ),
    spec(
        "ZMSCORE",
        -3,
        Data,
        RF,
        (1, 1, 1),
        "Returns the scores of sorted set members.",
    ),
    spec(
        "ZCARD",
        2,
        Data,
        RF,
        (1, 1, 1),
        "Returns the number of members of a sorted set.",
    ),
    spec(
        "ZCOUNT",
        4,
        Data,
        RF,
        (1, 1, 1),
        "Counts the members of a sorted set with scores within a range.",
    ),
    spec(
        "ZRANK",
        -3,
        Data,
        RF,
        (1, 1, 1),
        "Returns the index of a member in a sorted set by ascending score.",
    ),
    spec(
        "ZREVRANK",
        -3,
        Data,
        RF,
        (1, 1, 1),
        "Returns the index of a member in a sorted set by descending score.",
    ),
    spec(
        "ZRANGE",
        -4,
        Data,
        R,
        (1, 1, 1),
        "Returns members of a sorted set by index or score range.",
    ),
    spec(
        "ZREVRANGE",
        -4,
        Data,
        R,
        (1, 1, 1),
        "Returns members of a sorted set by index, highest score first.",
    ),
    spec(
        "ZRANGEBYSCORE",
        -4,
        Data,
        R,
        (1, 1, 1),
        "Returns members of a sorted set with scores within a range.",
    ),
    spec(
        "ZREVRANGEBYSCORE",
        -4,
        Data,
        R,
        (1, 1, 1),
        "Returns members within a score range, highest score first.",
    ),
    spec(
        "ZPOPMIN",
        -2,
        Data,
        WF,
        (1, 1, 1),
        "Pops the members with the lowest scores the transaction sees.",
    ),
    spec(
        "ZPOPMAX",
        -2,
        Data,
        WF,
        (1, 1, 1),
        "Pops the members with the highest scores the transaction sees.",
    ),
    spec(
        "PING",
        -1,
        Conn,
        C,
        (0, 0, 0),
        "Answers PONG, or the argument.",
    ),
    spec(
        "MGET",
        -2,
        Data,
        RF,
        (1, -1, 1),
        "Returns the values of several keys.",
    ),
    spec(
        "MSET",
        -3,
        Data,
        W,
        (1, -1, 2),
        "Assigns several registers atomically.",
    ),
    spec(
        "DEL",
        -2,
        Data,
        W,
        (1, -1, 1),
        "Deletes keys (tombstone, reset or remove-all).",
    ),
    spec(
        "EXISTS",
        -2,
        Data,
        RF,
        (1, -1, 1),
        "Counts the keys that hold a value.",
    ),
    spec(
        "TYPE",
        2,
        Data,
        RF,
        (1, 1, 1),
        "Returns the type a key holds.",
    ),
    spec("INCRBY", 3, Data, WF, (1, 1, 1), "Increments a counter."),
    spec(
        "DECR",
        2,
        Data,
        WF,
        (1, 1, 1),
        "Decrements a counter by one.",
    ),
    spec("DECRBY", 3, Data, WF, (1, 1, 1), "Decrements a counter."),
    spec(
        "SREM",
        -3,
        Data,
        WF,
        (1, 1, 1),
        "Removes the members the transaction sees.",
    ),
    spec(
        "SMEMBERS",
        2,
        Data,
        R,
        (1, 1, 1),
        "Returns the members of a set.",
    ),
    spec(
        "SISMEMBER",
        3,
        Data,
        RF,
        (1, 1, 1),
        "Whether a value is a member of a set.",
    ),
    spec(
        "SCARD",
        2,
        Data,
        RF,
        (1, 1, 1),
        "Returns the number of members of a set.",
    ),
    spec(
        "APPEND",
        3,
        Data,
        W,
        (1, 1, 1),
        "Appends to a register's value (last writer wins).",
    ),
    spec(
        "STRLEN",
        2,
        Data,
        RF,
        (1, 1, 1),
        "Returns the length of a register's value.",
    ),
    spec(
        "SETNX",
        3,
        Data,
        WF,
        (1, 1, 1),
        "Assigns a register that holds no value.",
    ),
    spec(
        "GETSET",
        3,
        Data,
        W,
        (1, 1, 1),
        "Assigns a register and returns its old value.",
    ),
    spec(
        "SPOP",
        -2,
        Data,
        WF,
        (1, 1, 1),
        "Removes and returns random members the transaction sees.",
    ),
    spec(
        "SRANDMEMBER",
        -2,
        Data,
        R,
        (1, 1, 1),
        "Returns random members of a set.",
    ),
    spec(
        "KEYS",
        2,
        Data,
        R,
        (0, 0, 0),
        "Returns the keys that match a pattern (at most 65536: use SCAN).",
    ),
    spec(
        "SCAN",
        -2,
        Data,
        R,
        (0, 0, 0),
        "Iterates over the keys [MATCH pattern] [COUNT count] [TYPE type].",
    ),
    spec(
        "DBSIZE",
        1,
        Data,
        R,
        (0, 0, 0),
        "Counts the keys (lists every key: not O(1)).",
    ),
    spec(
        "FLUSHALL",
        -1,
        Data,
        W,
        (0, 0, 0),
        "Deletes every key, in causal batches [ASYNC|SYNC].",
    ),
    spec(
        "FLUSHDB",
        -1,
        Data,
        W,
        (0, 0, 0),
        "Deletes every key of database 0, the only one (as FLUSHALL).",
    ),
    spec("ECHO", 2, Conn, C, (0, 0, 0), "Returns the argument."),
    spec(
        "MULTI",
        1,
        Txn,
        C,
        (0, 0, 0),
        "Starts queueing commands for one atomic transaction.",
    ),
    spec(
        "EXEC",
        1,
        Txn,
        C,
        (0, 0, 0),
        "Runs the queued commands as one atomic transaction.",
    ),
    spec(
        "DISCARD",
        1,
        Txn,
        C,
        (0, 0, 0),
        "Drops the queued commands.",
    ),
    spec(
        "TX.BEGIN",
        -1,
        Txn,
        C,
        (0, 0, 0),
        "Opens an interactive transaction [STRONG].",
    ),
    spec(
        "TX.COMMIT",
        1,
        Txn,
        C,
        (0, 0, 0),
        "Commits the interactive transaction.",
    ),
    spec(
        "TX.ABORT",
        1,
        Txn,
        C,
        (0, 0, 0),
        "Aborts the interactive transaction.",
    ),
    spec(
        "CAUSAL.TOKEN",
        1,
        Causal,
        C,
        (0, 0, 0),
        "Exports the session's causal past (hex).",
    ),
    spec(
        "CAUSAL.ATTACH",
        2,
        Causal,
        C,
        (0, 0, 0),
        "Adopts a causal past from a token.",
    ),
    spec(
        "CAUSAL.BARRIER",
        1,
        Causal,
        C,
        (0, 0, 0),
        "Waits until the session's past is durable.",
    ),
    spec(
        "HELLO",
        -1,
        Conn,
        C,
        (0, 0, 0),
        "Handshake: protocol version, AUTH, SETNAME.",
    ),
    spec(
        "AUTH",
        -2,
        Conn,
        C,
        (0, 0, 0),
        "Authenticates the connection.",
    ),
    spec(
        "CLIENT",
        -2,
        Conn,
        C,
        (0, 0, 0),
        "CLIENT ID, SETNAME, GETNAME, SETINFO, INFO, SESSION [ENDPOINT|CONNECTION].",
    ),
    spec(
        "SELECT",
        2,
        Conn,
        C,
        (0, 0, 0),
        "Selects database 0, the only one.",
    ),
    spec("QUIT", -1, Conn, C, (0, 0, 0), "Closes the connection."),
    spec(
        "INFO",
        -1,
        Conn,
        &["loading", "stale"],
        (0, 0, 0),
        "Server, protocol and DC facts.",
    ),
    spec(
        "COMMAND",
        -1,
        Conn,
        &["loading", "stale"],
        (0, 0, 0),
        "Describes the commands.",
    ),
    spec(
        "CONFIG",
        -2,
        Conn,
        &["loading", "stale"],
        (0, 0, 0),
        "CONFIG GET, for tools.",
    ),
    spec(
        "CLUSTER",
        -2,
        Conn,
        &["loading", "stale"],
        (0, 0, 0),
        "CLUSTER NODES, SLOTS, SHARDS, MYID, INFO, KEYSLOT: the DC as a Redis Cluster.",
    ),
];

/// The string commands whose names start with `S`, as the set commands' do.
const STRING_S: &[&str] = &["SET", "SETNX", "STRLEN"];

/// Looks a command up by name, case-insensitively.
pub fn lookup(name: &[u8]) -> Option<&'static Spec> {
    COMMANDS
        .iter()
        .find(|s| s.name.len() == name.len() && s.name.as_bytes().eq_ignore_ascii_case(name))
}

impl Spec {
    /// Whether `argc` arguments (the name included) fit the arity.
    pub fn arity_ok(&self, argc: usize) -> bool {
        let argc = argc as i64;
        let arity = i64::from(self.arity);
        if arity >= 0 {
            argc == arity
        } else {
            argc >= -arity
        }
    }

    pub fn lower_name(&self) -> String {
        self.name.to_ascii_lowercase()
    }

    /// The `COMMAND` / `COMMAND INFO` entry, in the Redis 7 layout.
    pub fn info(&self) -> Reply {
        let strs =
            |xs: &'static [&'static str]| Reply::Set(xs.iter().map(|x| Reply::Simple(x)).collect());
        Reply::Array(vec![
            Reply::text(self.lower_name()),
            Reply::Int(i64::from(self.arity)),
            strs(self.flags),
            Reply::Int(i64::from(self.keys.0)),
            Reply::Int(i64::from(self.keys.1)),
            Reply::Int(i64::from(self.keys.2)),
            Reply::Set(Vec::new()),
            Reply::Set(Vec::new()),
            Reply::Array(Vec::new()),
            Reply::Array(Vec::new()),
        ])
    }

    /// The `COMMAND DOCS` entry: name, then a map of summary, since and group.
    pub fn docs(&self) -> [Reply; 2] {
        let group = match self.group {
            Group::Data if self.name.starts_with('S') && !STRING_S.contains(&self.name) => "set",
            Group::Data if matches!(self.name, "KEYS" | "SCAN") => "generic",
            Group::Data if matches!(self.name, "DBSIZE" | "FLUSHALL" | "FLUSHDB") => "server",
            Group::Data if self.name.starts_with('H') => "hash",
            Group::Data if crate::list::is_list(self.name) => "list",
            Group::Data if crate::zset::is_zset(self.name) => "sorted_set",
            Group::Data => "string",
            Group::Transaction => "transactions",
            Group::Connection | Group::Causal => "connection",
        };
        [
            Reply::text(self.lower_name()),
            Reply::Map(vec![
                (Reply::text("summary"), Reply::text(self.summary)),
                (Reply::text("since"), Reply::text("1.0.0")),
                (Reply::text("group"), Reply::text(group)),
            ]),
        ]
    }
}
