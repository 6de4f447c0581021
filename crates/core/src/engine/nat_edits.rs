//! The engine's part of NAT traversal (`crate::nat`): the Contact of a response from a callee
//! behind NAT, rewritten before it goes upstream. Requests get theirs where they are forwarded
//! (`fork`, `stateless`, through `crate::proxy::forward::Forward::replace_field`).

use super::context::PlannedDest;
use super::Engine;
use crate::nat::response_contact_fix;
use crate::transaction::TxId;
use herald_sip::{Editor, Limits, Message};

impl Engine {
    /// A provisional or 2xx response on branch `idx` of `sid` from a registered phone behind NAT
    /// (the branch went straight to its registration's source, or to the flow a flow token of
    /// herald's Path names): its Contact, the dialog's remote target
    /// for the caller (RFC 3261 §12.1.2), is rewritten to that source, so the caller's in-dialog
    /// requests reach the phone through the NAT. Other responses pass unchanged; 3xx Contacts
    /// are redirect targets, not the responder's address, and are never touched.
    pub(super) fn fix_nated_response(&self, sid: TxId, idx: usize, resp: Message) -> Message {
        if !self.cfg.nat.fix_contact || !resp.status().is_some_and(|s| (101..300).contains(&s)) {
            return resp;
        }
        let Some(ctx) = self.contexts.get(&sid) else { return resp };
        let Some(branch) = ctx.branches.get(idx) else { return resp };
        // Only a branch that went straight to a binding's source: not one through the binding's
        // Path (the next hop is a proxy, an edge that fixes the Contact itself), nor one to a URI.
        if !matches!(branch.planned.dest, PlannedDest::Peer(_)) || !branch.planned.push_routes.is_empty() {
            return resp;
        }
        // The contact the branch targeted: its new Request-URI, else the request's own (a
        // request routed by a flow token keeps the Request-URI the registrar wrote).
        let request_uri =
            ctx.request.as_ref().and_then(|r| r.request_uri_bytes()).and_then(|u| std::str::from_utf8(u).ok());
        let (Some(contact), Some(to)) =
            (branch.planned.request_uri.as_deref().or(request_uri), branch.client.and_then(|c| self.txs.peer(c)))
        else {
            return resp;
        };
        let Some((field, value)) = response_contact_fix(&resp, contact, to, &self.cfg.nat) else { return resp };
        let mut e = Editor::new(&resp);
        e.replace_value(field, value.as_bytes());
        e.ensure_content_length();
        // The edit keeps the message well-formed; should it not parse, the original goes on.
        Message::parse(e.finish(), &Limits::default()).unwrap_or(resp)
    }
}
