//! One connection's command state machine, free of sockets: it takes parsed commands
//! ([`Conn::execute`]) and answers each with a [`Reply`] (and whether to close).
//!
//! A connection owns one Causeway session, so its causal past travels with it from
//! transaction to transaction. The session is opened when the connection authenticates
//! (at once when the endpoint has no password): a client that never authenticates costs
//! the node no session id and no session state. It is in one of three modes:
//! - idle: each data command runs as its own causal transaction (begun, run, committed);
//! - `MULTI`: data commands are checked and queued, `EXEC` runs them as one atomic
//!   causal transaction (a command that fails at queue time discards the whole `EXEC`, as
//!   in Redis; a `WRONGTYPE` at run time answers that command and the rest still commit; an
//!   abort by the system answers `EXEC` with the abort);
//! - interactive (`TX.BEGIN [STRONG]` ... `TX.COMMIT`/`TX.ABORT`): data commands run inside
//!   the open transaction and answer their values at once.

use crate::admin;
use crate::commands::{self, Group, Spec};
use crate::data::{bulk_or_nil, DataCmd};
use crate::keyspace;
use crate::limits::{
    MULTI_QUEUE_MAX, PIPELINE_TXN_COMMANDS_MAX, STANDALONE_RETRIES_MAX, TOKEN_HEX_LEN_MAX,
};
use crate::plan;
use crate::reply::{Proto, Reply};
use crate::session::{SessionFactory, SessionHandle};
use crate::txn::{Scope, Tx};
use bytes::Bytes;
use causeway_core::crdt::COUNTER_OVERFLOW;
use causeway_core::{Error, Key, ObjType, ObjValue, Request, Response, Secret, TxnKind};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::AtomicUsize;
use std::sync::Arc;

/// What every connection of one endpoint shares.
pub struct Shared<F> {
    pub factory: F,
    /// `AUTH` password; connections must authenticate when set.
    pub password: Option<Secret>,
    /// Connections open now.
    pub clients: AtomicUsize,
}

/// The transaction mode of a connection.
#[derive(Debug)]
enum Mode {
    Idle,
    /// Between `MULTI` and `EXEC`: the queue, and whether a command failed to queue.
    Multi {
        queue: Vec<DataCmd>,
        dirty: bool,
    },
    /// Inside `TX.BEGIN`.
    Interactive,
}

/// How a pipelined group of standalone commands ended ([`Conn::run_pipelined`]).
enum GroupEnd {
    /// Committed: one reply per command.
    Done(Vec<Reply>),
    /// Nothing of it took effect: each command runs again alone.
    Alone,
    /// The commit failed without saying whether it took effect: every command answers it.
    Failed(Error),
}

/// The answer to one command.
#[derive(Debug, PartialEq)]
pub struct Outcome {
    pub reply: Reply,
    /// Close the connection once the reply is written (`QUIT`).
    pub close: bool,
}

impl From<Reply> for Outcome {
    fn from(reply: Reply) -> Outcome {
        Outcome {
            reply,
            close: false,
        }
    }
}

/// One client connection: its session and its protocol state.
pub struct Conn<F: SessionFactory> {
    shared: Arc<Shared<F>>,
    /// The session: `Some` exactly when the connection is authenticated.
    handle: Option<F::Handle>,
    pub(crate) id: u64,
    pub(crate) proto: Proto,
    authed: bool,
    pub(crate) name: Option<Bytes>,
    mode: Mode,
}

/// The answer to an error from the session, with a Redis-style code.
pub fn error_reply(e: &Error) -> Reply {
    match e {
        Error::WrongType { .. } => Reply::Error(e.to_string()),
        Error::Aborted(why) => {
            // Hosts often pass on an abort's own text, which already says what it is.
            let why = why.strip_prefix("transaction aborted: ").unwrap_or(why);
            Reply::Error(format!("TXABORTED transaction aborted: {why}"))
        }
        Error::Unavailable(_) => Reply::Error(format!("TRYAGAIN {e}")),
        _ => Reply::err(e.to_string()),
    }
}

