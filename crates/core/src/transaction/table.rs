//! The transactions of one worker shard: matching, timers, and prompt removal.
//!
//! * Matching is one hash lookup: client transactions by [`ClientKey`] (§17.1.3), server
//!   transactions by [`ServerKey`] (§17.2.3). RFC 2543 INVITE transactions additionally check the
//!   To tag after the lookup (the INVITE's for retransmissions, the final response's for ACKs).
//!   The key lives once, in its entry: the indexes hold (hash, id) and compare against the
//!   entry's key, so inserting clones no key and a response is matched from its borrowed branch
//!   and method, without building one (issue 21: ~3k instructions per proxied call).
//! * Timers: one queue of `(deadline, TxId, generation)` holding at most one live entry per
//!   transaction, its earliest deadline, in the lane of that timer's duration
//!   ([`DeadlineLanes`]: a FIFO per duration is in order by itself, so pushes and pops are
//!   O(1); see [`lane`]). When a transaction's earliest deadline changes, its generation
//!   is bumped and a new entry pushed; stale entries are skipped when popped (lazy deletion), so
//!   nothing is ever searched or scanned. Every deadline lies at most max(64*T1, D, T4) ahead,
//!   which bounds how long a stale entry can linger.
//! * A transaction is removed the moment it reaches Terminated, in the call that terminated it.
//! * Memory after a peak: hash tables, the entries' slab and the timer queue keep the capacity
//!   they grew to, and a flood grows them by the hundred thousand (issue 16, item 7).
//!   [`TransactionTable::handle_timeouts`] shrinks each one that has become mostly empty
//!   ([`shrink_index`]) and frees the slab's chunks past its last occupied slot
//!   ([`Slab::release_vacant_tail`]: once the transactions in its highest slots, started during
//!   the peak, have ended), so that the memory can go back to the allocator (and from there to
//!   the kernel: mimalloc returns freed pages by itself, see src/main.rs).

use super::actions::{Actions, TxAction, TxState};
use super::any::Transaction;
use super::client_invite::ClientInvite;
use super::client_non_invite::ClientNonInvite;
use super::client_request::Sent;
use super::deadline_lanes::DeadlineLanes;
use super::grid_memo;
use super::key::{to_tag, ClientKey, MethodKey, ServerKey, ServerKeyParts};
use super::server_invite::ServerInvite;
use super::server_non_invite::ServerNonInvite;
use super::slab::Slab;
use super::timers::{Timers, LANES};
use crate::peer::Peer;
use crate::seed::{Seed, TableState};
use bytes::Bytes;
use hashbrown::HashTable;
use herald_sip::{Limits, Message, Method};
use std::cell::OnceCell;
use std::hash::{BuildHasher, Hasher};
use std::time::Instant;

/// Tables smaller than this are never shrunk: not worth the rehash.
const SHRINK_MIN_CAPACITY: usize = 1024;

/// Where a branch of [`super::BranchGen`] keeps its keyed digits: after the magic cookie
/// (`z9hG4bK`), 16 of them ([`TransactionTable::client_hash`]).
const BRANCH_DIGITS: std::ops::Range<usize> = 7..23;

/// The most timer actions whose room [`TransactionTable::recycle`] keeps for the next run.
const SPARE_MAX: usize = 64;

/// A handle on a transaction in one table: its slot in the table's [`Slab`] and a serial
/// number, so that a handle kept after its transaction ended reaches no other.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TxId(pub u64);

/// Why a transaction could not be created.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TxError {
    /// A response cannot create a transaction.
    NotARequest,
    /// An ACK never creates a transaction: for a non-2xx it belongs to the INVITE's, for a 2xx
    /// it is end to end and passed statelessly (§17.1.1.3, §13.2.2.4).
    Ack,
    /// The message lacks a header the transaction key needs (Via, CSeq, Call-ID, From ...).
    NoKey,
    /// A transaction with the same key exists: the message is a retransmission for it.
    Duplicate(TxId),
}

impl std::fmt::Display for TxError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TxError::NotARequest => f.write_str("a response cannot create a transaction"),
            TxError::Ack => f.write_str("an ACK does not create a transaction"),
            TxError::NoKey => f.write_str("the request lacks the headers of a transaction key"),
            TxError::Duplicate(id) => write!(f, "transaction {} already has this key", id.0),
        }
    }
}

impl std::error::Error for TxError {}

/// A request's server transaction key with its hash in the table that made it
/// ([`TransactionTable::server_key`]): a new request is looked up and then inserted under the
/// one hash (hashing the key twice cost ~230 instructions per proxied call, issue 21). Only
/// meaningful to that table: each table keys its hash ([`TableState`]).
#[derive(Debug)]
pub struct HashedServerKey {
    key: ServerKey,
    hash: u64,
}

#[derive(Debug)]
enum EntryKey {
    Client(ClientKey),
    Server(ServerKey),
}

/// RFC 2543 INVITE server transactions: the To tags §17.2.3 compares.
#[derive(Debug)]
struct LegacyTags {
    /// Retransmitted INVITEs carry the To tag of the original (usually none).
    invite: Option<Box<str>>,
    /// Set when the final response is sent: an ACK must carry its To tag.
    final_response: Option<Option<Box<str>>>,
}

