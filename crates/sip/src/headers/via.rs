//! Via (RFC 3261 §20.42, §18.2.1; RFC 3581 rport; RFC 5118 IPv6 forms).

use super::error::ValueError;
use super::lex;
use super::params::Params;
use super::sent_by_memo;
use crate::scan;
use crate::uri::{ipv4_prefix, parse_host_port, Host};
use std::net::Ipv4Addr;

/// One via-parm: `sent-protocol LWS sent-by *( SEMI via-params )`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Via<'a> {
    pub protocol_name: &'a str,
    pub protocol_version: &'a str,
    /// As written ("UDP", "TCP", "TLS", "SCTP", "WS", or an unknown token: RFC 4475 §3.1.1.10).
    pub transport: &'a str,
    pub host: Host<'a>,
    pub port: Option<u16>,
    pub params: Params<'a>,
    /// The branch, found while the parameters are checked: every message's transaction match
    /// reads it, so it is not looked up a second time.
    branch: Option<&'a str>,
    /// The first `rport`, `received` and `maddr` parameters as written (`Some(None)`: a flag),
    /// also found while the parameters are checked: the proxy reads them for every response
    /// it sends and every request it forwards (RFC 3581, RFC 3261 §18.2.2), and each lookup
    /// walked the list past the branch again (callgrind: ~1,500 instructions per call).
    found: ViaParams,
}

/// The parameters of a Via that [`Via::parse`] picks out: the first of each name, as places
/// in the parameter text. Plain offsets (not slices): a Via is built again from the message's
/// memo each time the top one is read, and copying these costs less than slicing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct ViaParams {
    pub rport: Pick,
    pub received: Pick,
    pub maddr: Pick,
}

impl ViaParams {
    /// [`Via::rport`] of the Via whose parameter text is `raw`.
    pub(crate) fn rport(&self, raw: &[u8]) -> Option<Option<u16>> {
        self.rport.read(raw).map(|v| v.and_then(|v| scan::ascii_str(v).parse().ok()))
    }

    /// [`Via::maddr`] of the Via whose parameter text is `raw`.
    pub(crate) fn maddr<'a>(&self, raw: &'a [u8]) -> Option<&'a str> {
        self.maddr.read(raw).flatten().map(scan::ascii_str)
    }
}

/// Where a parameter's value is in the parameter text (which starts with `;`, so no value
/// starts at 0): `start == 0` and `end == 0` when absent, `end == 1` when a flag.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Pick {
    start: u32,
    end: u32,
}

impl Pick {
    const FLAG: Pick = Pick { start: 0, end: 1 };

    /// The value `value` of a parameter in `raw`, the parameter text it is a part of.
    fn of(raw: &[u8], value: Option<&[u8]>) -> Pick {
        let Some(v) = value else { return Pick::FLAG };
        let start = (v.as_ptr() as usize).wrapping_sub(raw.as_ptr() as usize);
        match u32::try_from(start) {
            Ok(start) if start > 0 && start as usize + v.len() <= raw.len() => {
                Pick { start, end: start + v.len() as u32 }
            }
            // Not inside the text (a bug): read as absent rather than as something else.
            _ => Pick::default(),
        }
    }

    /// As `params.get(name)` returns it, from the parameter text.
    fn read(self, raw: &[u8]) -> Option<Option<&[u8]>> {
        match self {
            Pick { start: 0, end: 0 } => None,
            Pick::FLAG => Some(None),
            Pick { start, end } => raw.get(start as usize..end as usize).map(Some),
        }
    }
}

/// RFC 3261 §8.1.1.7: branches that start with this cookie were built by RFC 3261 elements.
pub const MAGIC_COOKIE: &str = "z9hG4bK";

/// Whether a branch carries the RFC 3261 magic cookie with something after it. A bare cookie
/// is not a usable transaction id (RFC 4475 §3.2.1).
pub fn is_rfc3261_branch(branch: &str) -> bool {
    branch.len() > MAGIC_COOKIE.len() && branch.starts_with(MAGIC_COOKIE)
}

