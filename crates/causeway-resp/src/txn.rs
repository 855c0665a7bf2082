//! [`Tx`]: one Causeway transaction as the commands see it, batching requests so that a
//! standalone command costs one or two calls into the session.
//!
//! Updates are queued and sent with the next read or with the commit; the reply of an
//! update carries nothing but its op id, so its failure is reported by the call that
//! sends it. A read that is the last thing a standalone command needs carries the
//! `Commit` in the same batch ([`Tx::read_then`] with `finish`).

use crate::session::SessionHandle;
use causeway_core::{Error, Key, ObjType, ObjValue, ReadValue, Request, Response, TxnKind, Update};

/// How the transaction relates to the commands that use it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scope {
    /// One standalone command: begun and committed around it.
    Command,
    /// The commands of one `EXEC`: begun before the first, committed after the last.
    Group,
    /// An interactive transaction opened by `TX.BEGIN`: already open, left open.
    Open,
}

/// A transaction in progress on a session.
pub struct Tx<'a, H: SessionHandle> {
    handle: &'a mut H,
    scope: Scope,
    pending: Vec<Request>,
    /// The session holds this transaction open (as far as we know).
    open: bool,
    committed: bool,
}

impl<'a, H: SessionHandle> Tx<'a, H> {
    /// Starts a causal transaction for a command or a group (the `Begin` goes out with
    /// the first batch).
    pub fn begin(handle: &'a mut H, scope: Scope) -> Tx<'a, H> {
        Tx {
            handle,
            scope,
            pending: {
                let mut batch = Vec::with_capacity(BATCH_CAPACITY);
                batch.push(Request::Begin {
                    kind: TxnKind::Causal,
                    label: None,
                });
                batch
            },
            open: false,
            committed: false,
        }
    }

    /// Joins the interactive transaction already open on the session.
    pub fn join(handle: &'a mut H) -> Tx<'a, H> {
        Tx {
            handle,
            scope: Scope::Open,
            pending: Vec::new(),
            open: true,
            committed: false,
        }
    }

    /// Whether the session still holds this transaction open (as far as the answers so
    /// far tell): false once it committed, aborted or failed to begin.
    pub fn is_open(&self) -> bool {
        self.open
    }

    /// Queues an update.
    pub fn update(&mut self, key: Key, update: Update) {
        self.pending.push(Request::Update { key, update });
    }

    /// Sends the queued requests, then `Read(keys)`, then `after`, then a `Commit` if
    /// `finish` and this transaction is a standalone command's. Returns what was read.
    pub async fn read_then(
        &mut self,
        keys: Vec<(Key, ObjType)>,
        after: Vec<Request>,
        finish: bool,
    ) -> Result<Vec<ReadValue>, Error> {
        let mut batch = std::mem::take(&mut self.pending);
        batch.push(Request::Read { keys });
        batch.extend(after);
        if finish && self.scope == Scope::Command {
            batch.push(Request::Commit);
        }
        let values = self.run(batch).await?;
        Ok(values.unwrap_or_default())
    }

    /// Reads keys, each as the given type.
    pub async fn read(&mut self, keys: Vec<(Key, ObjType)>) -> Result<Vec<ReadValue>, Error> {
        self.read_then(keys, Vec::new(), false).await
    }

    /// Reads one key whatever its type: as `first`, and if the key holds another type, as
    /// that one.
    pub async fn read_any(
        &mut self,
        key: &Key,
        first: ObjType,
        finish: bool,
    ) -> Result<ObjValue, Error> {
        let keys = vec![(key.clone(), first)];
        match self.read_then(keys, Vec::new(), finish).await {
            Ok(mut values) => Ok(take_value(&mut values)),
            Err(Error::WrongType { expected, .. }) if expected != first => {
                let keys = vec![(key.clone(), expected)];
                let mut values = self.read_then(keys, Vec::new(), finish).await?;
                Ok(take_value(&mut values))
            }
            Err(e) => Err(e),
        }
    }

    /// Reads several keys whatever their types: all as `first` in one read, or one by one
    /// when some key holds another type.
    pub async fn read_many_any(
        &mut self,
        keys: &[Key],
        first: ObjType,
    ) -> Result<Vec<ObjValue>, Error> {
        let typed = keys.iter().map(|k| (k.clone(), first)).collect();
        match self.read(typed).await {
            Ok(values) => Ok(values.into_iter().map(|v| v.value).collect()),
            Err(Error::WrongType { .. }) => {
                let mut out = Vec::with_capacity(keys.len());
                for key in keys {
                    out.push(self.read_any(key, first, false).await?);
                }
                Ok(out)
            }
            Err(e) => Err(e),
        }
    }

    /// Sends whatever is queued (an interactive transaction does after every command, so
    /// a failed update is reported by the command that made it).
    pub async fn flush(&mut self) -> Result<(), Error> {
        let batch = std::mem::take(&mut self.pending);
        if !batch.is_empty() {
            self.run(batch).await?;
        }
        Ok(())
    }

    /// Ends a command's or a group's transaction: commits it (with any queued updates) if
    /// no read already did.
    pub async fn commit(&mut self) -> Result<(), Error> {
        if self.committed {
            return Ok(());
        }
        let mut batch = std::mem::take(&mut self.pending);
        batch.push(Request::Commit);
        self.run(batch).await.map(|_| ())
    }

    /// Gives up a command's or a group's transaction after an error, if it is still open.
    pub async fn abort(&mut self) {
        self.pending.clear();
        if self.open && self.scope != Scope::Open {
            let _ = self.handle.call(Request::Abort).await;
            self.open = false;
        }
    }

    /// Runs one batch; returns the values of its read, if it had one.
    async fn run(&mut self, batch: Vec<Request>) -> Result<Option<Vec<ReadValue>>, Error> {
        let shape = Shape::of(&batch);
        let sent = batch.len();
        let responses = self.handle.call_batch(batch).await;
        let answered = responses.len();
        let mut values = None;
        for (i, resp) in responses.into_iter().enumerate() {
            if let Some(v) = self.absorb(shape.kind(i), resp)? {
                values = Some(v);
            }
        }
        if answered < sent {
            return Err(Error::InvalidState(
                "the session stopped answering a batch".into(),
            ));
        }
        Ok(values)
    }

    /// Checks one answer against the request it answers and tracks the transaction.
    fn absorb(&mut self, kind: Kind, resp: Response) -> Result<Option<Vec<ReadValue>>, Error> {
        match (kind, resp) {
            (Kind::Begin, Response::Begun { .. }) => self.open = true,
            (Kind::Read, Response::Values(v)) => return Ok(Some(v)),
            (Kind::Update, Response::Updated { .. }) => {}
            (Kind::Commit, Response::Committed) => {
                self.open = false;
                self.committed = true;
            }
            (kind, Response::Error(e)) => {
                if matches!(kind, Kind::Begin | Kind::Commit) || matches!(e, Error::Aborted(_)) {
                    self.open = false;
                }
                return Err(e);
            }
            (_, Response::Aborted { reason }) => {
                self.open = false;
                return Err(Error::Aborted(reason));
            }
            (_, other) => {
                return Err(Error::InvalidState(format!(
                    "unexpected answer from the session: {other:?}"
                )))
            }
        }
        Ok(None)
    }
}

fn take_value(values: &mut Vec<ReadValue>) -> ObjValue {
    values.pop().map(|v| v.value).unwrap_or(ObjValue::Lww(None))
}

/// Requests a batch has room for before it grows: `Begin`, an update, a read, `Commit`.
const BATCH_CAPACITY: usize = 4;

/// What a batched request was, to check its answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Begin,
    Read,
    Update,
    Commit,
}

/// Where a batch has its `Begin`, its read and its `Commit` (every other request a
/// [`Tx`] sends is an update), found without allocating.
struct Shape {
    begin: Option<usize>,
    read: Option<usize>,
    commit: Option<usize>,
}

impl Shape {
    fn of(batch: &[Request]) -> Shape {
        let at = |pred: fn(&Request) -> bool| batch.iter().position(pred);
        let shape = Shape {
            begin: at(|r| matches!(r, Request::Begin { .. })),
            read: at(|r| matches!(r, Request::Read { .. })),
            commit: at(|r| matches!(r, Request::Commit)),
        };
        let special = [shape.begin, shape.read, shape.commit]
            .iter()
            .flatten()
            .count();
        let updates = batch
            .iter()
            .filter(|r| matches!(r, Request::Update { .. }))
            .count();
        assert_eq!(
            special + updates,
            batch.len(),
            "a Tx batch holds one read at most"
        );
        shape
    }

    fn kind(&self, i: usize) -> Kind {
        match Some(i) {
            at if at == self.begin => Kind::Begin,
            at if at == self.read => Kind::Read,
            at if at == self.commit => Kind::Commit,
            _ => Kind::Update,
        }
    }
}