#[derive(Debug)]
struct Entry {
    tx: Transaction,
    key: EntryKey,
    /// The hash `key` is indexed under (in `clients` or `servers`), to unlink it.
    key_hash: u64,
    peer: Peer,
    generation: u64,
    /// The deadline of this transaction's live timer queue entry.
    scheduled: Option<Instant>,
    /// `tx.held_bytes()` when last settled, counted in the table's `held_bytes`.
    held: usize,
    legacy: Option<LegacyTags>,
}

/// The transaction table of one worker shard.
#[derive(Debug)]
pub struct TransactionTable {
    timers: Timers,
    /// In place, in a slab by [`TxId`]: boxed in a map by id, each transaction was a malloc
    /// and a free, and each access a hash lookup (issue 21: ~1.35k instructions per proxied
    /// call, three quarters of it in mimalloc).
    entries: Slab<Entry>,
    /// (hash of the key, id): the keys themselves are in the entries. Hashed from what peers
    /// send (branches, Call-IDs) with a keyed hash against flooding ([`TableState`]).
    clients: HashTable<(u64, TxId)>,
    servers: HashTable<(u64, TxId)>,
    client_state: TableState,
    server_state: TableState,
    /// `(deadline, (transaction, generation))`, in the lane of the timer kind.
    deadlines: DeadlineLanes<(TxId, u64)>,
    /// The sum of the entries' `held`.
    held_bytes: usize,
    /// The buffer of the last [`Self::handle_timeouts`], given back by [`Self::recycle`]: a
    /// timer run with work allocated and freed one (issue 21: ~170 instructions per call).
    spare: Vec<(TxId, TxAction)>,
    /// The most entries held since [`Self::shrink_after_peak`] last looked, and whether it then
    /// left a hash table over [`SHRINK_MIN_CAPACITY`]: the key indexes hold no more than the
    /// entries, and a table grows past that only when it holds about half of it, so otherwise
    /// the look is skipped (issue 21: it read three capacities on every timer run).
    most: usize,
    large: bool,
}

impl TransactionTable {
    /// A table whose hash keys come from the process's randomness ([`Seed::random`]).
    pub fn new(timers: Timers) -> TransactionTable {
        Self::seeded(timers, Seed::random())
    }

    /// A table whose hash keys come from `seed` (an engine passes one derived from its own).
    pub fn seeded(timers: Timers, seed: Seed) -> TransactionTable {
        Self::with_room(timers, seed, 0)
    }

    /// [`Self::seeded`] with room for `transactions` (client and server) from the start: the
    /// tables a shard grows to under a steady load are allocated once, not rehashed and copied
    /// through every doubling on the way there (issue 21: about 0.9k instructions per proxied
    /// call over the 40 s of `scripts/instructions-vs-kamailio.sh`, whose 64 shards each grow to
    /// about 100 transactions). Nothing shrinks below it ([`SHRINK_MIN_CAPACITY`] is larger).
    pub fn with_room(timers: Timers, seed: Seed, transactions: usize) -> TransactionTable {
        let clients_or_servers = transactions / 2;
        TransactionTable {
            timers,
            entries: Slab::with_capacity(transactions),
            clients: HashTable::with_capacity(clients_or_servers),
            servers: HashTable::with_capacity(clients_or_servers),
            client_state: seed.derive("client transactions", 0).table_state(),
            server_state: seed.derive("server transactions", 0).table_state(),
            // A lane holds the deadlines of one duration; most wait in the lane of 64*T1
            // (Timers J, L, M: three of a call's four transactions).
            deadlines: DeadlineLanes::with_room(LANES, clients_or_servers),
            held_bytes: 0,
            spare: Vec::new(),
            most: 0,
            // The room given may be over SHRINK_MIN_CAPACITY: the first look is made.
            large: true,
        }
    }

    pub fn timers(&self) -> &Timers {
        &self.timers
    }