impl<'a> Via<'a> {
    /// Parses one Via value (the list has already been split at top-level commas).
    pub fn parse(s: &'a [u8]) -> Result<Via<'a>, ValueError> {
        match Self::parse_plain(s) {
            Some(via) => Ok(via),
            None => Self::parse_general(s),
        }
    }

    /// [`Via::parse`] of any value.
    fn parse_general(s: &'a [u8]) -> Result<Via<'a>, ValueError> {
        let (protocol_name, protocol_version, transport, j) = match s {
            // What every SIP element sends, read without the token and SWS scans below, which
            // give the same parts for it. They stay views of `s`: the message's memo (module
            // `checked`) keeps them as ranges of the buffer.
            [b'S', b'I', b'P', b'/', b'2', b'.', b'0', b'/', a, b, c, b' ', ..]
                if [a, b, c].iter().all(|t| t.is_ascii_uppercase()) =>
            {
                // A three-letter transport (UDP, TCP, TLS) and the SP after it.
                (scan::ascii_str(&s[..3]), scan::ascii_str(&s[4..7]), scan::ascii_str(&s[8..11]), 11)
            }
            [b'S', b'I', b'P', b'/', b'2', b'.', b'0', b'/', ..] => {
                let (transport, j) = token(s, scan::skip_lws(s, 8), "bad transport")?;
                (scan::ascii_str(&s[..3]), scan::ascii_str(&s[4..7]), transport, j)
            }
            _ => {
                let i = scan::skip_lws(s, 0);
                let (name, j) = token(s, i, "bad protocol name")?;
                let i = slash(s, j)?;
                let (version, j) = token(s, i, "bad protocol version")?;
                let (transport, j) = token(s, slash(s, j)?, "bad transport")?;
                (name, version, transport, j)
            }
        };
        let i = lex::skip_lws(s, j);
        if i == j {
            return Err(ValueError::at(i, "missing whitespace before sent-by"));
        }
        let sent_by_end = sent_by_end(s, i);
        let (host, port) = parse_host_port(&s[i..sent_by_end]).map_err(|e| ValueError::at(i + e.offset, e.reason))?;
        // The first parameter of each name decides, as `params.get(name)` would. The length
        // picks the one name to compare.
        let mut branch: Option<Option<&[u8]>> = None;
        let (mut rport, mut received, mut maddr) = (None, None, None);
        let (params, end) = Params::parse_visiting(s, sent_by_end, |name, value| {
            let slot = match name.len() {
                6 if name.eq_ignore_ascii_case(b"branch") => &mut branch,
                5 if name.eq_ignore_ascii_case(b"rport") => &mut rport,
                5 if name.eq_ignore_ascii_case(b"maddr") => &mut maddr,
                8 if name.eq_ignore_ascii_case(b"received") => &mut received,
                _ => return,
            };
            if slot.is_none() {
                *slot = Some(value);
            }
        })?;
        let raw = params.raw();
        let pick = |p: Option<Option<&[u8]>>| p.map_or(Pick::default(), |v| Pick::of(raw, v));
        let found = ViaParams { rport: pick(rport), received: pick(received), maddr: pick(maddr) };
        if end != s.len() {
            return Err(ValueError::at(end, "unexpected text after Via parameters"));
        }
        // RFC 3261 §20.42: the branch is a token. A quoted value is tolerated, but one that is
        // not even UTF-8 is refused here: as text it would not be a view of the message (the
        // memo of module `checked` keeps the branch as a range of the buffer).
        let branch = match branch.flatten() {
            Some(b) => Some(scan::utf8(b).map_err(|_| ValueError::at(sent_by_end, "branch is not UTF-8"))?),
            None => None,
        };
        Ok(Via { protocol_name, protocol_version, transport, host, port, params, branch, found })
    }

    /// The Via of nearly every element, read in one pass (see [`PlainVia::read`]).
    fn parse_plain(s: &'a [u8]) -> Option<Via<'a>> {
        PlainVia::read(s).map(|plain| plain.view(s))
    }

    /// A Via from parts a parse found earlier (the message's memo, module `checked`).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn from_parts(
        protocol_name: &'a str,
        protocol_version: &'a str,
        transport: &'a str,
        host: Host<'a>,
        port: Option<u16>,
        params: Params<'a>,
        branch: Option<&'a str>,
        found: ViaParams,
    ) -> Via<'a> {
        Via { protocol_name, protocol_version, transport, host, port, params, branch, found }
    }

    /// The parameters [`Via::parse`] picked out (for the message's memo, module `checked`).
    pub(crate) fn found(&self) -> ViaParams {
        self.found
    }

    /// The value of the first `branch` parameter (`None` if absent or a bare flag).
    pub fn branch(&self) -> Option<&'a str> {
        self.branch
    }

