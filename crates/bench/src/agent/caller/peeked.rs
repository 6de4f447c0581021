//! The responses our callers handle from a [`Peek`] (their start line and the headers that match
//! them to their call), without the full parse: see [`Calls::on_peeked_response`].

use super::responses::{matching_tx, parse_call_id, record_srd, take_final};
use super::{Calls, Which};
use crate::agent::client_tx::ClientTx;
use crate::agent::context::Context;
use crate::agent::output::{Measure, Outbox};
use crate::agent::route::{to_with_tag, InDialog};
use herald_sip::headers::CSeq;
use herald_sip::peek::Peek;
use herald_sip::HeaderName;

/// Record-Route lines a 2xx handled from a peek may carry (more: it is parsed in full).
const MAX_PEEKED_ROUTES: usize = 4;

impl Calls {
    /// A response read only as far as its start line and the headers that match it to its call
    /// and transaction (Call-ID, CSeq, top Via; for a 2xx also To, Contact and Record-Route) with
    /// a [`Peek`]: handled here when those decide everything it does, as [`Calls::on_response`]
    /// would handle it: a provisional to an INVITE (the first, usually the proxy's 100 Trying,
    /// moves its transaction to Proceeding by its status: [`ClientTx::on_provisional_read`]),
    /// a 2xx to a BYE or CANCEL, and a 2xx to an INVITE whose Contact and Record-Route were read
    /// before (its route set is in the [`RouteCache`]). False (nothing done) for any other,
    /// which then goes through the full parse and [`Calls::on_response`]. Parsing these four in
    /// full cost ~8k instructions per call (callgrind).
    pub fn on_peeked_response(&mut self, ctx: &mut Context, peek: &Peek<'_>, out: &mut Outbox) -> bool {
        use HeaderName::{CSeq as CSeqName, CallId, Contact, RecordRoute, To, Via};
        const NAMES: [HeaderName; 6] = [CallId, CSeqName, Via, To, Contact, RecordRoute];
        let Some(status) = peek.status().filter(|s| matches!(s, 100..=299)) else { return false };
        // The first line of each name but Record-Route, and every Record-Route line (a few).
        let mut first: [Option<&[u8]>; 5] = [None; 5];
        let mut record_routes: [&[u8]; MAX_PEEKED_ROUTES] = [&[]; MAX_PEEKED_ROUTES];
        let mut routes = 0;
        let read = if status < 200 {
            peek.first_of([CallId, CSeqName, Via]).map(|[id, cseq, via]| first[..3].copy_from_slice(&[id, cseq, via]))
        } else {
            // A 2xx reads to the end of its header section: all of its Record-Route lines.
            peek.each_of(&NAMES, |name, value| match NAMES.iter().position(|n| *n == name) {
                Some(5) => {
                    if let Some(slot) = record_routes.get_mut(routes) {
                        *slot = value;
                    }
                    routes += 1;
                }
                Some(i) => {
                    first[i].get_or_insert(value);
                }
                None => {}
            })
        };
        let [call_id, cseq, via, to, contact] = first;
        let (Ok(()), Some((slot, generation)), Some(cseq)) = (read, call_id.and_then(parse_call_id), cseq) else {
            return false;
        };
        let parsed;
        let method = match plain_cseq_method(cseq) {
            Some(method) => method,
            None => {
                let Ok(cseq) = CSeq::parse(cseq) else { return false };
                parsed = cseq;
                parsed.method.as_str().as_bytes()
            }
        };
        let Some(call) = self.calls.get_mut(slot, generation) else { return false };
        let Some(which) = matching_tx(call, ctx, method, via) else { return false };
        let proceeding = call.tx(which).as_ref().is_some_and(ClientTx::is_proceeding);
        match (which, status) {
            (Which::Invite, 100..=199) if proceeding => {
                self.on_invite_provisional(ctx, slot, generation, false, status, out)
            }
            (Which::Invite, 100..=199) => {
                // The first provisional (the proxy's 100 Trying): the transaction learns it by
                // its status, as the full parse would have told it.
                let tx = call.tx(which).as_mut().expect("matched above");
                if !tx.on_provisional_read(ctx, out) {
                    return false;
                }
                self.on_invite_provisional(ctx, slot, generation, true, status, out)
            }
            (Which::Invite, 200..=299) => {
                // What on_invite_final does with a 2xx, once its dialog is known.
                let route = match (contact, routes <= MAX_PEEKED_ROUTES) {
                    (Some(contact), true) => self.routes.cached(contact, record_routes[..routes].iter().copied()),
                    _ => None,
                };
                let Some(dialog) = route.zip(to.and_then(to_with_tag)).map(|(route, to)| InDialog { to, route }) else {
                    return false;
                };
                let (_, _, held) = take_final(call, which, ctx, out);
                record_srd(call, ctx.rx_us, held, out);
                out.record(Measure::Transaction(true));
                self.confirm(ctx, slot, generation, dialog, out);
            }
            (Which::Other, 200..=299) => {
                let (method, took, _) = take_final(call, which, ctx, out);
                self.on_other_final(ctx, slot, generation, method, took, status, None, out)
            }
            _ => return false,
        }
        true
    }
}

/// The method of a CSeq value of the plain shape this generator writes (`{number} {method}`:
/// one to nine digits, then spaces or tabs), read without [`CSeq::parse`] (~130 instructions a
/// response, callgrind); None for any other shape, which the parse then reads. What comes back
/// is only compared with the methods of the call's own transactions: text that is no method
/// (which the parse would refuse) matches none of them, and the response is then declined, as
/// it was for the parse's error.
fn plain_cseq_method(value: &[u8]) -> Option<&[u8]> {
    let digits = value.iter().take_while(|b| b.is_ascii_digit()).count();
    if !(1..=9).contains(&digits) {
        return None;
    }
    let rest = &value[digits..];
    let gap = rest.iter().take_while(|b| matches!(b, b' ' | b'\t')).count();
    (gap > 0 && gap < rest.len()).then(|| &rest[gap..])
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Where the plain reading gives a method, it is the one the parse gives; where the parse
    /// refuses the value, the plain reading gives none or text no transaction has as its method.
    #[test]
    fn a_plain_cseq_reads_as_the_parse_reads_it() {
        let methods = ["INVITE", "BYE", "CANCEL", "ACK", "REGISTER"];
        let values = [
            "1 INVITE",
            "2 BYE",
            "314159 CANCEL",
            "1\tINVITE",
            "7  \t BYE",
            "000000001 ACK",
            "123456789 INVITE",
            "1234567890 INVITE",
            "4294967296 INVITE",
            "INVITE",
            "1",
            "1 ",
            " 1 INVITE",
            "1INVITE",
            "1 INV@TE",
            "1 INVITE X",
            "1 invite",
            "-1 BYE",
            "1\r\n INVITE",
        ];
        for value in values {
            let plain = plain_cseq_method(value.as_bytes());
            match CSeq::parse(value.as_bytes()) {
                Ok(cseq) => {
                    if let Some(method) = plain {
                        assert_eq!(method, cseq.method.as_str().as_bytes(), "{value:?}");
                    }
                }
                Err(_) => assert!(plain.is_none_or(|m| !methods.iter().any(|n| n.as_bytes() == m)), "{value:?}"),
            }
        }
        assert_eq!(plain_cseq_method(b"12 INVITE"), Some(&b"INVITE"[..]));
    }
}