    /// Live transactions (client and server).
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Bytes of the messages all live transactions hold (kept current by every call that
    /// changes a transaction).
    pub fn held_bytes(&self) -> usize {
        self.held_bytes
    }

    /// Transactions still waiting for a final response (Calling, Trying, Proceeding). Those in
    /// Completed, Confirmed or Accepted only absorb retransmissions; a graceful shutdown need
    /// not wait for them. Walks the table: for shutdown, not for the hot path.
    pub fn unfinished(&self) -> usize {
        self.entries
            .values()
            .filter(|e| matches!(e.tx.state(), TxState::Calling | TxState::Trying | TxState::Proceeding))
            .count()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Starts a client transaction sending `request` to `peer` (its top Via carries this
    /// element's branch, e.g. from [`super::BranchGen`]). Returns the first send.
    pub fn insert_client(&mut self, now: Instant, request: Message, peer: Peer) -> Result<(TxId, Actions), TxError> {
        match request.method() {
            None => return Err(TxError::NotARequest),
            Some(Method::Ack) => return Err(TxError::Ack),
            Some(_) => {}
        }
        let key = ClientKey::from_message(&request).ok_or(TxError::NoKey)?;
        let mut out = Actions::new();
        let id = self.begin_client(now, Sent::Parsed(Box::new(request)), key, peer, &mut out)?;
        Ok((id, out))
    }

    /// [`Self::insert_client`] for a copy of a request this element just wrote (a proxy's
    /// forwarded request, RFC 3261 §16.6), handed over unparsed with its key (the branch just
    /// put in its top Via, and its method, never ACK): it is parsed only if a CANCEL, a
    /// failover or the ACK of a non-2xx final needs its headers, which spares parsing every
    /// forwarded request back (~3,700 instructions for an INVITE).
    pub fn insert_client_forwarded(
        &mut self,
        now: Instant,
        request: Bytes,
        key: ClientKey,
        peer: Peer,
    ) -> Result<(TxId, Actions), TxError> {
        let mut out = Actions::new();
        let id = self.insert_client_forwarded_into(now, request, key, peer, &mut out)?;
        Ok((id, out))
    }

    /// [`Self::insert_client_forwarded`] with the first send written into `out`, which is empty
    /// (as [`Self::on_message_into`]).
    pub fn insert_client_forwarded_into(
        &mut self,
        now: Instant,
        request: Bytes,
        key: ClientKey,
        peer: Peer,
        out: &mut Actions,
    ) -> Result<TxId, TxError> {
        if key.method == MethodKey::ACK {
            return Err(TxError::Ack);
        }
        self.begin_client(now, Sent::Forwarded { bytes: request, parsed: OnceCell::new() }, key, peer, out)
    }

    /// Starts the client transaction of `request` (an INVITE one when `key` says INVITE).
    fn begin_client(
        &mut self,
        now: Instant,
        request: Sent,
        key: ClientKey,
        peer: Peer,
        out: &mut Actions,
    ) -> Result<TxId, TxError> {
        let key_hash = self.client_hash(&key.branch);
        if let Some(id) = self.client_by(key_hash, &key.branch, key.method.as_str()) {
            return Err(TxError::Duplicate(id));
        }
        let reliable = peer.transport.is_reliable();
        let invite = key.method == MethodKey::INVITE;
        let tx = |timers: &Timers| {
            if invite {
                Transaction::ClientInvite(ClientInvite::start(now, request, reliable, timers, out))
            } else {
                Transaction::ClientNonInvite(ClientNonInvite::start(now, request, reliable, timers, out))
            }
        };
        Ok(self.add(tx, EntryKey::Client(key), key_hash, peer, None))
    }

    /// Starts a server transaction for `request`, received from `peer` (where its responses
    /// go). `send_trying`: an INVITE server transaction answers 100 (Trying) itself (§17.2.1).
    pub fn insert_server(
        &mut self,
        now: Instant,
        request: &Message,
        peer: Peer,
        send_trying: bool,
    ) -> Result<(TxId, Actions), TxError> {
        let key = self.server_key(request).ok_or(TxError::NoKey)?;
        self.insert_server_with(now, request, key, peer, send_trying)
    }

    /// The server transaction key of `request` ([`ServerKey::from_request`]) hashed for this
    /// table, for a caller that looks it up ([`Self::find_server_with`]) and then inserts it
    /// ([`Self::insert_server_with`]): building a key parses the top Via and allocates, and
    /// hashing it reads it all; once per new request is enough.
    pub fn server_key(&self, request: &Message) -> Option<HashedServerKey> {
        let key = ServerKey::from_request(request)?;
        Some(HashedServerKey { hash: key.table_hash(&self.server_state), key })
    }

    /// [`Self::insert_server`] with the request's key already built by [`Self::server_key`].
    pub fn insert_server_with(
        &mut self,
        now: Instant,
        request: &Message,
        key: HashedServerKey,
        peer: Peer,
        send_trying: bool,
    ) -> Result<(TxId, Actions), TxError> {
        let mut out = Actions::new();
        let id = self.insert_server_into(now, request, key, (peer, send_trying), &mut out)?;
        Ok((id, out))
    }

    /// [`Self::insert_server_with`] with the first send (a 100 Trying) written into `out`,
    /// which is empty (as [`Self::on_message_into`]).
    pub fn insert_server_into(
        &mut self,
        now: Instant,
        request: &Message,
        key: HashedServerKey,
        (peer, send_trying): (Peer, bool),
        out: &mut Actions,
    ) -> Result<TxId, TxError> {
        let is_invite = match request.method() {
            None => return Err(TxError::NotARequest),
            Some(Method::Ack) => return Err(TxError::Ack),
            Some(m) => m == Method::Invite,
        };
        let HashedServerKey { key, hash: key_hash } = key;
        if let Some(id) = self.server_by(key_hash, &key) {
            return Err(TxError::Duplicate(id));
        }
        let reliable = peer.transport.is_reliable();
        let legacy =
            (is_invite && !key.is_rfc3261()).then(|| LegacyTags { invite: to_tag(request), final_response: None });
        let tx = |timers: &Timers| {
            if is_invite {
                Transaction::ServerInvite(ServerInvite::start(now, request, reliable, timers, send_trying, out))
            } else {
                Transaction::ServerNonInvite(ServerNonInvite::start(reliable, timers))
            }
        };
        Ok(self.add(tx, EntryKey::Server(key), key_hash, peer, legacy))
    }

    /// Adds the transaction `tx` builds (with the table's timers) under its key; returns its id.
    #[inline(always)]
    fn add(
        &mut self,
        tx: impl FnOnce(&Timers) -> Transaction,
        key: EntryKey,
        key_hash: u64,
        peer: Peer,
        legacy: Option<LegacyTags>,
    ) -> TxId {
        self.most = self.most.max(self.entries.len() + 1);
        // The machine is built as the entry is written into its slot: built before, it was
        // copied in (a call to memcpy of its 256 bytes, issue 21).
        let timers = &self.timers;
        let (handle, e) = self.entries.insert(|| Entry {
            tx: tx(timers),
            key,
            key_hash,
            peer,
            generation: 0,
            scheduled: None,
            held: 0,
            legacy,
        });
        let id = TxId(handle);
        let index = match &e.key {
            EntryKey::Client(_) => &mut self.clients,
            EntryKey::Server(_) => &mut self.servers,
        };
        index.insert_unique(key_hash, (key_hash, id), |&(h, _)| h);
        let settled = settle_entry(e, id, &mut self.deadlines, &self.timers, &mut self.held_bytes);
        self.finish(id, settled);
        id
    }

    /// The hash a client key is indexed under: of the branch alone, the same whether it comes
    /// from an owned [`ClientKey`] or borrowed from a response. Client branches are this
    /// element's own, unique but for a CANCEL's, which shares its INVITE's (§9.1) and is told
    /// apart by the method when the entries are compared ([`Self::client_by`]); peers only look
    /// keys up with theirs. The method and the tuple's separators cost three more writes to the
    /// hasher per lookup (issue 21: five lookups per proxied call).
    ///
    /// Of a branch longer than [`BRANCH_DIGITS`]'s end, only those octets are hashed: in the
    /// branches this element writes ([`super::BranchGen`]) they are 16 hex digits of a keyed
    /// hash of a counter unique to the engine, as good a key as the whole, and 16 octets hash in
    /// the hasher's short path (a branch of ~55 took its long one: ~25 instructions more a
    /// lookup). Still a function of the branch alone, so equal branches hash alike whoever
    /// wrote them; a peer's response only looks up (a key sharing these octets with many
    /// entries would cost time, never a wrong match: entries are compared whole).
    fn client_hash(&self, branch: &str) -> u64 {
        let octets = branch.as_bytes();
        let hashed = if octets.len() > BRANCH_DIGITS.end { &octets[BRANCH_DIGITS] } else { octets };
        let mut h = self.client_state.build_hasher();
        h.write(hashed);
        h.finish()
    }

    /// The client transaction keyed by `branch` and `method` (`hash`: [`Self::client_hash`] of
    /// the branch).
    fn client_by(&self, hash: u64, branch: &str, method: &str) -> Option<TxId> {
        let same =
            |e: &Entry| matches!(&e.key, EntryKey::Client(k) if *k.branch == *branch && k.method.as_str() == method);
        let &(_, id) = self.clients.find(hash, |&(h, id)| h == hash && self.entries.get(id.0).is_some_and(&same))?;
        Some(id)
    }

    /// The server transaction keyed by `key` (hashed with `server_state`).
    fn server_by(&self, hash: u64, key: &ServerKey) -> Option<TxId> {
        let same = |e: &Entry| matches!(&e.key, EntryKey::Server(k) if k == key);
        let &(_, id) = self.servers.find(hash, |&(h, id)| h == hash && self.entries.get(id.0).is_some_and(&same))?;
        Some(id)
    }

    /// The client transaction a response belongs to (§17.1.3).
    pub fn find_client(&self, response: &Message) -> Option<TxId> {
        response.status()?;
        let (branch, method) = ClientKey::parts(response)?;
        self.client_by(self.client_hash(branch), branch, method.as_str())
    }

    /// The server transaction a request belongs to (§17.2.3): a retransmission, or an ACK for
    /// an INVITE transaction's non-2xx (or, for RFC 2543 clients, 2xx) response. `None` means a
    /// new request (or an ACK for a 2xx, which the TU handles).
    pub fn find_server(&self, request: &Message) -> Option<TxId> {
        self.find_server_with(&self.server_key(request)?, request)
    }

    /// [`Self::find_server`] for a request whose key is not needed afterwards (an ACK, which
    /// starts no transaction): an RFC 3261 key with an IP sent-by is looked up from its parts
    /// in the request (`ServerKeyParts`), without being built; any other is built.
    pub fn find_server_unkeyed(&self, request: &Message) -> Option<TxId> {
        let Some(parts) = ServerKeyParts::of_request(request) else { return self.find_server(request) };
        let hash = parts.table_hash(&self.server_state);
        let same = |e: &Entry| matches!(&e.key, EntryKey::Server(k) if k.is(&parts));
        let &(_, id) = self.servers.find(hash, |&(h, id)| h == hash && self.entries.get(id.0).is_some_and(&same))?;
        self.matched_server(id, request)
    }

    /// [`Self::find_server`] with the request's key already built by [`Self::server_key`].
    pub fn find_server_with(&self, key: &HashedServerKey, request: &Message) -> Option<TxId> {
        let id = self.server_by(key.hash, &key.key)?;
        self.matched_server(id, request)
    }

    /// Server transaction `id`, found by a request's key, if the request belongs to it: an RFC
    /// 2543 INVITE transaction also compares To tags (§17.2.3).
    fn matched_server(&self, id: TxId, request: &Message) -> Option<TxId> {
        let e = self.entries.get(id.0)?;
        let Some(legacy) = &e.legacy else {
            return Some(id);
        };
        let tag = to_tag(request);
        let ok = if request.method()? == Method::Ack {
            legacy.final_response.as_ref().is_some_and(|t| *t == tag)
        } else {
            tag == legacy.invite
        };
        ok.then_some(id)
    }

    /// The INVITE server transaction a CANCEL cancels (§9.2). The CANCEL itself gets its own
    /// non-INVITE server transaction.
    pub fn find_cancel_target(&self, cancel: &Message) -> Option<TxId> {
        let key = ServerKey::cancel_target(cancel)?;
        let id = self.server_by(key.table_hash(&self.server_state), &key)?;
        let e = self.entries.get(id.0)?;
        match &e.legacy {
            Some(legacy) => (to_tag(cancel) == legacy.invite).then_some(id),
            None => Some(id),
        }
    }

    pub fn get(&self, id: TxId) -> Option<&Transaction> {
        self.entries.get(id.0).map(|e| &e.tx)
    }

    /// Where the transaction sends (clients: the next hop; servers: where responses go).
    pub fn peer(&self, id: TxId) -> Option<Peer> {
        self.entries.get(id.0).map(|e| e.peer)
    }

    /// A message matched by `find_client` / `find_server`.
    pub fn on_message(&mut self, now: Instant, id: TxId, msg: Message) -> Actions {
        self.on_message_to(now, id, msg, &mut None)
    }

    /// [`Self::on_message`] that also writes the transaction's peer ([`Self::peer`]) to `peer`,
    /// read in the same lookup before the message may end the transaction: where the actions'
    /// send goes. A lookup for the peer first and another for the message cost about 40
    /// instructions more, five times per proxied call; the peer returned beside the actions
    /// made their return a copy through memcpy (issue 21).
    pub fn on_message_to(&mut self, now: Instant, id: TxId, msg: Message, peer: &mut Option<Peer>) -> Actions {
        let mut out = Actions::new();
        self.on_message_into(now, id, msg, peer, &mut out);
        out
    }

    /// [`Self::on_message_to`] into `out`, which is empty: the caller's `Actions` goes down to
    /// the machine, which fills it where it lies; returned by value it was copied (136 bytes,
    /// memcpy) from the machine to the table and from the table to the engine (issue 21).
    pub fn on_message_into(
        &mut self,
        now: Instant,
        id: TxId,
        msg: Message,
        peer: &mut Option<Peer>,
        out: &mut Actions,
    ) {
        let Some(e) = self.entries.get_mut(id.0) else { return };
        *peer = Some(e.peer);
        e.tx.on_message_into(now, msg, out);
        let settled = settle_entry(e, id, &mut self.deadlines, &self.timers, &mut self.held_bytes);
        self.finish(id, settled);
    }

    /// The TU's response for server transaction `id`.
    pub fn on_tu_response(&mut self, now: Instant, id: TxId, response: Bytes, status: u16) -> Actions {
        self.on_tu_response_to(now, id, response, status, &mut None)
    }

    /// [`Self::on_tu_response`] that also writes the transaction's peer to `peer`, read in the
    /// same lookup (as [`Self::on_message_to`]).
    pub fn on_tu_response_to(
        &mut self,
        now: Instant,
        id: TxId,
        response: Bytes,
        status: u16,
        peer: &mut Option<Peer>,
    ) -> Actions {
        let mut out = Actions::new();
        self.on_tu_response_into(now, id, (response, status), peer, &mut out);
        out
    }

    /// [`Self::on_tu_response_to`] into `out`, which is empty (as [`Self::on_message_into`]).
    pub fn on_tu_response_into(
        &mut self,
        now: Instant,
        id: TxId,
        (response, status): (Bytes, u16),
        peer: &mut Option<Peer>,
        out: &mut Actions,
    ) {
        let Some(e) = self.entries.get_mut(id.0) else { return };
        *peer = Some(e.peer);
        e.tx.on_tu_response_into(now, response, status, out);
        if let Some(legacy) = &mut e.legacy {
            // What a server transaction sends for the TU's response is that response.
            if let Some(sent) = out.sends().next().filter(|_| status >= 200 && legacy.final_response.is_none()) {
                // Only RFC 2543 INVITE transactions pay for this parse: their ACK is matched
                // by the To tag of the final response (§17.2.3).
                let tag = Message::parse(sent.clone(), &Limits::default()).ok().and_then(|m| to_tag(&m));
                legacy.final_response = Some(tag);
            }
        }
        let settled = settle_entry(e, id, &mut self.deadlines, &self.timers, &mut self.held_bytes);
        self.finish(id, settled);
    }

    /// The transport could not deliver this transaction's message.
    pub fn on_transport_error(&mut self, id: TxId) -> Actions {
        let Some(e) = self.entries.get_mut(id.0) else {
            return Actions::new();
        };
        let out = e.tx.on_transport_error();
        let settled = settle_entry(e, id, &mut self.deadlines, &self.timers, &mut self.held_bytes);
        self.finish(id, settled);
        out
    }

    /// Drops a transaction without telling anyone (the TU gave up on it).
    pub fn remove(&mut self, id: TxId) -> Option<Transaction> {
        let e = self.entries.take(id.0)?;
        self.unlinked(id, e.held, e.key_hash, matches!(e.key, EntryKey::Client(_)));
        Some(e.tx)
    }

    /// Removes transaction `id`, dropped where it lies in its slot, not moved out first
    /// (issue 21: a memcpy of the machine per transaction).
    fn drop_entry(&mut self, id: TxId) {
        let Some(e) = self.entries.get(id.0) else { return };
        let (held, key_hash, client) = (e.held, e.key_hash, matches!(e.key, EntryKey::Client(_)));
        self.entries.remove(id.0);
        self.unlinked(id, held, key_hash, client);
    }

    /// Unlinks transaction `id`, just removed from `entries`, from its timer queue, the held
    /// bytes and its key index.
    fn unlinked(&mut self, id: TxId, held: usize, key_hash: u64, client: bool) {
        // Only this transaction's queued entries went stale: a top of another one is as live as
        // before (every change keeps the top live), so only a top of this one needs a look.
        if self.deadlines.peek().is_some_and(|(_, (top, _))| top == id) {
            self.drop_stale_top();
        }
        self.held_bytes -= held;
        // Only unlink the key if it still points here.
        let index = if client { &mut self.clients } else { &mut self.servers };
        if let Ok(slot) = index.find_entry(key_hash, |&(_, i)| i == id) {
            slot.remove();
        }
    }

    /// Does what [`settle_entry`] left to the table: usually nothing, which its callers see
    /// inlined.
    #[inline(always)]
    fn finish(&mut self, id: TxId, settled: Settled) {
        match settled {
            Settled::Done => {}
            Settled::Terminated => self.drop_entry(id),
            Settled::TopStale => self.drop_stale_top(),
        }
    }

    /// Pops the stale entries off the front of the queue (lazy deletion leaves them in it), so that
    /// [`Self::next_timeout`] is a deadline with work: otherwise every request's retransmission
    /// timer, cancelled by its first response, would still wake the worker T1 later for
    /// nothing (each UDP request), and each state change's earlier deadline likewise.
    fn drop_stale_top(&mut self) {
        while let Some((_, (id, generation))) = self.deadlines.peek() {
            if self.entries.get(id.0).is_some_and(|e| e.generation == generation && e.scheduled.is_some()) {
                return;
            }
            self.deadlines.pop();
        }
    }

    /// The earliest instant `handle_timeouts` has work: the queue's front, never a stale entry
    /// ([`Self::drop_stale_top`] runs after every change that can leave one on top).
    pub fn next_timeout(&self) -> Option<Instant> {
        self.deadlines.peek().map(|(at, _)| at)
    }

    /// Fires every timer due at `now`, in deadline order, and returns the actions per
    /// transaction. Terminated transactions are removed. A re-armed retransmission timer counts
    /// from `now` (RFC 3261: the timer is reset when it fires), so a worker that wakes late sends
    /// one retransmission, not a burst of the ones it missed.
    /// Hand the vector back with [`Self::recycle`] once done with it, so the next run reuses it.
    pub fn handle_timeouts(&mut self, now: Instant) -> Vec<(TxId, TxAction)> {
        let mut out = std::mem::take(&mut self.spare);
        while let Some((at, (id, generation))) = self.deadlines.peek() {
            if at > now {
                break;
            }
            self.deadlines.pop();
            let Some(e) = self.entries.get_mut(id.0) else {
                continue; // the transaction is gone
            };
            if e.generation != generation {
                continue; // stale: its deadline moved
            }
            e.scheduled = None;
            // Each firing disarms its timer or re-arms it strictly after `now`, so this ends;
            // the bound is only a guard. A firing that terminates the machine is its last (the
            // usual one: Timers D, I, J, K, L and M end a transaction and are all it has left).
            let mut terminated = false;
            let mut actions = Actions::new();
            for _ in 0..=super::TimerKind::COUNT {
                match e.tx.next_deadline() {
                    Some((due, kind)) if due <= now => {
                        e.tx.on_timer_into(now, kind, &mut actions);
                        if actions.drain(|a| out.push((id, a))) {
                            terminated = true;
                            break;
                        }
                    }
                    _ => break,
                }
            }
            let settled = if terminated {
                Settled::Terminated
            } else {
                settle_entry(e, id, &mut self.deadlines, &self.timers, &mut self.held_bytes)
            };
            self.finish(id, settled);
        }
        // A pop uncovers an entry nothing has checked yet.
        self.drop_stale_top();
        self.shrink_after_peak();
        out
    }

    /// Takes back a vector [`Self::handle_timeouts`] returned, emptied, for the next run; one
    /// that grew past [`SPARE_MAX`] (a burst of timers) is freed.
    pub fn recycle(&mut self, mut fired: Vec<(TxId, TxAction)>) {
        fired.clear();
        if fired.capacity() <= SPARE_MAX {
            self.spare = fired;
        }
    }

    /// Shrinks the tables that are mostly empty after a peak. O(1) unless one shrinks; a
    /// shrink rehashes what is left (an eighth of the capacity at most) and halves the
    /// capacity at least, so its cost is paid for by the removals that emptied the table.
    fn shrink_after_peak(&mut self) {
        self.deadlines.shrink_after_peak(SHRINK_MIN_CAPACITY);
        // O(1) unless chunks are freed, and chunks hold memory at any size: not behind the
        // look for large tables below.
        self.entries.release_vacant_tail();
        // Past SHRINK_MIN_CAPACITY since the last look only by growing when full, at over
        // half of it (hashbrown grows to twice what it holds, or less).
        if !self.large && self.most <= SHRINK_MIN_CAPACITY / 4 {
            return;
        }
        self.most = self.entries.len();
        shrink_index(&mut self.clients);
        shrink_index(&mut self.servers);
        self.large = [self.entries.capacity(), self.clients.capacity(), self.servers.capacity()]
            .iter()
            .any(|&c| c > SHRINK_MIN_CAPACITY);
    }

    /// Capacities of (entries, client keys, server keys, timer queue), for tests.
    #[cfg(test)]
    fn capacities(&self) -> [usize; 4] {
        [self.entries.capacity(), self.clients.capacity(), self.servers.capacity(), self.deadlines.capacity()]
    }
}

/// What settling one entry left to its table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Settled {
    Done,
    /// The transaction terminated: remove it.
    Terminated,
    /// The queue's front is a stale entry of this transaction: pop it ([`TransactionTable::drop_stale_top`]).
    TopStale,
}

/// After every change to a transaction, in hand (its caller just looked it up or inserted it):
/// a terminated one is to be removed; otherwise its held bytes are accounted and, when its
/// earliest deadline moved, the new one is queued. The front, live before, can only
/// have gone stale if it is this transaction's previous entry, which the generation tells
/// without a lookup.
fn settle_entry(
    e: &mut Entry,
    id: TxId,
    deadlines: &mut DeadlineLanes<(TxId, u64)>,
    timers: &Timers,
    held_bytes: &mut usize,
) -> Settled {
    let Some((held, next)) = e.tx.bookkeeping() else {
        return Settled::Terminated;
    };
    *held_bytes = *held_bytes - e.held + held;
    e.held = held;
    let next = next.map(|(at, kind)| (grid_memo::scheduled_at(timers, kind.lane(), at, kind), kind));
    if next.map(|(at, _)| at) == e.scheduled {
        return Settled::Done;
    }
    e.generation += 1;
    e.scheduled = next.map(|(at, _)| at);
    if let Some((at, kind)) = next {
        deadlines.push(kind.lane(), at, (id, e.generation));
    }
    match deadlines.peek() {
        Some((_, (top, generation))) if top == id && generation != e.generation => Settled::TopStale,
        _ => Settled::Done,
    }
}

/// Shrinks a key index to twice its length when under an eighth of its capacity is used:
/// hashbrown never shrinks by itself. Twice, so that it takes a doubling of the load to grow it
/// again, and falling to an eighth again to shrink it again: no rehash back and forth. The
/// index keeps each key's hash: no rehash of the keys.
fn shrink_index(index: &mut HashTable<(u64, TxId)>) {
    if index.capacity() > SHRINK_MIN_CAPACITY && index.len() < index.capacity() / 8 {
        index.shrink_to(index.len() * 2, |&(h, _)| h);
    }
}

#[cfg(test)]
mod shrink_tests {
    use super::super::tests_support::{request, t0};
    use super::*;
    use std::time::Duration;

    /// A peak of client transactions (non-INVITE over UDP: Timer F ends them after 64*T1).
    fn peak(tt: &mut TransactionTable, now: Instant, n: usize, tag: &str) {
        let peer = Peer::udp("192.0.2.10:5060".parse().unwrap());
        for i in 0..n {
            tt.insert_client(now, request("OPTIONS", &format!("z9hG4bK{tag}{i}")), peer).unwrap();
        }
    }

    #[test]
    fn tables_shrink_once_a_peak_has_expired() {
        let mut tt = TransactionTable::new(Timers::default());
        let t = t0();
        peak(&mut tt, t, 5000, "a");
        let grown = tt.capacities();
        let [entries, clients, servers, heap] = grown;
        assert!(entries >= 5000 && clients >= 5000 && servers == 0 && heap >= 5000, "{grown:?}");
        // Most of the peak still there: nothing shrinks.
        tt.handle_timeouts(t + Duration::from_millis(1));
        assert_eq!(tt.capacities(), grown);
        // A few newer transactions survive the peak's expiry (Timer F = 32 s).
        peak(&mut tt, t + Duration::from_secs(20), 100, "b");
        tt.handle_timeouts(t + Duration::from_secs(33));
        assert_eq!(tt.len(), 100, "only the newer ones are left");
        let [entries, clients, servers, heap] = tt.capacities();
        assert!(
            [clients, servers, heap].iter().all(|&c| c <= SHRINK_MIN_CAPACITY),
            "{grown:?} -> {:?}",
            tt.capacities()
        );
        // The entries' slots are the peak's last ones: the slab keeps its room until they end.
        assert!(entries >= 5100, "{entries}");
        // The load after the peak takes the low slots, so those newer ones end the slab's use.
        peak(&mut tt, t + Duration::from_secs(40), 10, "c");
        tt.handle_timeouts(t + Duration::from_secs(53));
        assert_eq!(tt.len(), 10, "the load after the peak is left");
        let shrunk = tt.capacities();
        assert!(shrunk.iter().all(|&c| c <= SHRINK_MIN_CAPACITY), "{grown:?} -> {shrunk:?}");
        // What is left still works: matched, and expires in its turn.
        let newer = request("OPTIONS", "z9hG4bKc7");
        let response = herald_sip::Message::parse(
            super::super::tests_support::response_bytes(&newer, 200, None),
            &Limits::default(),
        )
        .unwrap();
        assert!(tt.find_client(&response).is_some());
        tt.handle_timeouts(t + Duration::from_secs(80));
        assert!(tt.is_empty());
    }

    /// The look for mostly empty tables is skipped while nothing can have grown past
    /// SHRINK_MIN_CAPACITY: a second peak after the first shrank is shrunk in its turn, and a
    /// steady small load never has its tables shrunk.
    #[test]
    fn every_peak_is_shrunk_after_it_expires() {
        let mut tt = TransactionTable::new(Timers::default());
        let mut t = t0();
        for round in 0..3 {
            peak(&mut tt, t, 3000, &format!("p{round}"));
            let grown = tt.capacities();
            assert!(grown[0] >= 3000 && grown[3] >= 3000, "{grown:?}");
            for _ in 0..40 {
                t += Duration::from_secs(1);
                tt.handle_timeouts(t);
            }
            assert!(tt.is_empty());
            let shrunk = tt.capacities();
            assert!(shrunk.iter().all(|&c| c <= SHRINK_MIN_CAPACITY), "round {round}: {grown:?} -> {shrunk:?}");
            // A small load in between: nothing to shrink, and the skipped looks miss nothing.
            peak(&mut tt, t, 10, &format!("s{round}"));
            t += Duration::from_secs(40);
            tt.handle_timeouts(t);
        }
    }

    #[test]
    fn a_recycled_timeouts_vector_is_reused_unless_a_burst_grew_it() {
        let mut tt = TransactionTable::new(Timers::default());
        let t = t0();
        peak(&mut tt, t, 3, "a");
        let fired = tt.handle_timeouts(t + Duration::from_millis(500)); // Timer E of each
        assert_eq!(fired.len(), 3);
        let (room, at) = (fired.capacity(), fired.as_ptr());
        tt.recycle(fired);
        let next = tt.handle_timeouts(t + Duration::from_millis(501));
        assert!(next.is_empty() && next.capacity() == room && next.as_ptr() == at, "the same buffer");
        tt.recycle(next);
        peak(&mut tt, t + Duration::from_secs(1), SPARE_MAX * 2, "b");
        let burst = tt.handle_timeouts(t + Duration::from_millis(1_500));
        assert!(burst.capacity() > SPARE_MAX);
        tt.recycle(burst);
        assert_eq!(tt.handle_timeouts(t + Duration::from_millis(1_501)).capacity(), 0, "freed");
    }

    #[test]
    fn small_tables_are_left_alone() {
        let mut tt = TransactionTable::new(Timers::default());
        let t = t0();
        peak(&mut tt, t, 500, "a");
        let grown = tt.capacities();
        tt.handle_timeouts(t + Duration::from_secs(33));
        assert!(tt.is_empty());
        // (hashbrown's capacity() drops a little as removals leave tombstones; a shrink would
        // have gone to 0.)
        let left = tt.capacities();
        assert!(
            left[1..].iter().zip(&grown[1..]).all(|(&l, &g)| l >= g * 3 / 4),
            "under SHRINK_MIN_CAPACITY, not worth a rehash: {grown:?} -> {left:?}"
        );
        // The slab's chunks are freed at any size (no rehash): one spare chunk is left.
        assert!(left[0] > 0 && left[0] < grown[0] / 4, "{grown:?} -> {left:?}");
    }
}