/// How a group ends when the batch with its commit failed: the session could not say
/// whether the commit took effect (unavailable), so every command answers that; or it
/// was refused (an abort, a `WRONGTYPE` update, an increment that would overflow, a read
/// that failed before it), so nothing took effect and each command runs alone.
fn commit_failure(e: Error) -> GroupEnd {
    let overflow = matches!(&e, Error::InvalidState(why) if why.contains(COUNTER_OVERFLOW));
    match e {
        Error::Unavailable(_) | Error::InvalidState(_) if !overflow => GroupEnd::Failed(e),
        _ => GroupEnd::Alone,
    }
}

/// The keys of the blind writes (`SET`, `MSET`) among `cmds`, once each.
fn blind_keys(cmds: &[DataCmd]) -> Vec<Key> {
    let mut keys = BTreeSet::new();
    for cmd in cmds.iter().filter(|c| c.writes_blind()) {
        cmd.keys(|k| {
            keys.insert(k.clone());
        });
    }
    keys.into_iter().collect()
}

/// The answer to a session response that should have been `expected`.
fn unexpected(resp: Response, expected: &str) -> Reply {
    match resp {
        Response::Error(e) => error_reply(&e),
        Response::Aborted { reason } => error_reply(&Error::Aborted(reason)),
        other => Reply::err(format!("the session answered {other:?} to {expected}")),
    }
}

fn unknown_command(args: &[Bytes]) -> Reply {
    let quote = |a: &Bytes| {
        let text = String::from_utf8_lossy(&a[..a.len().min(128)]).into_owned();
        format!("'{text}'")
    };
    let rest: Vec<String> = args[1..].iter().take(8).map(quote).collect();
    Reply::err(format!(
        "unknown command {}, with args beginning with: {}",
        quote(&args[0]),
        rest.join(" ")
    ))
}

/// `ERR wrong number of arguments for 'x' command`.
pub fn arity_error(name: &str) -> Reply {
    Reply::err(format!(
        "wrong number of arguments for '{}' command",
        name.to_ascii_lowercase()
    ))
}

impl<F: SessionFactory> Conn<F> {
    /// A new connection speaking RESP2 until `HELLO 3`: with a fresh session when the
    /// endpoint has no password, else unauthenticated and without one until `AUTH`.
    pub fn new(shared: Arc<Shared<F>>, id: u64) -> Conn<F> {
        let mut conn = Conn {
            shared,
            handle: None,
            id,
            proto: Proto::Resp2,
            authed: false,
            name: None,
            mode: Mode::Idle,
        };
        if conn.shared.password.is_none() {
            conn.authenticated();
        }
        conn
    }

    /// Whether the connection has authenticated (always, without a password).
    pub fn is_authed(&self) -> bool {
        self.authed
    }

    /// Marks the connection authenticated and opens its session (once).
    pub(crate) fn authenticated(&mut self) {
        if self.handle.is_none() {
            self.handle = Some(self.shared.factory.open());
        }
        self.authed = true;
    }

    /// The connection's session; only commands of an authenticated connection reach it.
    fn session(&mut self) -> &mut F::Handle {
        assert!(self.authed, "a session is used only after authentication");
        self.handle
            .as_mut()
            .expect("an authenticated connection has a session")
    }

    /// The protocol the connection's replies are encoded in.
    pub fn proto(&self) -> Proto {
        self.proto
    }

    pub(crate) fn shared(&self) -> &Shared<F> {
        &self.shared
    }

    /// The session of an authenticated connection (the commands that ask for it run only
    /// after authentication).
    pub(crate) fn handle(&self) -> &F::Handle {
        assert!(self.authed, "a session is used only after authentication");
        self.handle
            .as_ref()
            .expect("an authenticated connection has a session")
    }

    pub(crate) fn handle_mut(&mut self) -> &mut F::Handle {
        self.session()
    }

