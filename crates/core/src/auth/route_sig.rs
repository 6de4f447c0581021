//! Signed Record-Route URIs: proof that an in-dialog request follows a route set herald built
//! itself (issue 16: a `Route: <sip:herald;lr>` the sender wrote proves nothing, so an invented
//! To tag plus our own Route turned herald into an open relay).
//!
//! ```text
//! Record-Route: <sip:192.0.2.10:5060;lr;hs=<sig>>
//! sig = hex( HMAC-SHA256(K, len(Call-ID) || Call-ID || creator-tag)[..12] )
//! K   = HMAC-SHA256(secret, "herald record-route signature v1")
//! ```
//!
//! The parameter name `hs` is `crate::proxy::own_values::SIG_PARAM`, beside the code that writes
//! the Record-Route; this module only computes and checks the value.
//!
//! *What is signed.* When herald record-routes a dialog-creating request (RFC 3261 §16.6 step
//! 4) it knows the Call-ID and the From tag of the dialog's creator; the callee's tag does not
//! exist yet (and forking makes several). So the signature binds the Call-ID and the creator's
//! tag, as Kamailio's rr module does with `ftag`. Later requests of the dialog carry the Route
//! copied from the Record-Route (§12.1.1, §12.1.2): from the caller with that tag as From tag,
//! from the callee with it as To tag (§12.2.1.1 swaps the roles). A request is accepted when the
//! signature matches its Call-ID with either its From tag or its To tag: whichever side sends
//! it, one of them is the creator's tag, and someone who never saw a Record-Route of herald's
//! for that Call-ID and tag cannot produce one. The tag is length-prefixed by the Call-ID's
//! length so that ("ab", "c") and ("a", "bc") differ.
//!
//! *The key* is derived from `[auth] secret` (random per process when empty), with a label
//! that separates it from the nonce MAC ([`super::nonce`]): nodes sharing a secret accept each
//! other's Record-Routes, and with a configured secret dialogs survive a restart.
//!
//! *What it does not prove*: that the request comes from a party of the dialog. Whoever
//! learned a signed Record-Route (the two parties, anyone on their path) can send requests
//! with that Call-ID to any target; Kamailio's `ftag` has the same limit. Without dialog state
//! (herald keeps none) no more can be checked; the parties were let through the policy when
//! the dialog was set up.

use hmac::{Hmac, Mac};
use sha2::Sha256;

type HmacSha256 = Hmac<Sha256>;

/// Bytes of the MAC kept: 96 bits, as HMAC-SHA256-96 truncations elsewhere (RFC 2104 §5).
const SIG_LEN: usize = 12;
const LABEL: &[u8] = b"herald record-route signature v1";

/// Signs and checks Record-Route URIs.
#[derive(Clone)]
pub struct RouteSigner {
    mac: HmacSha256,
}

impl std::fmt::Debug for RouteSigner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RouteSigner").finish_non_exhaustive()
    }
}

impl RouteSigner {
    /// `secret`: the `[auth]` secret (any length, RFC 2104 §3).
    pub fn new(secret: &[u8]) -> RouteSigner {
        let mut derive = HmacSha256::new_from_slice(secret).expect("HMAC accepts keys of any length");
        derive.update(LABEL);
        let key = derive.finalize().into_bytes();
        RouteSigner { mac: HmacSha256::new_from_slice(&key).expect("32-byte key") }
    }

    fn mac(&self, call_id: &str, tag: &str) -> HmacSha256 {
        let mut m = self.mac.clone();
        m.update(&(call_id.len() as u64).to_be_bytes());
        m.update(call_id.as_bytes());
        m.update(tag.as_bytes());
        m
    }

    /// The signature for a dialog with `call_id` created by the side whose tag is `tag` (the
    /// From tag of the dialog-creating request; empty when it had none, RFC 2543 clients).
    pub fn sign(&self, call_id: &str, tag: &str) -> String {
        let full = self.mac(call_id, tag).finalize().into_bytes();
        herald_credentials::to_hex(&full[..SIG_LEN])
    }

    /// Whether `sig` (hex) was made by [`RouteSigner::sign`] for `call_id` and `tag` (compared
    /// in constant time).
    pub fn check(&self, sig: &str, call_id: &str, tag: &str) -> bool {
        let mut raw = [0u8; SIG_LEN];
        if sig.len() != SIG_LEN * 2 || herald_credentials::from_hex(sig, &mut raw).is_none() {
            return false;
        }
        self.mac(call_id, tag).verify_truncated_left(&raw).is_ok()
    }

    /// Whether `sig` proves that a request with this Call-ID, From tag and To tag belongs to a
    /// dialog herald record-routed: the creator's tag is the From tag of the caller's requests
    /// and the To tag of the callee's (see the module comment).
    pub fn proves_dialog(&self, sig: &str, call_id: &str, from_tag: &str, to_tag: &str) -> bool {
        self.check(sig, call_id, from_tag) || self.check(sig, call_id, to_tag)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signatures_bind_the_call_id_and_the_creators_tag() {
        let s = RouteSigner::new(b"a secret of sixteen+");
        let sig = s.sign("call-1@host", "a1");
        assert_eq!(sig.len(), SIG_LEN * 2);
        assert!(s.check(&sig, "call-1@host", "a1"));
        assert!(!s.check(&sig, "call-2@host", "a1"), "another Call-ID");
        assert!(!s.check(&sig, "call-1@host", "a2"), "another tag");
        assert!(!s.check(&sig, "call-1@hos", "ta1"), "length-prefixed: no sliding between fields");
        // Both directions of the dialog: the caller (From tag a1) and the callee (To tag a1).
        assert!(s.proves_dialog(&sig, "call-1@host", "a1", "b9"));
        assert!(s.proves_dialog(&sig, "call-1@host", "b9", "a1"));
        assert!(!s.proves_dialog(&sig, "call-1@host", "b9", "c7"));
        assert!(!RouteSigner::new(b"another secret....").check(&sig, "call-1@host", "a1"), "another key");
        assert!(!s.check("", "call-1@host", "a1"));
        assert!(!s.check(&sig[..SIG_LEN], "call-1@host", "a1"), "truncated");
        assert!(!s.check(&sig.replace(|c: char| c.is_ascii_hexdigit(), "z"), "call-1@host", "a1"));
    }
}
