//! No panics on any input: every message of the RFC 4475 / RFC 5118 torture corpus (when it is
//! present beside the repository, as for herald-sip's tests) and deterministic mutations of
//! valid messages go through key building, matching, transaction creation and every machine
//! entry point.

use super::tests_support::*;
use super::{build_ack, build_trying, stateless_branch, ClientKey, ServerKey, Timers, TransactionTable};
use crate::peer::Peer;
use bytes::Bytes;
use herald_sip::{Limits, Message};
use std::path::PathBuf;

fn corpus_files() -> Vec<Vec<u8>> {
    let dir = std::env::var("HERALD_TORTURE_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|_| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/testdata/sip-torture"));
    let mut out = Vec::new();
    for sub in ["rfc4475", "rfc5118"] {
        let Ok(rd) = std::fs::read_dir(dir.join(sub)) else { continue };
        for e in rd.flatten() {
            if let Ok(b) = std::fs::read(e.path()) {
                out.push(b);
            }
        }
    }
    out
}

/// Runs `msg` through everything the transaction layer offers.
fn exercise(msg: Message, other: &Message) {
    let _ = ServerKey::from_request(&msg);
    let _ = ServerKey::cancel_target(&msg);
    let _ = ClientKey::from_message(&msg);
    let _ = stateless_branch(&msg);
    let _ = build_trying(&msg);
    let _ = build_ack(&msg, other);
    let _ = build_ack(other, &msg);
    let t = t0();
    let mut tt = TransactionTable::new(Timers::default());
    let peer = Peer::udp("192.0.2.1:5060".parse().unwrap());
    let _ = tt.find_server(&msg);
    let _ = tt.find_client(&msg);
    let _ = tt.find_cancel_target(&msg);
    if let Ok((id, _)) = tt.insert_server(t, &msg, peer, true) {
        tt.on_message(t + ms(1), id, msg.clone());
        tt.on_tu_response(t + ms(2), id, msg.buffer().clone(), 486);
        tt.on_message(t + ms(3), id, msg.clone());
        tt.handle_timeouts(t + ms(100_000));
    }
    if let Ok((id, _)) = tt.insert_client(t, msg.clone(), peer) {
        tt.on_message(t + ms(1), id, other.clone());
        tt.on_message(t + ms(2), id, msg.clone());
        tt.on_transport_error(id);
        tt.handle_timeouts(t + ms(100_000));
    }
}

#[test]
fn torture_corpus_never_panics() {
    let files = corpus_files();
    let reference = invite("z9hG4bKref");
    let busy = response(&reference, 486, Some("b"));
    for bytes in &files {
        if let Ok(m) = Message::parse(Bytes::copy_from_slice(bytes), &Limits::default()) {
            exercise(m.clone(), &busy);
            exercise(m, &reference);
        }
    }
}

#[test]
fn mutated_messages_never_panic() {
    let seeds = [
        invite("z9hG4bKmut").buffer().clone(),
        response(&invite("z9hG4bKmut"), 486, Some("q")).buffer().clone(),
        Bytes::from_static(INV2543.as_bytes()),
    ];
    let reference = invite("z9hG4bKmut");
    let busy = response(&reference, 486, Some("b"));
    let mut state = 0x2545_f491_4f6c_dd1du64;
    let mut next = || {
        // xorshift64: deterministic, so a failure reproduces.
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let alphabet = b" ;:,<>@=\"\r\nz9hG4bKtag";
    for round in 0..3000 {
        let mut b = seeds[round % seeds.len()].to_vec();
        for _ in 0..1 + next() % 4 {
            let at = (next() % b.len() as u64) as usize;
            match next() % 3 {
                0 => b[at] = alphabet[(next() % alphabet.len() as u64) as usize],
                1 => {
                    b.remove(at);
                }
                _ => b.insert(at, alphabet[(next() % alphabet.len() as u64) as usize]),
            }
        }
        if let Ok(m) = Message::parse(Bytes::from(b), &Limits::default()) {
            exercise(m.clone(), &busy);
            exercise(m, &reference);
        }
    }
}