    /// Answers one command (`args[0]` is its name; at least one argument).
    pub async fn execute(&mut self, args: Vec<Bytes>) -> Outcome {
        assert!(!args.is_empty(), "the parser yields no empty command");
        let Some(spec) = commands::lookup(&args[0]) else {
            return self.refuse(unknown_command(&args)).into();
        };
        if !spec.arity_ok(args.len()) {
            return self.refuse(arity_error(spec.name)).into();
        }
        if !self.authed && !matches!(spec.name, "AUTH" | "HELLO" | "QUIT") {
            return self
                .refuse(Reply::Error("NOAUTH Authentication required.".into()))
                .into();
        }
        if keyspace::is_keyspace(spec.name) {
            return self.keyspace(spec, &args).await.into();
        }
        match spec.group {
            Group::Connection if matches!(spec.name, "PING" | "ECHO") => {
                self.data(spec, &args).await.into()
            }
            Group::Connection => admin::connection(self, spec, &args).await,
            Group::Data => self.data(spec, &args).await.into(),
            Group::Transaction => self.transaction(spec, &args).await.into(),
            Group::Causal => self.causal(spec, &args).await.into(),
        }
    }

    /// An error before the command ran: inside `MULTI` it discards the coming `EXEC`.
    fn refuse(&mut self, reply: Reply) -> Reply {
        assert!(reply.is_error());
        if let Mode::Multi { dirty, .. } = &mut self.mode {
            *dirty = true;
        }
        reply
    }

    /// `KEYS`, `SCAN`, `DBSIZE`, `FLUSHALL`, `FLUSHDB` (`keyspace`): outside transactions
    /// only, since they list the nodes' stores, not a snapshot.
    async fn keyspace(&mut self, spec: &Spec, args: &[Bytes]) -> Reply {
        if !matches!(self.mode, Mode::Idle) {
            let e = format!(
                "{} is not allowed in a transaction (MULTI, TX.BEGIN)",
                spec.name
            );
            return self.refuse(Reply::err(e));
        }
        keyspace::run(self.session(), spec.name, args).await
    }

    /// A data command (or `PING`/`ECHO`), in whatever mode the connection is.
    async fn data(&mut self, spec: &Spec, args: &[Bytes]) -> Reply {
        let cmd = match DataCmd::parse(spec.name, args) {
            Ok(cmd) => cmd,
            Err(reply) => return self.refuse(reply),
        };
        if let Mode::Multi { queue, .. } = &mut self.mode {
            if queue.len() < MULTI_QUEUE_MAX {
                queue.push(cmd);
                return Reply::Simple("QUEUED");
            }
            let e = Error::LimitExceeded {
                what: "commands queued by MULTI".into(),
                max: MULTI_QUEUE_MAX as u64,
            };
            return self.refuse(error_reply(&e));
        }
        if let Some(reply) = cmd.local_reply() {
            return reply;
        }
        if matches!(self.mode, Mode::Interactive) {
            self.in_open_txn(cmd).await
        } else {
            self.standalone(cmd).await
        }
    }

    /// Runs a command as its own transaction. An abort (e.g. "snapshot too old" after a
    /// long idle) left nothing behind, so the command runs again on a fresh snapshot, up
    /// to [`STANDALONE_RETRIES_MAX`] times; any other error is answered as it is. Either
    /// way the session ends idle: a failed attempt is aborted if still open.
    ///
    /// A `WRONGTYPE` of a blind write (`SET`, `MSET`) runs it once more, knowing the type
    /// the store holds each of its keys as ([`Conn::homes`]): a key freed by `DEL` takes a
    /// write of any type, as a part of another type (`crdt`). Commands that read learn
    /// that in their transaction ([`Tx::read_then`]).
    async fn standalone(&mut self, cmd: DataCmd) -> Reply {
        let mut attempt = 0;
        let mut homes: Option<BTreeMap<Key, ObjType>> = None;
        loop {
            let mut tx = Tx::begin(self.session(), Scope::Command);
            if let Some(h) = &homes {
                tx.set_homes(h.clone());
            }
            let result = match cmd.run_borrowed(&mut tx).await {
                Ok(reply) => tx.commit().await.map(|()| reply),
                Err(e) => Err(e),
            };
            let e = match result {
                Ok(reply) => return reply,
                Err(e) => e,
            };
            tx.abort().await;
            if matches!(e, Error::WrongType { .. }) && homes.is_none() && cmd.writes_blind() {
                homes = Some(self.homes(&cmd).await);
                continue;
            }
            attempt += 1;
            if !matches!(e, Error::Aborted(_)) || attempt > STANDALONE_RETRIES_MAX {
                return error_reply(&e);
            }
        }
    }

