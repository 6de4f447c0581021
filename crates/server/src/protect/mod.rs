//! Protection of the server against its own clients: flood and brute-force bans per source, and
//! overload control that sheds new work first.

mod flood;
mod overload;
mod window;

pub use flood::listing::{Hold, HoldKind};
pub use flood::{FloodCounters, FloodGuard, FloodSettings, FloodVerdict};
pub use overload::{OverloadDetector, OverloadSettings};

use herald_core::Peer;

/// Whether the answer to a malformed request from `from` may be sent (issue 16 item 6): the
/// request counts against its source's rate like any other (`[flood]`), so a source over it -
/// or a victim whose address a flood of malformed requests forges - gets no answers. Without
/// this herald was a reflector: 499,999 400s went to one forged address. Over a connection the
/// guard bans the source, as for well-formed requests.
pub(crate) fn may_answer(flood: Option<&FloodGuard>, from: &Peer) -> bool {
    flood.is_none_or(|f| f.check_request(from, std::time::Instant::now()) == FloodVerdict::Allow)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 16 item 6: answers to malformed requests count against the source's rate.
    #[test]
    fn answers_are_held_to_the_sources_rate() {
        let mut flood = crate::config::Config::default().flood;
        flood.max_requests = 3;
        flood.trusted = vec!["192.0.2.9".into()];
        let guard = FloodGuard::new(flood.settings(), std::time::Instant::now());
        let (a, b, trusted) = (
            Peer::udp(([192, 0, 2, 1], 5060).into()),
            Peer::udp(([192, 0, 2, 2], 5060).into()),
            Peer::udp(([192, 0, 2, 9], 5060).into()),
        );
        let answered = |p: &Peer| (0..10).filter(|_| may_answer(Some(&guard), p)).count();
        assert_eq!(answered(&a), 3, "the rate, then nothing");
        assert_eq!(answered(&b), 3, "another source has its own");
        assert_eq!(answered(&trusted), 10);
        assert!(may_answer(None, &a), "without [flood] every answer goes");
    }
}