    /// Whether the branch carries the RFC 3261 magic cookie with something after it. A bare
    /// cookie is not a usable transaction id (RFC 4475 §3.2.1).
    pub fn has_rfc3261_branch(&self) -> bool {
        self.branch().is_some_and(is_rfc3261_branch)
    }

    /// The first `received` value, as `params.get("received")` reads it.
    pub fn received(&self) -> Option<&'a str> {
        self.found.received.read(self.params.raw()).flatten().map(scan::ascii_str)
    }

    /// `None`: no rport; `Some(None)`: rport requested (RFC 3581 §3); `Some(Some(p))`: filled in.
    pub fn rport(&self) -> Option<Option<u16>> {
        self.found.rport(self.params.raw())
    }

    /// The first `maddr` value, as `params.get("maddr")` reads it.
    pub fn maddr(&self) -> Option<&'a str> {
        self.found.maddr.read(self.params.raw()).flatten().map(scan::ascii_str)
    }

    pub fn ttl(&self) -> Option<u8> {
        self.params.get("ttl").flatten().and_then(|v| v.parse().ok())
    }
}

/// The Via of nearly every element, `SIP/2.0/UDP 192.0.2.1:5060;branch=z9hG4bK...;rport`, as
/// places in its text: a three-letter transport, an IPv4 sent-by with or without a port, then
/// `;name` or `;name=value` parameters of token and value characters without white space or
/// quotes. The message's memo (module `checked`) keeps these places as they are, without
/// making a [`Via`] and finding its parts in the buffer again (callgrind: about 130
/// instructions per message).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct PlainVia {
    pub addr: Ipv4Addr,
    pub port: Option<u16>,
    /// Where the parameters start (at a `;`, or the end of the value when there are none).
    pub params_at: usize,
    /// Where the value of the first `branch` is (a flag reads as no branch).
    pub branch: Option<(usize, usize)>,
    pub found: ViaParams,
}

impl PlainVia {
    /// Reads `s` in one pass; `None` for anything else, which the general parse then reads,
    /// with the same result for what this accepts (test `plain_vias_read_as_the_general_parse`).
    /// The general parse costs about 870 instructions for such a value (sent-by through the
    /// URI host grammar, parameters through the generic list walk), a proxied call reads six.
    pub(crate) fn read(s: &[u8]) -> Option<PlainVia> {
        let mut plain = None;
        match Self::read_prefix(s, &mut plain) {
            Some(end) if end == s.len() => plain,
            _ => None,
        }
    }

    /// [`PlainVia::read`] of the plain value that starts `s` and ends at its end or at a `,`
    /// (the first value of a Via line, which the header scan splits: module
    /// `message::via_split`): where it ends, the value written into `out` (in place: a
    /// `PlainVia` is 64 octets, returned it was copied twice more). What it reads of
    /// `s[..end]` is what `read` reads of that value alone: the runs it makes stop at a `,`
    /// as at the end of the text (test `a_plain_prefix_reads_as_the_value_alone`).
    #[inline(never)]
    pub(crate) fn read_prefix(s: &[u8], out: &mut Option<PlainVia>) -> Option<usize> {
        // The protocol and sent-by as a recent Via of this thread started (module
        // `sent_by_memo`), else read.
        let (addr, port, sent_by_end) = match sent_by_memo::recall(s) {
            Some(known) => known,
            None => Self::read_sent_by(s)?,
        };
        // Parameters up to the end of the value, each `;` token [`=` value].
        let mut branch: Option<Option<(usize, usize)>> = None;
        let (mut rport, mut received, mut maddr) = (None, None, None);
        let mut j = sent_by_end;
        // A first parameter `;branch=` and its value, as nearly every Via starts its parameters,
        // read as the walk below reads it (the same checks, the same slot) without its name
        // run, compares and value picks; a Via with nothing after it (as SIPp and herald write
        // them) ends here (callgrind: about 40 instructions per Via).
        if branch_word_at(s, j) {
            let value_end = lex::run(s, j + 8, lex::VALUE);
            if value_end == j + 8 {
                return None;
            }
            branch = Some(Some((j + 8, value_end)));
            j = value_end;
            if matches!(s.get(j), None | Some(b',')) {
                let found = ViaParams::default();
                *out = Some(PlainVia { addr, port, params_at: sent_by_end, branch: Some((sent_by_end + 8, j)), found });
                return Some(j);
            }
            // Then a lone `;rport` flag, as herald writes its own Via (the top Via of every
            // response it gets back), read as the walk below reads it: the first `rport`, a
            // flag (callgrind: the walk's name run and compares, about 40 instructions).
            if rport_flag_at(s, j) && matches!(s.get(j + 6), None | Some(b',')) {
                let found = ViaParams { rport: Pick::FLAG, ..ViaParams::default() };
                *out = Some(PlainVia { addr, port, params_at: sent_by_end, branch: Some((sent_by_end + 8, j)), found });
                return Some(j + 6);
            }
        }
        while j < s.len() {
            if s[j] != b';' {
                // The end of the first value of several.
                if s[j] == b',' {
                    break;
                }
                return None;
            }
            let name_end = match branch_word_at(s, j) {
                true => j + 7,
                false => lex::token_end(s, j + 1),
            };
            if name_end == j + 1 {
                return None;
            }
            let name = &s[j + 1..name_end];
            let value = match s.get(name_end) {
                Some(b'=') => {
                    j = lex::run(s, name_end + 1, lex::VALUE);
                    if j == name_end + 1 {
                        return None;
                    }
                    Some((name_end + 1, j))
                }
                _ => {
                    j = name_end;
                    None
                }
            };
            let slot = if letters_are(name, b"branch") {
                &mut branch
            } else if letters_are(name, b"rport") {
                &mut rport
            } else if letters_are(name, b"maddr") {
                &mut maddr
            } else if letters_are(name, b"received") {
                &mut received
            } else {
                continue;
            };
            if slot.is_none() {
                *slot = Some(value);
            }
        }
        // Offsets in the parameter text, which starts with `;`: no value starts at 0.
        let pick = |p: Option<Option<(usize, usize)>>| match p {
            None => Pick::default(),
            Some(None) => Pick::FLAG,
            Some(Some((start, end))) => Pick { start: (start - sent_by_end) as u32, end: (end - sent_by_end) as u32 },
        };
        let found = ViaParams { rport: pick(rport), received: pick(received), maddr: pick(maddr) };
        *out = Some(PlainVia { addr, port, params_at: sent_by_end, branch: branch.flatten(), found });
        Some(j)
    }