    /// The type the store holds each key of `cmd` as (the type of its first write), in a
    /// read-only transaction of its own ([`Tx::read_any`] learns it).
    async fn homes(&mut self, cmd: &DataCmd) -> BTreeMap<Key, ObjType> {
        let mut keys = Vec::new();
        cmd.keys(|k| keys.push(k.clone()));
        let mut tx = Tx::begin(self.session(), Scope::Command);
        let mut homes = BTreeMap::new();
        for key in keys {
            let home = match tx.read_any(&key, ObjType::Lww, false).await {
                Ok(shown) => tx
                    .home(&key)
                    .unwrap_or_else(|| crate::txn::value_type(&shown)),
                Err(_) => ObjType::Lww,
            };
            homes.insert(key, home);
        }
        if tx.commit().await.is_err() {
            tx.abort().await;
        }
        homes
    }

    /// The command as one that may share a transaction with its pipelined neighbours
    /// ([`Conn::run_pipelined`]): a data command that needs the store, well formed, on an
    /// authenticated idle connection. `None`: run it alone with [`Conn::execute`], which
    /// answers whatever is wrong with it.
    pub fn pipelinable(&self, args: &[Bytes]) -> Option<DataCmd> {
        if !self.authed || !matches!(self.mode, Mode::Idle) {
            return None;
        }
        let spec = commands::lookup(args.first()?)?;
        if spec.group != Group::Data || !spec.arity_ok(args.len()) {
            return None;
        }
        let cmd = DataCmd::parse(spec.name, args).ok()?;
        cmd.local_reply().is_none().then_some(cmd)
    }

    /// One pipelinable command that arrived alone (no later one buffered): what
    /// [`Conn::run_pipelined`] answers for a group of one, without the group's vectors.
    pub async fn run_one(&mut self, cmd: DataCmd) -> Reply {
        assert!(
            matches!(self.mode, Mode::Idle),
            "pipelined outside idle mode"
        );
        self.standalone(cmd).await
    }

    /// Runs standalone commands that arrived together in one pipeline as one causal
    /// transaction, one reply each (our decision, not Redis's: a pipeline's effects become
    /// visible together, which is stronger than one transaction per command and allowed by
    /// it; every command still reads what the earlier ones wrote, Cure Alg. 1 l.20-21).
    /// Only an outcome every command would have had alone is answered from the group:
    /// on an abort or any error before the commit (a `WRONGTYPE` included, so a failed
    /// command leaves nothing behind) nothing took effect and each command runs again
    /// alone ([`Conn::standalone`]), and so it does when the commit is refused; a commit
    /// that failed without saying whether it took effect (unavailable) is answered to
    /// every command, as one alone would answer it.
    pub async fn run_pipelined(&mut self, cmds: Vec<DataCmd>) -> Vec<Reply> {
        assert!(
            matches!(self.mode, Mode::Idle),
            "pipelined outside idle mode"
        );
        assert!(
            cmds.len() <= PIPELINE_TXN_COMMANDS_MAX,
            "pipeline run too long"
        );
        if cmds.len() == 1 {
            let cmd = cmds.into_iter().next().expect("one command");
            return vec![self.run_one(cmd).await];
        }
        let end = if cmds.iter().all(|c| matches!(c, DataCmd::Get(_))) {
            self.gets_together(&cmds).await
        } else if let Some(plan) = plan::plan(&cmds) {
            self.planned_together(&cmds, plan).await
        } else {
            self.group_together(&cmds).await
        };
        match end {
            GroupEnd::Done(replies) => replies,
            GroupEnd::Alone => {
                let mut replies = Vec::with_capacity(cmds.len());
                for cmd in cmds {
                    replies.push(self.standalone(cmd).await);
                }
                replies
            }
            GroupEnd::Failed(e) => vec![error_reply(&e); cmds.len()],
        }
    }

