//! [`Tx`]: one Causeway transaction as the commands see it, batching requests so that a
//! standalone command costs one or two calls into the session.
//!
//! Updates are queued and sent with the next read or with the commit; the reply of an
//! update carries nothing but its op id, so its failure is reported by the call that
//! sends it. A read that is the last thing a standalone command needs carries the
//! `Commit` in the same batch ([`Tx::read_then`] with `finish`).

use crate::session::SessionHandle;
use causeway_core::{
    Error, Key, ObjType, ObjValue, ReadValue, Request, Response, TxnKind, Update, Value,
};
use std::collections::{BTreeMap, BTreeSet};

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
    /// A batch carried the `Commit` already (committed or not, it is not sent again).
    commit_sent: bool,
    /// [`Scope::Group`] only: each key this transaction read, as it sees it now (what it
    /// read plus its own later updates), so reading it again costs no call (a causal
    /// transaction reads one snapshot plus its own writes, Cure Alg. 1 l.20-21). Holds at
    /// most the keys of one group's reads.
    seen: BTreeMap<Key, ObjValue>,
    /// Per set key, each member whose latest update in this transaction is an `Add`:
    /// adding it again would change nothing (see [`Tx::update`]). At most one entry per
    /// update. Keyed by key, then member, so a lookup borrows both.
    added: BTreeMap<Key, BTreeSet<Value>>,
    /// Per key, the type the store holds it as, where a command writes another type to it
    /// (a key freed by `DEL` takes any type: `crdt`'s parts): reads ask for that type and
    /// updates go wrapped in `Update::Part`. Empty except when a command runs again
    /// after a `WRONGTYPE` ([`Tx::set_homes`]); at most one entry per key of a command.
    homes: BTreeMap<Key, ObjType>,
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
            commit_sent: false,
            seen: BTreeMap::new(),
            added: BTreeMap::new(),
            homes: BTreeMap::new(),
        }
    }

    /// Sets the types the store holds keys as (see `homes`), before the command runs.
    pub fn set_homes(&mut self, homes: BTreeMap<Key, ObjType>) {
        self.homes = homes;
    }

    /// `update` as the store takes it: wrapped in `Update::Part` when the key is held as
    /// another type (`homes`).
    fn in_part(&self, key: &Key, update: Update) -> Update {
        match self.homes.get(key) {
            Some(&home) if home != update.obj_type() => Update::Part {
                key_type: home,
                update: Box::new(update),
            },
            _ => update,
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
            commit_sent: false,
            seen: BTreeMap::new(),
            added: BTreeMap::new(),
            homes: BTreeMap::new(),
        }
    }

    /// How this transaction relates to the commands that use it.
    pub fn scope(&self) -> Scope {
        self.scope
    }

    /// Whether the session still holds this transaction open (as far as the answers so
    /// far tell): false once it committed, aborted or failed to begin.
    pub fn is_open(&self) -> bool {
        self.open
    }

    /// Queues an update, unless it is an `Add` of a member this transaction's latest
    /// update of it already added: in the optimized OR-set a re-add replaces the tags it
    /// observes, which include the earlier add's own, so the two leave one tag, as the
    /// first alone does, and nothing outside the transaction sees between them (its
    /// updates become visible together). A pipeline of 16 SADDs of one member is one
    /// update instead of 16.
    pub fn update(&mut self, key: Key, update: Update) {
        if !self.note_update(&key, &update) {
            return;
        }
        self.see_update(&key, &update);
        let update = self.in_part(&key, update);
        self.pending.push(Request::Update { key, update });
    }

    /// Records `update` in `added`; false when it is an `Add` that changes nothing.
    fn note_update(&mut self, key: &Key, update: &Update) -> bool {
        match update {
            Update::Add(e) => {
                if self.is_added(key, e) {
                    return false;
                }
                let members = self.added.entry(key.clone()).or_default();
                members.insert(e.clone());
            }
            Update::Remove(e) => {
                if let Some(members) = self.added.get_mut(key) {
                    members.remove(e);
                }
            }
            _ => {
                self.added.remove(key);
            }
        }
        true
    }

    /// The value of `key` as this group's transaction sees it, if it read it (what
    /// [`Tx::read`] would answer without a call).
    fn seen_value(&self, key: &Key) -> Option<&ObjValue> {
        if self.scope != Scope::Group || !self.open {
            return None;
        }
        self.seen.get(key)
    }

    /// The members of set `key` as this group's transaction sees it, sorted.
    pub fn seen_set(&self, key: &Key) -> Option<&[Value]> {
        match self.seen_value(key)? {
            ObjValue::Set(members) => Some(members),
            _ => None,
        }
    }

    /// The value of counter `key` as this group's transaction sees it.
    pub fn seen_counter(&self, key: &Key) -> Option<i64> {
        match self.seen_value(key)? {
            ObjValue::Counter(n) => Some(*n),
            _ => None,
        }
    }

    /// [`Tx::update`] with an `Add` of `elem` to set `key`, cloning them only when the add
    /// is queued (a pipeline re-adding one member drops 15 of 16).
    pub fn add_member(&mut self, key: &Key, elem: &Value) {
        if !self.is_added(key, elem) {
            self.update(key.clone(), Update::Add(elem.clone()));
        }
    }

    /// Whether this transaction's latest update of `elem` in set `key` is an `Add`.
    fn is_added(&self, key: &Key, elem: &Value) -> bool {
        self.added.get(key).is_some_and(|m| m.contains(elem))
    }

    /// Applies one of our updates to what we saw of its key, or forgets the key when the
    /// update is not one whose effect on the value is plain (the next read asks).
    fn see_update(&mut self, key: &Key, update: &Update) {
        let Some(value) = self.seen.get_mut(key) else {
            return;
        };
        let plain = match (value, update) {
            (ObjValue::Lww(v), Update::Assign(new)) => {
                *v = Some(new.clone());
                true
            }
            (ObjValue::Counter(n), Update::Increment(by)) => match n.checked_add(*by) {
                Some(sum) => {
                    *n = sum;
                    true
                }
                None => false,
            },
            (ObjValue::Set(members), Update::Add(e)) => {
                if let Err(at) = members.binary_search(e) {
                    members.insert(at, e.clone());
                }
                true
            }
            (ObjValue::Set(members), Update::Remove(e)) => {
                if let Ok(at) = members.binary_search(e) {
                    members.remove(at);
                }
                true
            }
            _ => false,
        };
        if !plain {
            self.seen.remove(key);
        }
    }

    /// The values of `keys` as this group's transaction already saw them, if it saw every
    /// one of them as the type asked for.
    fn seen_values(&self, keys: &[(Key, ObjType)]) -> Option<Vec<ReadValue>> {
        if self.scope != Scope::Group || !self.open {
            return None;
        }
        let seen = |(k, t): &(Key, ObjType)| {
            let value = self.seen_value(k)?;
            (type_of(value) == *t).then(|| ReadValue {
                key: k.clone(),
                value: value.clone(),
                observed: Vec::new(),
            })
        };
        keys.iter().map(seen).collect()
    }

    /// Remembers what a group's read returned (sets only if their members are sorted, as
    /// the stores return them, so our own adds keep that order).
    fn see_values(&mut self, values: &[ReadValue]) {
        if self.scope != Scope::Group {
            return;
        }
        for v in values {
            if matches!(&v.value, ObjValue::Set(m) if !m.is_sorted()) {
                continue;
            }
            self.seen.insert(v.key.clone(), v.value.clone());
        }
    }

    /// Sends the queued requests, then `Read(keys)`, then `after`, then a `Commit` if
    /// `finish` and this transaction is a standalone command's. Returns what was read.
    /// Each value read is of the type asked for: a key that shows another type (a part,
    /// `crdt`) is refused with `WRONGTYPE` naming it, or read as empty if it shows nothing.
    pub async fn read_then(
        &mut self,
        keys: Vec<(Key, ObjType)>,
        after: Vec<Request>,
        finish: bool,
    ) -> Result<Vec<ReadValue>, Error> {
        let asked: Vec<ObjType> = keys.iter().map(|(_, t)| *t).collect();
        let keys = match self.homes.is_empty() {
            true => keys,
            false => keys
                .into_iter()
                .map(|(k, t)| match self.homes.get(&k) {
                    Some(&home) => (k, home),
                    None => (k, t),
                })
                .collect(),
        };
        let single = (keys.len() == 1 && after.is_empty()).then(|| keys[0].0.clone());
        let mut values = match self.read_then_raw(keys, after, finish).await {
            // A counter asked of a string, or a string of a counter, is the caller's to
            // handle (both are Redis strings: `INCR` of a string counts in the register,
            // deleted or not, and `GET` prints a counter).
            Err(Error::WrongType { expected, found })
                if single.is_some() && !strings(expected, found) =>
            {
                let key = single.expect("checked");
                return self.read_as_home(key, expected, found, finish).await;
            }
            other => other?,
        };
        for (read, t) in values.iter_mut().zip(asked) {
            as_type(read, t)?;
        }
        Ok(values)
    }

    /// A read of `key` as `asked` that the store refused because it holds the key as
    /// `home`: read as `home`, it is a value of `asked` if it shows that type or nothing
    /// (a key freed by `DEL`; later updates of it go as parts), else `WRONGTYPE`.
    async fn read_as_home(
        &mut self,
        key: Key,
        home: ObjType,
        asked: ObjType,
        finish: bool,
    ) -> Result<Vec<ReadValue>, Error> {
        self.continue_after_refused_read();
        let keys = vec![(key.clone(), home)];
        let mut values = self.read_then_raw(keys, Vec::new(), finish).await?;
        for read in values.iter_mut() {
            // Refused as the store refused it, in its words.
            as_type(read, asked).map_err(|_| crate::data::wrongtype(home, asked))?;
        }
        self.homes.insert(key, home);
        Ok(values)
    }

    /// The type the store holds `key` as, where known to differ from what it shows.
    pub fn home(&self, key: &Key) -> Option<ObjType> {
        self.homes.get(key).copied()
    }

    /// Whether `key` is known to be held as a type it may not show (see `homes`).
    pub fn has_home(&self, key: &Key) -> bool {
        self.homes.contains_key(key)
    }

    /// [`Tx::read_then`] answering what each key shows, whatever its type.
    async fn read_then_raw(
        &mut self,
        keys: Vec<(Key, ObjType)>,
        after: Vec<Request>,
        finish: bool,
    ) -> Result<Vec<ReadValue>, Error> {
        let after: Vec<Request> = after
            .into_iter()
            .map(|r| match r {
                Request::Update { key, update } => {
                    let update = self.in_part(&key, update);
                    Request::Update { key, update }
                }
                other => other,
            })
            .collect();
        if let Some(values) = self.seen_values(&keys) {
            for req in after {
                self.queue(req);
            }
            return Ok(values);
        }
        let mut batch = std::mem::take(&mut self.pending);
        batch.push(Request::Read { keys });
        let commits = finish && self.scope == Scope::Command;
        // The updates sent, for what this transaction reads after them; one that commits
        // in this batch (a standalone INCR) reads nothing after, and the copies of its
        // keys were two allocations per command.
        let sent_updates: Vec<(Key, Update)> = match commits {
            true => Vec::new(),
            false => after
                .iter()
                .filter_map(|r| match r {
                    Request::Update { key, update } => Some((key.clone(), update.clone())),
                    _ => None,
                })
                .collect(),
        };
        batch.extend(after);
        if commits {
            batch.push(Request::Commit);
            self.commit_sent = true;
        }
        let values = self.run(batch).await?.unwrap_or_default();
        for (key, update) in &sent_updates {
            self.note_update(key, update);
        }
        self.see_values(&values);
        if self.scope == Scope::Group {
            for (key, update) in &sent_updates {
                self.see_update(key, update);
            }
        }
        Ok(values)
    }

    /// A standalone transaction's one batch: its `Begin`, `Read(keys)`, `updates` and
    /// `Commit` (a planned pipelined group, [`crate::plan`]). Returns what was read.
    ///
    /// With set `Add`s among the updates it is two batches: the read, then the updates
    /// without the adds of members the read shows ([`without_present_adds`]), and the
    /// commit; a `SADD` writes only what its view lacks (`data::sadd`), so a group that
    /// adds nothing new commits read-only and costs no durable record.
    pub async fn read_and_commit(
        &mut self,
        keys: Vec<(Key, ObjType)>,
        updates: Vec<Request>,
    ) -> Result<Vec<ReadValue>, Error> {
        assert!(
            self.scope == Scope::Command && !self.commit_sent,
            "read_and_commit ends a command's transaction once"
        );
        let adds = updates.iter().any(|r| {
            matches!(
                r,
                Request::Update {
                    update: Update::Add(_),
                    ..
                }
            )
        });
        let mut batch = std::mem::take(&mut self.pending);
        batch.reserve(updates.len() + 2);
        batch.push(Request::Read { keys });
        if adds {
            let values = self.run(batch).await?.unwrap_or_default();
            let mut batch = without_present_adds(updates, &values);
            batch.push(Request::Commit);
            self.commit_sent = true;
            self.run(batch).await?;
            return Ok(values);
        }
        batch.extend(updates);
        batch.push(Request::Commit);
        self.commit_sent = true;
        Ok(self.run(batch).await?.unwrap_or_default())
    }

    /// Queues a request that [`Tx::read_then`] was asked to send after its read (an
    /// update: the only kind callers pass).
    fn queue(&mut self, req: Request) {
        match req {
            Request::Update { key, update } => self.update(key, update),
            other => self.pending.push(other),
        }
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
        let (home, value) = match self.read_then_raw(keys, Vec::new(), finish).await {
            Ok(mut values) => (first, take_value(&mut values)),
            Err(Error::WrongType { expected, .. }) if expected != first => {
                self.continue_after_refused_read();
                let keys = vec![(key.clone(), expected)];
                let mut values = self.read_then_raw(keys, Vec::new(), finish).await?;
                (expected, take_value(&mut values))
            }
            Err(e) => return Err(e),
        };
        // A key that shows another type than the store holds it as: its updates of that
        // type go as parts (see `homes`).
        if value_type(&value) != home {
            self.homes.insert(key.clone(), home);
        }
        Ok(value)
    }

    /// Readies `keys` for a blind assignment (`SET`, `MSET`) in this transaction: learns
    /// the type the store holds each as (see `homes`), reading each whatever it shows
    /// (this transaction's own writes included), so that the assignment of a key freed by
    /// `DEL` goes as a part of another type, as a command alone does after a `WRONGTYPE`
    /// ([`crate::conn`]'s `standalone`). `WRONGTYPE` when a key shows a value of another
    /// type than a string: the assignment would be refused.
    pub async fn ready_to_assign(&mut self, keys: &[Key]) -> Result<(), Error> {
        for key in keys {
            let shown = self.read_any(key, ObjType::Lww, false).await?;
            let home = self.home(key).unwrap_or_else(|| value_type(&shown));
            self.homes.insert(key.clone(), home);
            let t = value_type(&shown);
            if t != ObjType::Lww && crate::data::present(&shown) {
                return Err(crate::data::wrongtype(t, ObjType::Lww));
            }
        }
        Ok(())
    }

    /// Reads several keys whatever their types: all as `first` in one read, or one by one
    /// when some key holds another type.
    pub async fn read_many_any(
        &mut self,
        keys: &[Key],
        first: ObjType,
    ) -> Result<Vec<ObjValue>, Error> {
        let typed = keys.iter().map(|k| (k.clone(), first)).collect();
        match self.read_then_raw(typed, Vec::new(), false).await {
            Ok(values) => {
                // Held as `first`, each: one that shows another type has parts.
                for v in &values {
                    if value_type(&v.value) != first {
                        self.homes.insert(v.key.clone(), first);
                    }
                }
                Ok(values.into_iter().map(|v| v.value).collect())
            }
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

    /// After a read that failed and left the transaction open (a `WRONGTYPE`: the session
    /// contract), lets the command go on in it: a commit that was to follow that read was
    /// never run, so [`Tx::commit`] sends one again.
    pub fn continue_after_refused_read(&mut self) {
        if self.open {
            self.commit_sent = false;
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
    /// no read already did (or tried: its failure was the read's).
    pub async fn commit(&mut self) -> Result<(), Error> {
        if self.committed || self.commit_sent {
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
                return Err(wrong_type_of_abort(e));
            }
            (_, Response::Aborted { reason }) => {
                self.open = false;
                return Err(wrong_type_of_abort(Error::Aborted(reason)));
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

/// An abort for a `WRONGTYPE` as the `WRONGTYPE` it was. A blind write (`SET`) reads
/// nothing, so a cluster's store finds the key's type only when it prepares the update,
/// and aborts the transaction with the error's text as its reason (an in-process store
/// answers the update itself with the error). Told apart, the caller does what it does for
/// any `WRONGTYPE` (`Conn::standalone`: a key freed by `DEL` takes the write as a part of
/// another type) and the client gets Redis's `WRONGTYPE` error, not an abort.
pub(crate) fn wrong_type_of_abort(e: Error) -> Error {
    let Error::Aborted(reason) = &e else {
        return e;
    };
    let parsed = reason
        .strip_prefix("WRONGTYPE operation against a key holding a ")
        .and_then(|rest| rest.split_once(" object, not a "))
        .and_then(|(held, wanted)| Some((ObjType::parse(held)?, ObjType::parse(wanted)?)));
    match parsed {
        Some((expected, found)) => Error::WrongType { expected, found },
        None => e,
    }
}

/// The type of a value read.
pub(crate) fn type_of(value: &ObjValue) -> ObjType {
    match value {
        ObjValue::Lww(_) => ObjType::Lww,
        ObjValue::Counter(_) => ObjType::Counter,
        ObjValue::Set(_) => ObjType::Set,
        ObjValue::MvReg(_) => ObjType::MvReg,
        ObjValue::Hash(_) => ObjType::Hash,
        ObjValue::List(_) => ObjType::List,
        ObjValue::ZSet(_) => ObjType::ZSet,
    }
}

/// Whether both types are Redis strings (a register, a counter).
fn strings(a: ObjType, b: ObjType) -> bool {
    let string = |t| matches!(t, ObjType::Lww | ObjType::Counter);
    string(a) && string(b)
}

/// The type of object a value shows.
pub(crate) fn value_type(value: &ObjValue) -> ObjType {
    match value {
        ObjValue::Lww(_) => ObjType::Lww,
        ObjValue::Counter(_) => ObjType::Counter,
        ObjValue::Set(_) => ObjType::Set,
        ObjValue::MvReg(_) => ObjType::MvReg,
        ObjValue::Hash(_) => ObjType::Hash,
        ObjValue::List(_) => ObjType::List,
        ObjValue::ZSet(_) => ObjType::ZSet,
    }
}

/// Makes `read` a value of type `t`: as it is if of that type, empty if it shows nothing
/// (a key freed by `DEL` whose store type is another), else `WRONGTYPE` naming its type.
fn as_type(read: &mut ReadValue, t: ObjType) -> Result<(), Error> {
    let shown = value_type(&read.value);
    if shown == t {
        return Ok(());
    }
    if crate::data::present(&read.value) {
        return Err(crate::data::wrongtype(shown, t));
    }
    read.value = causeway_core::crdt::Object::new(t).value();
    Ok(())
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

/// `updates` without the set `Add`s of members that `values` (a read of their keys)
/// shows: those adds would write nothing a reader could see (`data::sadd`).
pub fn without_present_adds(updates: Vec<Request>, values: &[ReadValue]) -> Vec<Request> {
    // Each set read, sorted once (the stores return members sorted; checked, not assumed).
    let sets: BTreeMap<&Key, std::borrow::Cow<'_, [Value]>> = values
        .iter()
        .filter_map(|v| match &v.value {
            ObjValue::Set(members) if members.is_sorted() => Some((&v.key, members.into())),
            ObjValue::Set(members) => {
                let mut sorted = members.clone();
                sorted.sort();
                Some((&v.key, sorted.into()))
            }
            _ => None,
        })
        .collect();
    let shows = |key: &Key, elem: &Value| {
        sets.get(key)
            .is_some_and(|members| members.binary_search(elem).is_ok())
    };
    updates
        .into_iter()
        .filter(|r| match r {
            Request::Update {
                key,
                update: Update::Add(e),
            } => !shows(key, e),
            _ => true,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A cluster's abort for a `WRONGTYPE` is that `WRONGTYPE` again, and it reads as the
    /// error a store in process answers; other aborts stay aborts.
    #[test]
    fn an_abort_for_a_wrong_type_is_the_wrong_type() {
        let e = Error::WrongType {
            expected: ObjType::Set,
            found: ObjType::Lww,
        };
        assert_eq!(wrong_type_of_abort(Error::Aborted(e.to_string())), e);
        let other = Error::Aborted("snapshot too old".into());
        assert_eq!(wrong_type_of_abort(other.clone()), other);
        let unknown = Error::Aborted(
            "WRONGTYPE operation against a key holding a x object, not a lww".into(),
        );
        assert_eq!(wrong_type_of_abort(unknown.clone()), unknown);
        assert_eq!(
            wrong_type_of_abort(Error::Unavailable("down".into())),
            Error::Unavailable("down".into())
        );
    }

    fn key(k: &str) -> Key {
        Key(k.as_bytes().to_vec())
    }

    fn set(k: &str, members: &[&str]) -> ReadValue {
        ReadValue {
            key: key(k),
            value: ObjValue::Set(members.iter().map(|m| m.as_bytes().to_vec()).collect()),
            observed: Vec::new(),
        }
    }

    fn update(k: &str, update: Update) -> Request {
        Request::Update {
            key: key(k),
            update,
        }
    }

    fn add(k: &str, m: &str) -> Request {
        update(k, Update::Add(m.as_bytes().to_vec()))
    }

    /// Only adds of members their key's read shows go; other keys' adds, removes,
    /// assignments and adds to keys not read stay, in order; an unsorted read counts too.
    #[test]
    fn only_the_adds_of_members_the_read_shows_are_dropped() {
        let values = [set("s", &["a", "c"]), set("u", &["z", "y"])];
        let updates = vec![
            add("s", "a"),
            add("s", "b"),
            update("s", Update::Remove(b"c".to_vec())),
            add("t", "a"),
            add("u", "y"),
            update("k", Update::Assign(b"v".to_vec())),
            add("s", "c"),
        ];
        let kept = without_present_adds(updates, &values);
        let want = vec![
            add("s", "b"),
            update("s", Update::Remove(b"c".to_vec())),
            add("t", "a"),
            update("k", Update::Assign(b"v".to_vec())),
        ];
        assert_eq!(kept, want);
    }
}
