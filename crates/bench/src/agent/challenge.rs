//! Answering a 401/407 (RFC 3261 §22.2, §22.3): pick the strongest Digest challenge of the
//! response and compute the matching Authorization or Proxy-Authorization value.

use super::context::Context;
use super::digest::Challenge;
use herald_sip::{HeaderName, Message};
use rand::RngExt;

impl Context {
    /// (header name, value) answering `msg`'s challenge for `user`; None when the user has no
    /// password or the response carries no usable challenge (the request then fails with that
    /// status).
    pub fn credentials(
        &mut self,
        user: usize,
        msg: &Message,
        status: u16,
        method: &str,
        uri: &str,
    ) -> Option<(&'static str, String)> {
        let (challenge_header, answer_header) = if status == 407 {
            (HeaderName::ProxyAuthenticate, "Proxy-Authorization")
        } else {
            (HeaderName::WwwAuthenticate, "Authorization")
        };
        let password = self.users[user].password.as_deref()?;
        let challenge = Challenge::best(msg.fields(challenge_header).map(|h| msg.value_of(h)))?;
        let cnonce = format!("{:016x}", self.rng.random::<u64>());
        // A fresh nonce per challenge, so the nonce count is always 1 (RFC 7616 §3.4).
        Some((answer_header, challenge.answer(&self.users[user].name, password, method, uri, 1, &cnonce)))
    }
}