    /// Pipelined `GET`s: one read of every key, with the commit in the same batch. They
    /// change nothing, so on any error (or a key that is not a string) they run alone.
    /// A key asked for again in the group is read once (the snapshot is one): a pipeline
    /// of 16 GETs of a hot key on another node shipped and served it 16 times.
    async fn gets_together(&mut self, cmds: &[DataCmd]) -> GroupEnd {
        let mut at: BTreeMap<&Key, usize> = BTreeMap::new();
        let mut keys = Vec::with_capacity(cmds.len());
        let mut index = Vec::with_capacity(cmds.len());
        for cmd in cmds {
            let DataCmd::Get(k) = cmd else {
                return GroupEnd::Alone;
            };
            let i = *at.entry(k).or_insert_with(|| {
                keys.push((k.clone(), ObjType::Lww));
                keys.len() - 1
            });
            index.push(i);
        }
        let mut tx = Tx::begin(self.session(), Scope::Command);
        let values = match tx.read_then(keys, Vec::new(), true).await {
            Ok(values) => values,
            Err(_) => {
                tx.abort().await;
                return GroupEnd::Alone;
            }
        };
        let replies: Option<Vec<Reply>> = values
            .into_iter()
            .map(|v| match v.value {
                ObjValue::Lww(v) => Some(bulk_or_nil(v)),
                ObjValue::Counter(n) => Some(Reply::text(n.to_string())),
                ObjValue::Set(_)
                | ObjValue::MvReg(_)
                | ObjValue::Hash(_)
                | ObjValue::List(_)
                | ObjValue::ZSet(_) => None,
            })
            .collect();
        match replies {
            Some(replies) if replies.len() == at.len() => {
                GroupEnd::Done(index.iter().map(|&i| replies[i].clone()).collect())
            }
            _ => GroupEnd::Alone,
        }
    }

    /// A group whose writes do not depend on its reads: its read, writes and commit in
    /// one batch, the replies worked out from what it read ([`crate::plan`]).
    async fn planned_together(&mut self, cmds: &[DataCmd], plan: plan::Plan) -> GroupEnd {
        let mut tx = Tx::begin(self.session(), Scope::Command);
        match tx.read_and_commit(plan.keys, plan.updates).await {
            Ok(values) => GroupEnd::Done(plan::replies(cmds, values)),
            Err(e) => {
                tx.abort().await;
                commit_failure(e)
            }
        }
    }

    /// Pipelined commands of any kind in one transaction, committed after the last.
    async fn group_together(&mut self, cmds: &[DataCmd]) -> GroupEnd {
        let mut tx = Tx::begin(self.session(), Scope::Group);
        let mut replies = Vec::with_capacity(cmds.len());
        for cmd in cmds {
            match cmd.run_borrowed(&mut tx).await {
                Ok(reply) => replies.push(reply),
                Err(_) => {
                    // Before the commit: nothing took effect.
                    tx.abort().await;
                    return GroupEnd::Alone;
                }
            }
        }
        match tx.commit().await {
            Ok(()) => GroupEnd::Done(replies),
            Err(e) => {
                tx.abort().await;
                commit_failure(e)
            }
        }
    }

    /// Runs a command inside the interactive transaction; leaves interactive mode if the
    /// session ended the transaction.
    ///
    /// A blind write (`SET`, `MSET`) does not read its keys here: reading them would put
    /// them in a strong transaction's read set. So a key freed by `DEL` does not take one
    /// of another type in an open transaction: the session refuses it at the next read of
    /// the key or the commit (`WRONGTYPE`), unlike in `MULTI` or a pipeline.
    async fn in_open_txn(&mut self, cmd: DataCmd) -> Reply {
        let mut tx = Tx::join(self.session());
        let result = match cmd.run(&mut tx).await {
            Ok(reply) => tx.flush().await.map(|()| reply),
            Err(e) => Err(e),
        };
        let open = tx.is_open();
        if !open {
            self.mode = Mode::Idle;
        }
        match result {
            Ok(reply) => reply,
            Err(e) => error_reply(&e),
        }
    }