    /// The sent-protocol and sent-by that start `s` (`SIP/2.0/` and a transport of three
    /// upper-case letters, an IPv4 address, an optional port), when an octet that may end a
    /// plain sent-by follows: the address, the port and where the sent-by ends, kept for the
    /// next Vias of this thread (module `sent_by_memo`).
    #[inline(never)]
    fn read_sent_by(s: &[u8]) -> Option<(Ipv4Addr, Option<u16>, usize)> {
        // "SIP/2.0/" as one word, then the transport's three letters and the SP.
        let version = s.first_chunk::<8>().map(|w| u64::from_le_bytes(*w));
        let Some(&[a, b, c, b' ', first]) = s.get(8..13).and_then(|t| t.first_chunk::<5>()) else { return None };
        if version != Some(u64::from_le_bytes(*b"SIP/2.0/"))
            || ![a, b, c].iter().all(u8::is_ascii_uppercase)
            || !first.is_ascii_digit()
        {
            return None;
        }
        // The sent-by read from where it starts, its end where the address and port do: sent-by
        // ends at the first `;`, CR, SP or HT, and neither an address nor a port holds one, so
        // it is the same place as a search for those would find, without the search
        // (callgrind: about 35 instructions per Via).
        let (addr, len) = ipv4_prefix(&s[12..])?;
        let mut sent_by_end = 12 + len;
        let port = match s.get(sent_by_end) {
            Some(b':') => {
                let from = sent_by_end + 1;
                let (port, digits) = port_prefix(s.get(from..)?)?;
                sent_by_end = from + digits;
                Some(port)
            }
            _ => None,
        };
        if !sent_by_memo::ends_sent_by(s.get(sent_by_end)) {
            return None;
        }
        sent_by_memo::remember(s, addr, port, sent_by_end);
        Some((addr, port, sent_by_end))
    }

    /// The [`Via`] of `s`, the text this was read from.
    fn view(self, s: &[u8]) -> Via<'_> {
        Via {
            protocol_name: scan::ascii_str(&s[..3]),
            protocol_version: scan::ascii_str(&s[4..7]),
            transport: scan::ascii_str(&s[8..11]),
            host: Host::Ipv4(self.addr),
            port: self.port,
            params: Params::from_raw(&s[self.params_at..]),
            // Value characters are ASCII.
            branch: self.branch.map(|(start, end)| scan::ascii_str(&s[start..end])),
            found: self.found,
        }
    }
}

