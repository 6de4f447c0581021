//! The engine's part of NAT traversal (`crate::nat`): the Contact of a response from a callee
//! behind NAT, rewritten before it goes upstream. Requests get theirs where they are forwarded
//! (`fork`, `stateless`, through `crate::proxy::forward::Forward::replace_field`).

use super::context::{Planned, PlannedDest};
use super::Engine;
use crate::nat::{
    address_responder_may_be_natted, parsed_responder_may_be_natted, responder_contact_fix, responder_may_be_natted,
};
use crate::peer::Peer;
use crate::transaction::TxId;
use herald_sip::{Editor, Limits, Message};

impl Engine {
    /// A provisional or 2xx response on branch `idx` of `sid` from a phone behind NAT (a
    /// registered one reached at its registration's source or over the flow a flow token of
    /// herald's Path names, or the remote target of an in-dialog request: see
    /// `crate::nat::response_contact_fix`): its Contact, the dialog's remote target for the
    /// caller (RFC 3261 §12.1.2, §12.2.1.2), is rewritten to where the phone is, so the caller's
    /// in-dialog requests reach it through the NAT. Other responses pass unchanged; 3xx Contacts
    /// are redirect targets, not the responder's address, and are never touched.
    /// `None` when the response goes on as it is (borrowed, not moved through: a message is
    /// moved by copying it).
    pub(super) fn fix_nated_response(&self, sid: TxId, idx: usize, resp: &Message) -> Option<Message> {
        if !self.cfg.nat.fix_contact || !resp.status().is_some_and(|s| (101..300).contains(&s)) {
            return None;
        }
        let branch = self.contexts.get(&sid).and_then(|c| c.branches.get(idx))?;
        if !branch.responder_natted {
            return None;
        }
        let to = branch.client.and_then(|c| self.txs.peer(c))?;
        let (field, value) = responder_contact_fix(resp, to, &self.cfg.nat)?;
        let mut e = Editor::new(resp);
        e.replace_value(field, value.as_bytes());
        e.ensure_content_length();
        // The edit keeps the message well-formed; should it not parse, the original goes on.
        Message::parse(e.finish(), &Limits::default()).ok()
    }

    /// Whether the responses on a branch of `request` planned as `planned` and sent to `to` may
    /// come from a UA behind NAT (see [`Engine::fix_nated_response`]): decided once, when the
    /// branch is sent, and kept in it (`Branch::responder_natted`).
    pub(super) fn responder_natted(&self, request: &Message, planned: &Planned, to: Peer) -> bool {
        if !self.cfg.nat.fix_contact {
            return false;
        }
        // The contact the branch targeted: its new Request-URI, else the request's own (a
        // request routed by a flow token keeps the Request-URI the registrar wrote).
        let new_uri = planned.request_uri.as_deref();
        // Only a branch that went straight to the UA: to a binding's source or a flow, or to
        // the address its Request-URI names; not one through a Path or a Route (the next hop is
        // a proxy, an edge that fixes the Contact itself).
        let straight = planned.push_routes.is_empty()
            && match &planned.dest {
                PlannedDest::Peer(_) => true,
                PlannedDest::Uri(u) => match new_uri {
                    Some(target) => u == target,
                    None => request.request_uri_bytes() == Some(u.as_bytes()),
                },
            };
        if !straight {
            return false;
        }
        let in_dialog = request.to_tag().ok().flatten().is_some();
        // The request's own Request-URI is parsed already (the receipt check's memo); only a
        // new one (a registered contact) is parsed, when its text does not settle it.
        match new_uri {
            // A registered contact read for the plan: `responder_may_be_natted`'s answer from
            // that reading (outside a dialog only the Contact tests count), without its text
            // filter and parse (~250 instructions per INVITE to a registered user).
            Some(_) if !in_dialog && planned.contact.is_some() => {
                address_responder_may_be_natted(planned.contact.and_then(|c| c.address), to, &self.cfg.nat)
            }
            Some(new) => responder_may_be_natted(new, to, in_dialog, &self.cfg.nat),
            None => {
                request.request_uri().is_ok_and(|u| parsed_responder_may_be_natted(&u, to, in_dialog, &self.cfg.nat))
            }
        }
    }
}