    /// `MULTI`, `EXEC`, `DISCARD`, `TX.BEGIN`, `TX.COMMIT`, `TX.ABORT`.
    async fn transaction(&mut self, spec: &Spec, args: &[Bytes]) -> Reply {
        let in_multi = matches!(self.mode, Mode::Multi { .. });
        let interactive = matches!(self.mode, Mode::Interactive);
        match spec.name {
            "MULTI" if in_multi => Reply::err("MULTI calls can not be nested"),
            "MULTI" if interactive => Reply::err("MULTI is not allowed inside TX.BEGIN"),
            "MULTI" => {
                self.mode = Mode::Multi {
                    queue: Vec::new(),
                    dirty: false,
                };
                Reply::Ok
            }
            "EXEC" if !in_multi => Reply::err("EXEC without MULTI"),
            "EXEC" => self.exec().await,
            "DISCARD" if !in_multi => Reply::err("DISCARD without MULTI"),
            "DISCARD" => {
                self.mode = Mode::Idle;
                Reply::Ok
            }
            _ if in_multi => self.refuse(Reply::err(format!(
                "{} is not allowed inside MULTI",
                spec.name
            ))),
            "TX.BEGIN" => self.tx_begin(args).await,
            _ if !interactive => Reply::err(format!("{} without TX.BEGIN", spec.name)),
            "TX.COMMIT" => self.tx_end(Request::Commit).await,
            _ => self.tx_end(Request::Abort).await,
        }
    }

    /// `EXEC`: the queued commands as one transaction, their replies in an array.
    async fn exec(&mut self) -> Reply {
        let Mode::Multi { queue, dirty } = std::mem::replace(&mut self.mode, Mode::Idle) else {
            return Reply::err("EXEC without MULTI");
        };
        if dirty {
            return Reply::Error(
                "EXECABORT Transaction discarded because of previous errors.".into(),
            );
        }
        let local: Option<Vec<Reply>> = queue.iter().map(DataCmd::local_reply).collect();
        if let Some(replies) = local {
            return Reply::Array(replies);
        }
        if let Some(plan) = plan::plan(&queue) {
            if let Some(reply) = self.exec_planned(&queue, plan).await {
                return reply;
            }
        }
        let mut tx = Tx::begin(self.session(), Scope::Group);
        let mut replies = Vec::with_capacity(queue.len());
        for cmd in queue {
            // A blind write reads what its keys hold first, as a command alone does after
            // a `WRONGTYPE` (`standalone`): a key freed by `DEL` takes a write of another
            // type, and one that holds another type is refused in its place. Only here,
            // where the planned batch was refused or there is none.
            if cmd.writes_blind() {
                match tx
                    .ready_to_assign(&blind_keys(std::slice::from_ref(&cmd)))
                    .await
                {
                    Ok(()) => {}
                    Err(e @ Error::WrongType { .. }) if tx.is_open() => {
                        replies.push(error_reply(&e));
                        continue;
                    }
                    Err(e) => {
                        tx.abort().await;
                        return error_reply(&e);
                    }
                }
            }
            match cmd.run(&mut tx).await {
                Ok(reply) => replies.push(reply),
                Err(e @ Error::WrongType { .. }) if tx.is_open() => replies.push(error_reply(&e)),
                Err(e) => {
                    tx.abort().await;
                    return error_reply(&e);
                }
            }
        }
        match tx.commit().await {
            Ok(()) => Reply::Array(replies),
            Err(e) => {
                tx.abort().await;
                error_reply(&e)
            }
        }
    }