/// Whether `s[j..]` starts with `;branch=`, the letters in any case, read as one word (`b | 0x20`
/// is a lower-case letter exactly for that letter and its upper case; `;` and `=` are compared
/// as they are): where a parameter name's token run would stop at the `=` (callgrind: the run
/// and the name's compare cost about 30 instructions per Via).
#[inline(always)]
fn branch_word_at(s: &[u8], j: usize) -> bool {
    const BRANCH: u64 = u64::from_le_bytes(*b";branch=");
    const LETTERS: u64 = u64::from_le_bytes([0, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0]);
    s.get(j..).and_then(|t| t.first_chunk::<8>()).is_some_and(|word| u64::from_le_bytes(*word) | LETTERS == BRANCH)
}

/// Whether `s[j..]` starts with `;rport`, the letters in any case (see [`branch_word_at`]).
#[inline(always)]
fn rport_flag_at(s: &[u8], j: usize) -> bool {
    const RPORT: u64 = u64::from_le_bytes(*b";rport\0\0");
    const LETTERS: u64 = u64::from_le_bytes([0, 0x20, 0x20, 0x20, 0x20, 0x20, 0, 0]);
    const SIX: u64 = 0xFFFF_FFFF_FFFF;
    s.get(j..j + 6).is_some_and(|w| {
        let mut word = [0u8; 8];
        word[..6].copy_from_slice(w);
        (u64::from_le_bytes(word) | LETTERS) & SIX == RPORT
    })
}

/// A Via port: one to five digits at the start of `s` that fit in 16 bits, read as they are
/// counted (the general parse takes more leading zeros; such a value is left to it), and how
/// many there are. `None` for no digit, a sixth one or a value over 65535.
#[inline(always)]
fn port_prefix(s: &[u8]) -> Option<(u16, usize)> {
    match s.first_chunk::<6>() {
        // The places read are 0 to 5, inside the window: no bounds test at each (callgrind:
        // about 15 instructions per Via, six Vias per proxied call).
        Some(window) => port_at(|i| window.get(i).copied()),
        None => port_at(|i| s.get(i).copied()),
    }
}

/// [`port_prefix`] over the octet at each place (`None` past the end).
#[inline(always)]
fn port_at(at: impl Fn(usize) -> Option<u8>) -> Option<(u16, usize)> {
    let mut port = 0u32;
    for i in 0..6 {
        match at(i) {
            Some(d) if d.is_ascii_digit() => {
                if i == 5 {
                    return None;
                }
                port = port * 10 + u32::from(d - b'0');
            }
            _ if i == 0 => return None,
            _ => return Some((u16::try_from(port).ok()?, i)),
        }
    }
    None
}

/// Whether `name` is `lower`, a word of lower-case letters, in any case: `b | 0x20` equals a
/// lower-case letter exactly for that letter and its upper case, and the fixed length lets the
/// compiler compare whole words (`eq_ignore_ascii_case` maps each octet through a call).
#[inline(always)]
fn letters_are<const N: usize>(name: &[u8], lower: &[u8; N]) -> bool {
    debug_assert!(lower.iter().all(u8::is_ascii_lowercase));
    match <&[u8; N]>::try_from(name) {
        Ok(name) => name.iter().zip(lower).fold(true, |same, (a, b)| same & (a | 0x20 == *b)),
        Err(_) => false,
    }
}

fn token<'a>(s: &'a [u8], i: usize, what: &'static str) -> Result<(&'a str, usize), ValueError> {
    let e = lex::token_end(s, i);
    if e == i {
        return Err(ValueError::at(i, what));
    }
    Ok((scan::ascii_str(&s[i..e]), e))
}

/// `SLASH = SWS "/" SWS`
fn slash(s: &[u8], i: usize) -> Result<usize, ValueError> {
    let i = scan::skip_lws(s, i);
    if s.get(i) != Some(&b'/') {
        return Err(ValueError::at(i, "expected '/' in sent-protocol"));
    }
    Ok(scan::skip_lws(s, i + 1))
}

/// sent-by ends at `;`, LWS or the end; an IPv6 reference may contain `:` but never those.
/// (`COLON = SWS ":" SWS` would allow LWS around the port colon; no implementation sends it and
/// accepting it would make `host ;param` ambiguous, so sent-by is kept contiguous.)
fn sent_by_end(s: &[u8], i: usize) -> usize {
    lex::find_any(s, i, [b';', b'\r', b' ', b'\t']).unwrap_or(s.len())
}

#[cfg(test)]
mod tests;
