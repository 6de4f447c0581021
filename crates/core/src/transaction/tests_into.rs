//! The table's `_into` paths (the engine's: one `Actions` of the caller's, filled in place and
//! emptied by `drain`) give what the by-value methods give, over both kinds of server and
//! client transaction, every response class, and a reliable and an unreliable peer.

use super::tests_support::*;
use super::{Actions, ClientKey, MethodKey, Timers, TransactionTable};
use crate::peer::{Peer, Transport};
use bytes::Bytes;

fn peers() -> [Peer; 2] {
    let addr = "192.0.2.10:5060".parse().unwrap();
    [Peer::udp(addr), Peer { transport: Transport::Tcp, addr, conn: Some(crate::peer::ConnId(7)) }]
}

/// What an `Actions` says, compared between the two paths.
fn seen(a: &Actions) -> (Vec<Bytes>, Vec<Ev>) {
    (sends(a), events(a))
}

/// Checks that `kept` says what `fresh` says, then empties it as the engine does.
fn same(kept: &mut Actions, fresh: &Actions, what: &str) {
    assert_eq!(seen(kept), seen(fresh), "{what}");
    kept.drain(drop);
    assert!(kept.is_empty(), "{what}: emptied for the next call");
}

#[test]
fn the_into_paths_give_what_the_by_value_methods_give() {
    for peer in peers() {
        for method in ["INVITE", "BYE"] {
            for final_status in [200, 486] {
                let (mut by_value, mut into) =
                    (TransactionTable::new(Timers::default()), TransactionTable::new(Timers::default()));
                let mut kept = Actions::new();
                let t = t0();
                let what = |step: &str| format!("{method} {final_status} over {:?}: {step}", peer.transport);

                // A server transaction: the request, the TU's 180 and final, a retransmission.
                let req = request(method, "z9hG4bKinto1");
                let (sid, fresh) = by_value.insert_server(t, &req, peer, true).unwrap();
                let key = into.server_key(&req).unwrap();
                let sid2 = into.insert_server_into(t, &req, key, (peer, true), &mut kept).unwrap();
                assert_eq!(sid, sid2);
                same(&mut kept, &fresh, &what("server start"));
                for status in [180, final_status] {
                    let bytes = response_bytes(&req, status, Some("totag"));
                    let fresh = by_value.on_tu_response_to(t + ms(10), sid, bytes.clone(), status, &mut None);
                    let mut peer_seen = None;
                    into.on_tu_response_into(t + ms(10), sid, (bytes, status), &mut peer_seen, &mut kept);
                    assert_eq!(peer_seen, Some(peer));
                    same(&mut kept, &fresh, &what(&format!("server {status}")));
                }
                let again = request(method, "z9hG4bKinto1");
                let fresh = by_value.on_message_to(t + ms(20), sid, again.clone(), &mut None);
                into.on_message_into(t + ms(20), sid, again, &mut None, &mut kept);
                same(&mut kept, &fresh, &what("server retransmission"));

                // A client transaction of a forwarded copy: its 180, its final, a retransmission.
                let fwd = request(method, "z9hG4bKinto2");
                let key = || ClientKey { branch: "z9hG4bKinto2".into(), method: MethodKey::of(fwd.method().unwrap()) };
                let bytes = Bytes::copy_from_slice(fwd.as_bytes());
                let (cid, fresh) = by_value.insert_client_forwarded(t, bytes.clone(), key(), peer).unwrap();
                let cid2 = into.insert_client_forwarded_into(t, bytes, key(), peer, &mut kept).unwrap();
                assert_eq!(cid, cid2);
                same(&mut kept, &fresh, &what("client start"));
                for status in [180, final_status, final_status] {
                    let resp = response(&fwd, status, Some("totag"));
                    let (mut peer_fresh, mut peer_seen) = (None, None);
                    let fresh = by_value.on_message_to(t + ms(30), cid, resp.clone(), &mut peer_fresh);
                    into.on_message_into(t + ms(30), cid, resp, &mut peer_seen, &mut kept);
                    // None over TCP for the retransmission: the final ended the transaction.
                    assert_eq!(peer_seen, peer_fresh);
                    same(&mut kept, &fresh, &what(&format!("client {status}")));
                }
                assert_eq!(by_value.len(), into.len(), "{}", what("the same transactions left"));
                assert_eq!(by_value.next_timeout(), into.next_timeout(), "{}", what("the same next deadline"));
            }
        }
    }
}
