//! One debug line per message the engine handles: what came in (method or status, Call-ID,
//! From → To, the peer) and what herald decided (every message it sent and where, or that it
//! sent nothing). Built only when debug is on for `herald::sip`; otherwise one cached level
//! check per message.

use crate::io::Output;
use crate::peer::Peer;
use herald_sip::{Limits, Message};
use std::fmt::Write as _;

/// Whether the lines are wanted (checked before the engine handles the message, so that the
/// outputs can be told apart from those already queued).
pub(super) fn enabled() -> bool {
    tracing::enabled!(target: "herald::sip", tracing::Level::DEBUG)
}

/// Logs `msg` from `from` and the decision: the outputs the engine appended after `first`.
pub(super) fn message(msg: &Message, from: Peer, out: &[Output], first: usize) {
    let what = match (msg.method(), msg.status()) {
        (Some(m), _) => m.as_str().to_owned(),
        (None, Some(s)) => format!("{s} ({})", msg.cseq().map(|c| c.method.as_str().to_owned()).unwrap_or_default()),
        _ => "?".into(),
    };
    let from_uri = msg.from_header().map(|a| a.uri.as_str().to_owned()).unwrap_or_default();
    let to_uri = msg.to_header().map(|a| a.uri.as_str().to_owned()).unwrap_or_default();
    let decision = decision(&out[first.min(out.len())..]);
    tracing::debug!(
        target: "herald::sip",
        call_id = %msg.call_id().unwrap_or(""),
        from = %from_uri,
        to = %to_uri,
        peer = %format_args!("{}:{}", from.transport, from.addr),
        "{what} -> {decision}"
    );
}

/// "sent INVITE to udp:10.0.0.2:5080, 100 to udp:10.0.0.1:5070", "resolving a target",
/// or "nothing sent" (absorbed retransmission, dropped, or waiting for a branch).
fn decision(outputs: &[Output]) -> String {
    let mut s = String::new();
    for o in outputs {
        s.push_str(if s.is_empty() { "sent " } else { ", " });
        match o {
            Output::Send { to, bytes } => {
                let sent = Message::parse(bytes.clone(), &Limits::default()).ok();
                let label = match sent.as_ref().map(|m| (m.method(), m.status())) {
                    Some((Some(m), _)) => m.as_str().to_owned(),
                    Some((None, Some(st))) => st.to_string(),
                    _ => "a message".into(),
                };
                let _ = write!(s, "{label} to {}:{}", to.transport, to.addr);
            }
            Output::Resolve { request, .. } => {
                let _ = write!(s, "a DNS lookup of {request:?}");
            }
            Output::PingDone { token, outcome } => {
                let _ = write!(s, "the outcome of ping {token}: {outcome:?}");
            }
        }
    }
    if s.is_empty() {
        s.push_str("nothing sent");
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;

    #[test]
    fn the_decision_names_every_message_sent_and_where() {
        let ok = Bytes::from_static(b"SIP/2.0 401 Unauthorized\r\nVia: SIP/2.0/UDP 192.0.2.1;branch=z9hG4bKx\r\nFrom: <sip:a@h>;tag=1\r\nTo: <sip:a@h>\r\nCall-ID: c\r\nCSeq: 1 REGISTER\r\nContent-Length: 0\r\n\r\n");
        let invite = Bytes::from_static(b"INVITE sip:b@192.0.2.2 SIP/2.0\r\nVia: SIP/2.0/UDP 192.0.2.10;branch=z9hG4bKy\r\nMax-Forwards: 69\r\nFrom: <sip:a@h>;tag=1\r\nTo: <sip:b@h>\r\nCall-ID: c\r\nCSeq: 1 INVITE\r\nContent-Length: 0\r\n\r\n");
        let to = |a: &str| Peer::udp(a.parse().unwrap());
        let out = [
            Output::Send { to: to("192.0.2.1:5060"), bytes: ok },
            Output::Send { to: to("192.0.2.2:5062"), bytes: invite },
        ];
        assert_eq!(decision(&out), "sent 401 to UDP:192.0.2.1:5060, INVITE to UDP:192.0.2.2:5062");
        assert_eq!(decision(&[]), "nothing sent");
    }
}
