//! Write-through registrations: no 200 OK before the change is durable, retransmissions
//! included.

use super::*;
use herald_store::{AorBindings, Journal, Ticket};
use std::sync::atomic::{AtomicU64, Ordering};

/// A journal whose commits the test makes: tickets count up, `committed` is the watermark.
#[derive(Default)]
struct Commits {
    issued: AtomicU64,
    committed: AtomicU64,
}

impl Journal<Peer> for Commits {
    fn record(&self, _change: &AorBindings<'_, Peer>) -> Ticket {
        Ticket(self.issued.fetch_add(1, Ordering::Relaxed) + 1)
    }

    fn durable(&self) -> Ticket {
        Ticket(self.committed.load(Ordering::Relaxed))
    }
}

fn harness(stateless: bool) -> (Harness, Arc<Commits>) {
    let registrar = Registrar::new(RegistrarConfig::default());
    let commits = Arc::new(Commits::default());
    let store = Arc::new(registrar.new_store().with_journal(commits.clone()));
    let engine = Engine::new(Arc::new(config(Forking::Parallel, stateless)), store, registrar, 0);
    (Harness { engine, now: Instant::now() }, commits)
}

const REGISTER: &str = "REGISTER sip:example.com SIP/2.0\nVia: SIP/2.0/UDP 192.0.2.1:5061;branch=z9hG4bKwt1\nMax-Forwards: 70\nFrom: <sip:alice@example.com>;tag=r1\nTo: <sip:alice@example.com>\nCall-ID: wt-1\nCSeq: 1 REGISTER\nContact: <sip:alice@192.0.2.1:5061>\nExpires: 3600\nContent-Length: 0\n\n";

fn statuses(out: &[Output]) -> Vec<u16> {
    sent(out).iter().filter_map(|(_, m)| m.status()).collect()
}

#[test]
fn the_200_waits_for_the_commit_and_retransmissions_get_nothing_before_it() {
    for stateless in [false, true] {
        let (mut h, commits) = harness(stateless);
        assert!(statuses(&h.send(ALICE, REGISTER)).is_empty(), "stateless={stateless}: no 200 before the commit");
        assert!(h.engine.poll_timeout().is_some(), "the runtime is asked to look again");
        // The change is in the store already (a call finds alice), only the answer waits.
        assert_eq!(h.engine.store.lookup(&herald_store::Aor::parse("sip:alice@example.com").unwrap(), h.now).len(), 1);
        assert!(statuses(&h.advance(Duration::from_millis(10))).is_empty());
        // A retransmission before the commit is absorbed by its transaction. (In stateless
        // mode it is a new request, refused as out of order - CSeq not newer - as it always
        // was: never a 200.)
        let retransmitted = statuses(&h.send(ALICE, REGISTER));
        match stateless {
            false => assert!(retransmitted.is_empty(), "{retransmitted:?}"),
            true => assert!(!retransmitted.contains(&200), "{retransmitted:?}"),
        }
        assert!(h.engine.held_bytes() > 0);

        commits.committed.store(1, Ordering::Relaxed);
        let released = statuses(&h.advance(Duration::from_millis(10)));
        assert_eq!(released, [200], "stateless={stateless}");
        assert_eq!(h.engine.durable.bytes(), 0);
        assert!(statuses(&h.advance(Duration::from_millis(10))).is_empty());
        if !stateless {
            // After the commit a retransmission gets the stored 200 at once.
            assert_eq!(statuses(&h.send(ALICE, REGISTER)), [200]);
        }
    }
}

#[test]
fn without_a_journal_that_waits_the_200_leaves_at_once() {
    let mut h = Harness::new();
    assert_eq!(statuses(&h.send(ALICE, REGISTER)), [200]);
}
