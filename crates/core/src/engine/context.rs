//! The response context of one proxied request (RFC 3261 §16.2): its branches and the final
//! responses collected so far.

use super::contact_facts::ContactFacts;
use super::timer_c::BranchTimerC;
use crate::gateways::GatewayLeg;
use crate::peer::Peer;
use crate::proxy::route::RouteRemovals;
use crate::transaction::TxId;
use herald_sip::Message;
use smallvec::SmallVec;

/// One target the request will be (or was) forwarded to.
#[derive(Debug, Clone)]
pub struct Planned {
    /// The new Request-URI (a registered contact), or `None` to keep it.
    pub request_uri: Option<String>,
    /// Where it goes: a known peer (a registration's source) or a URI to route by.
    pub dest: PlannedDest,
    /// Route values to push on top (the registration's Path, RFC 3327 §5.3).
    pub push_routes: Vec<String>,
    /// The q-value group, for sequential forking.
    pub q: u16,
    /// §16.6 step 6: the next hop is a strict router (its Route lacks `lr`): its Route value is
    /// removed, it becomes the Request-URI, and the old Request-URI is appended as the last
    /// Route (this field holds that value).
    pub strict_route_tail: Option<String>,
    /// What to try next, in order, if `dest` fails at the transport level: the contact URI of
    /// a binding whose registration connection is gone, or another flow of the same Outbound
    /// instance (RFC 5626 §5.3).
    pub fallback: Vec<Planned>,
    /// `dest` is a flow (a connection a UA opened, or the address its requests came from), the
    /// only way to reach the target: when it fails and no fallback is left, the branch counts
    /// as this status instead of 503 (see `Engine::retry_or_fail`).
    pub lost_flow: Option<u16>,
    /// This target is an attempt at a gateway set's destination (`Engine::plan_gateway_set`):
    /// attempts are tried one at a time, fail over on the set's statuses and feed its health.
    pub gateway: Option<GatewayLeg>,
    /// What `request_uri` says when it is a registered contact (read once for the location
    /// service's plan, `contact_facts`), so that sending the branch need not read it again.
    pub contact: Option<ContactFacts>,
}

impl Planned {
    /// What a finished branch keeps of its plan: nothing (no allocation).
    pub(super) fn spent() -> Planned {
        Planned {
            request_uri: None,
            dest: PlannedDest::Uri(String::new()),
            push_routes: Vec::new(),
            q: 0,
            strict_route_tail: None,
            fallback: Vec::new(),
            lost_flow: None,
            gateway: None,
            contact: None,
        }
    }
}

#[derive(Debug, Clone)]
pub enum PlannedDest {
    Peer(Peer),
    /// Route by this URI (first Route value or the Request-URI).
    Uri(String),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BranchState {
    /// Waiting for a DNS answer (token).
    Resolving(u64),
    /// Client transaction started, nothing heard yet.
    Trying,
    /// A provisional response arrived.
    Proceeding,
    /// A final response arrived, or the branch failed.
    Done(u16),
}

#[derive(Debug)]
pub struct Branch {
    pub planned: Planned,
    /// Its client transaction, which holds the forwarded request until a final response (for
    /// CANCEL construction).
    pub client: Option<TxId>,
    pub state: BranchState,
    /// Timer C deadline (INVITE only), set and cleared through the engine's `TimerC`.
    pub timer_c: BranchTimerC,
    /// A CANCEL is owed once a provisional arrives (RFC 3261 §9.1).
    pub cancel_when_provisional: bool,
    /// A CANCEL was sent: if no final response comes within 64*T1, the branch is given up
    /// (§9.1) on its next Timer C.
    pub cancelled: bool,
    /// A gateway attempt given up by its per-attempt timeout before it heard anything: it
    /// counts as 408 and is no longer pending, its transaction lives on (`failover`).
    pub abandoned: bool,
    /// Its responses may come from a UA behind NAT whose Contact herald fixes
    /// (`Engine::responder_natted`, decided when the branch was sent).
    pub responder_natted: bool,
}

impl Branch {
    pub fn new(planned: Planned) -> Branch {
        Branch {
            planned,
            client: None,
            state: BranchState::Trying,
            timer_c: BranchTimerC::default(),
            cancel_when_provisional: false,
            cancelled: false,
            abandoned: false,
            responder_natted: false,
        }
    }

    pub fn is_pending(&self) -> bool {
        !matches!(self.state, BranchState::Done(_)) && !self.abandoned
    }
}

/// A stored final response, or a failure synthesised locally (timeout, transport error).
#[derive(Debug)]
pub struct FinalResponse {
    pub status: u16,
    pub msg: Option<Message>,
}

#[derive(Debug)]
pub struct Context {
    /// The request as received; `None` once the context is compacted.
    pub request: Option<Message>,
    pub source: Peer,
    pub local: std::net::SocketAddr,
    pub is_invite: bool,
    /// RFC 3261 §16.6 step 8 loop-detection hash, the suffix of every branch this request gets.
    pub loop_hash: u64,
    /// The Route values §16.4 removes from every branch's copy (found once, when planned).
    pub route_removals: RouteRemovals,
    /// Inline for the one branch most requests have: a vector of them was an allocation and
    /// a free per proxied request (issue 21: two per call, ~250 instructions).
    pub branches: SmallVec<[Branch; 1]>,
    /// Targets not started yet (sequential forking, gateway attempts), in plan order. A `Vec`:
    /// nearly every context has none, and an empty `VecDeque` cost ~40 instructions to clear
    /// or drop (its two slices worked out) where an empty `Vec` costs a test (issue 21); the
    /// rare group taken from the front shifts a few plans.
    pub waiting: Vec<Planned>,
    pub finals: Vec<FinalResponse>,
    /// A final response went upstream (the best one, or a 2xx).
    pub answered: bool,
    /// A 2xx or 6xx arrived, or the request was cancelled: start no more branches.
    pub stop_forking: bool,
}

impl Context {
    pub fn pending(&self) -> usize {
        self.branches.iter().filter(|b| b.is_pending()).count()
    }

    /// Once a final response went upstream and no branch is pending, a context only relays
    /// 2xx retransmissions and forked 2xx (RFC 6026 §7.1) and the ACKs its server transaction
    /// passes up, until that transaction ends - 64*T1 later for an INVITE (Timer L). Nothing
    /// left needs the request, the collected responses or the plans, so they are freed now
    /// rather than kept for 32 s: at thousands of calls per second that is most of the memory.
    /// Returns the bytes it freed (what [`Context::held_bytes`] counted).
    pub fn compact(&mut self) -> usize {
        debug_assert!(self.answered && self.pending() == 0);
        // Compacted already (only compaction takes the request): a later call, when a branch's
        // client transaction ends, has nothing left to free.
        if self.request.is_none() {
            return 0;
        }
        let freed = self.held_bytes();
        self.request = None;
        self.finals = Vec::new();
        self.waiting = Vec::new();
        for b in &mut self.branches {
            b.planned = Planned::spent();
        }
        self.branches.shrink_to_fit();
        freed
    }

    /// Bytes of SIP messages held: the request until compaction and the final responses
    /// collected from branches until the best one is chosen.
    pub fn held_bytes(&self) -> usize {
        let finals: usize = self.finals.iter().filter_map(|f| f.msg.as_ref()).map(|m| m.as_bytes().len()).sum();
        self.request.as_ref().map_or(0, |r| r.as_bytes().len()) + finals
    }
}