    /// `EXEC` of commands whose writes need no read, in one batch ([`crate::plan`]).
    /// `None` when the store refused it (a `WRONGTYPE` update or read, an increment that
    /// would overflow): nothing took effect, and `EXEC` runs the commands one by one in
    /// one transaction, answering each one's error in its place.
    async fn exec_planned(&mut self, queue: &[DataCmd], plan: plan::Plan) -> Option<Reply> {
        let mut tx = Tx::begin(self.session(), Scope::Command);
        match tx.read_and_commit(plan.keys, plan.updates).await {
            Ok(values) => Some(Reply::Array(plan::replies(queue, values))),
            Err(e) => {
                tx.abort().await;
                match (&e, commit_failure(e.clone())) {
                    // Answered as `EXEC` answers an abort: not run again.
                    (Error::Aborted(_), _) => Some(error_reply(&e)),
                    (_, GroupEnd::Failed(e)) => Some(error_reply(&e)),
                    _ => None,
                }
            }
        }
    }

    /// `TX.BEGIN [STRONG|CAUSAL]`.
    async fn tx_begin(&mut self, args: &[Bytes]) -> Reply {
        if matches!(self.mode, Mode::Interactive) {
            return Reply::err("TX.BEGIN inside a transaction: TX.COMMIT or TX.ABORT it first");
        }
        if args.len() > 2 {
            return arity_error("TX.BEGIN");
        }
        let kind = match args.get(1).map(|a| a.to_ascii_uppercase()).as_deref() {
            None | Some(b"CAUSAL") => TxnKind::Causal,
            Some(b"STRONG") => TxnKind::Strong,
            Some(_) => return Reply::err("syntax error: TX.BEGIN [STRONG|CAUSAL]"),
        };
        match self
            .session()
            .call(Request::Begin { kind, label: None })
            .await
        {
            Response::Begun { .. } => {
                self.mode = Mode::Interactive;
                Reply::Ok
            }
            other => unexpected(other, "Begin"),
        }
    }

    /// `TX.COMMIT` or `TX.ABORT`: either way the transaction is over.
    async fn tx_end(&mut self, req: Request) -> Reply {
        assert!(matches!(self.mode, Mode::Interactive));
        let commit = matches!(req, Request::Commit);
        let resp = self.session().call(req).await;
        self.mode = Mode::Idle;
        match resp {
            Response::Committed if commit => Reply::Ok,
            Response::Aborted { .. } if !commit => Reply::Ok,
            other => unexpected(other, if commit { "Commit" } else { "Abort" }),
        }
    }

    /// `CAUSAL.TOKEN`, `CAUSAL.ATTACH token`, `CAUSAL.BARRIER`.
    async fn causal(&mut self, spec: &Spec, args: &[Bytes]) -> Reply {
        if matches!(self.mode, Mode::Multi { .. }) {
            return self.refuse(Reply::err(format!(
                "{} is not allowed inside MULTI",
                spec.name
            )));
        }
        let req = match spec.name {
            "CAUSAL.TOKEN" => Request::Token,
            "CAUSAL.BARRIER" => Request::Barrier,
            _ => match hex_decode(&args[1]) {
                Some(token) => Request::Attach { token },
                None => {
                    return error_reply(&Error::BadToken("not an even-length hex string".into()))
                }
            },
        };
        match self.session().call(req).await {
            Response::Token(token) => Reply::text(hex_encode(&token)),
            Response::Attached | Response::BarrierDone => Reply::Ok,
            other => unexpected(other, spec.name),
        }
    }
}

/// Lower-case hex of `bytes`.
pub fn hex_encode(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(2 * bytes.len());
    for b in bytes {
        out.push(DIGITS[usize::from(b >> 4)] as char);
        out.push(DIGITS[usize::from(b & 15)] as char);
    }
    out
}

/// Decodes hex (either case); `None` if it is not hex, odd or too long.
pub fn hex_decode(text: &[u8]) -> Option<Vec<u8>> {
    if text.len() % 2 == 1 || text.len() > TOKEN_HEX_LEN_MAX {
        return None;
    }
    let digit = |c: u8| (c as char).to_digit(16).map(|d| d as u8);
    text.chunks_exact(2)
        .map(|pair| Some(digit(pair[0])? << 4 | digit(pair[1])?))
        .collect()
}
