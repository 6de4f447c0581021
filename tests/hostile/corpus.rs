//! A deterministic corpus of malformed SIP messages: mutations of valid seed messages (and of
//! the RFC 4475 torture messages when present), each labelled with the mutation that made it.
//!
//! Same seed, same inputs → same corpus, byte for byte: a failure names a mutant that can be
//! generated again (`Corpus::generate` with the seed the test prints).

use std::fmt::Write as _;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

/// xorshift64* (Vigna): small, fast and good enough to pick mutations; never zero.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed.max(1))
    }

    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// Uniform in `0..n` (n > 0), close enough for picking mutations.
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }

    pub fn chance(&mut self, percent: usize) -> bool {
        self.below(100) < percent
    }

    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }

    /// One of `words`.
    pub fn word(&mut self, words: &[&'static str]) -> &'static str {
        words[self.below(words.len())]
    }

    pub fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.next_u64() as u8).collect()
    }
}

/// One malformed message and how it was made.
#[derive(Clone, Debug)]
pub struct Mutant {
    /// The mutation (`truncate`, `cl-negative`, `bare-lf+truncate`, ...), for reports.
    pub kind: String,
    /// The seed message it was made from (`invite`, `torture/esc01`, ...).
    pub seed: String,
    /// What replaced [`UNIQUE`] in its seed: its Call-ID is `<seed name>-<token>@hostile`.
    pub token: String,
    pub bytes: Vec<u8>,
}

impl Mutant {
    /// The first `max` bytes, printable: for failure messages.
    pub fn preview(&self, max: usize) -> String {
        escape(&self.bytes[..self.bytes.len().min(max)])
    }
}

/// `bytes` with CR, LF, non-ASCII and control bytes escaped (`\r`, `\n`, `\xNN`).
pub fn escape(bytes: &[u8]) -> String {
    let mut s = String::with_capacity(bytes.len());
    for &b in bytes {
        match b {
            b'\r' => s.push_str("\\r"),
            b'\n' => s.push_str("\\n\n"),
            b'\\' => s.push_str("\\\\"),
            0x20..=0x7e => s.push(b as char),
            _ => {
                let _ = write!(s, "\\x{b:02x}");
            }
        }
    }
    s
}

/// Where the messages go and come from: herald's address, the sender's address (its Via and
/// Contact: answers to well-formed mutants come back there), the user whose registered contact
/// takes the forwarded calls, and the largest message the transport can carry.
#[derive(Clone, Debug)]
pub struct Target {
    pub herald: SocketAddr,
    pub sender: SocketAddr,
    /// "UDP", "TCP" (later "TLS"): the Via transport of the seeds.
    pub via_transport: &'static str,
    /// A user registered at a UDP contact that answers (forwarded mutants reach it).
    pub callee: String,
    /// The same at a TCP contact: what herald forwards there must frame on a stream.
    pub callee_tcp: String,
    /// Largest mutant: 65,507 for UDP over IPv4 (larger datagrams cannot be sent at all).
    pub max_len: usize,
}

/// Replaced in every seed by a token unique to the mutant (branch, Call-ID, From tag): else
/// every well-formed mutant of a seed after the first would be a retransmission of the first
/// (RFC 3261 §17.2.3) and never reach the proxy core.
pub const UNIQUE: &str = "~uniq~";

/// The valid messages every mutation starts from.
pub fn seeds(t: &Target) -> Vec<(String, Vec<u8>)> {
    let (h, s, tr, callee, callee_tcp) = (t.herald, t.sender, t.via_transport, &t.callee, &t.callee_tcp);
    let sdp = "v=0\r\no=- 1 1 IN IP4 127.0.0.1\r\ns=-\r\nc=IN IP4 127.0.0.1\r\nt=0 0\r\nm=audio 9 RTP/AVP 0\r\n";
    let common = |method: &str, ruri: &str, to: &str, id: &str, cseq: u32| {
        format!(
            "{method} {ruri} SIP/2.0\r\n\
             Via: SIP/2.0/{tr} {s};branch=z9hG4bK-{id}-{UNIQUE}-{method};rport\r\n\
             Max-Forwards: 70\r\n\
             From: \"Hostile\" <sip:hostile@{s}>;tag=h-{id}-{UNIQUE}\r\n\
             To: {to}\r\n\
             Call-ID: {id}-{UNIQUE}@hostile\r\n\
             CSeq: {cseq} {method}\r\n"
        )
    };
    let mut out = Vec::new();
    let register = common("REGISTER", &format!("sip:{h}"), &format!("<sip:hostile@{h}>"), "reg", 1)
        + &format!("Contact: <sip:hostile@{s}>;expires=60\r\nExpires: 60\r\nContent-Length: 0\r\n\r\n");
    out.push(("register".into(), register));
    let invite = common("INVITE", &format!("sip:{callee}@{h}"), &format!("<sip:{callee}@{h}>"), "inv", 1)
        + &format!(
            "Contact: <sip:hostile@{s}>\r\nContent-Type: application/sdp\r\nContent-Length: {}\r\n\r\n{sdp}",
            sdp.len()
        );
    out.push(("invite".into(), invite));
    let invite_tcp = common("INVITE", &format!("sip:{callee_tcp}@{h}"), &format!("<sip:{callee_tcp}@{h}>"), "invt", 1)
        + "Contact: <sip:hostile@127.0.0.1:9>\r\nSubject: to a TCP contact\r\nContent-Length: 0\r\n\r\n";
    out.push(("invite-tcp-callee".into(), invite_tcp));
    let options = common("OPTIONS", &format!("sip:{h}"), &format!("<sip:{h}>"), "opt", 1)
        + "Accept: application/sdp\r\nContent-Length: 0\r\n\r\n";
    out.push(("options".into(), options));
    let bye = common("BYE", &format!("sip:{callee}@{h}"), &format!("<sip:{callee}@{h}>;tag=callee-1"), "bye", 2)
        + &format!("Route: <sip:{h};lr>\r\nContent-Length: 0\r\n\r\n");
    out.push(("bye".into(), bye));
    let ok = format!(
        "SIP/2.0 200 OK\r\n\
         Via: SIP/2.0/{tr} {h};branch=z9hG4bK-not-herald-s\r\n\
         Via: SIP/2.0/{tr} {s};branch=z9hG4bK-ok-{UNIQUE};rport\r\n\
         From: <sip:hostile@{s}>;tag=h-ok\r\n\
         To: <sip:{callee}@{h}>;tag=callee-ok\r\n\
         Call-ID: ok-{UNIQUE}@hostile\r\n\
         CSeq: 1 INVITE\r\n\
         Contact: <sip:{callee}@{s}>\r\n\
         Content-Length: 0\r\n\r\n"
    );
    out.push(("200".into(), ok));
    out.into_iter().map(|(n, m)| (n, m.into_bytes())).collect()
}

/// The RFC 4475 messages: `HERALD_TORTURE_DIR/rfc4475/*.dat`, else
/// `../shared/testdata/sip-torture/rfc4475` next to the repository (empty if neither exists).
pub fn torture() -> (Option<PathBuf>, Vec<(String, Vec<u8>)>) {
    let dir = std::env::var("HERALD_TORTURE_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|_| Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/testdata/sip-torture"))
        .join("rfc4475");
    let Ok(entries) = std::fs::read_dir(&dir) else { return (None, Vec::new()) };
    let mut files: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "dat"))
        .collect();
    files.sort();
    let msgs = files
        .iter()
        .filter_map(|p| {
            let name = p.file_stem()?.to_string_lossy().into_owned();
            Some((format!("torture/{name}"), std::fs::read(p).ok()?))
        })
        .collect();
    (Some(dir), msgs)
}

/// A mutation: the seed in, the mutant out (`None`: not applicable to this seed).
type Mutation = fn(&mut Rng, &[u8], &Target) -> Option<Vec<u8>>;

/// Every mutation, by name. The corpus cycles through them so each is used about equally.
pub const MUTATIONS: &[(&str, Mutation)] = &[
    ("as-is", |_, m, _| Some(m.to_vec())),
    ("truncate", truncate),
    ("truncate-head", truncate_head),
    ("oversized-body", oversized_body),
    ("huge-header-line", huge_header_line),
    ("many-headers", many_headers),
    ("many-vias", many_vias),
    ("many-routes", many_routes),
    ("duplicate-header", duplicate_header),
    ("two-content-lengths", two_content_lengths),
    ("two-call-ids", two_call_ids),
    ("cseq-method-mismatch", cseq_mismatch),
    ("bad-escape", bad_escape),
    ("cl-negative", |r, m, _| Some(set_content_length(m, r.word(&["-1", "-0", "-2147483648", "- 5"])))),
    ("cl-huge", |r, m, _| {
        Some(set_content_length(m, r.word(&["4294967296", "99999999999999999999999", "65536", "2147483647"])))
    }),
    ("cl-non-numeric", |r, m, _| Some(set_content_length(m, r.word(&["abc", "", "0x10", "1e3", "5 5", "+5", "٣"])))),
    ("cl-too-short", cl_too_short),
    ("cl-too-long", cl_too_long),
    ("no-content-length", |_, m, _| Some(remove_headers(m, "Content-Length", "l"))),
    ("binary-junk", |r, _, t| {
        let n = 1 + r.below(t.max_len.min(4096));
        Some(r.bytes(n))
    }),
    ("junk-inserted", junk_inserted),
    ("nul-bytes", nul_bytes),
    ("bare-lf", |_, m, _| Some(replace_all(m, b"\r\n", b"\n"))),
    ("bare-cr", |_, m, _| Some(replace_all(m, b"\r\n", b"\r"))),
    ("mixed-line-ends", mixed_line_ends),
    ("non-utf8", non_utf8),
    ("max-forwards", |r, m, _| {
        let v = *r.pick(&["99999999999999999999", "256", "0", "-1", "7 0", "", "seventy"]);
        Some(set_header(m, "Max-Forwards", v))
    }),
    ("unknown-scheme", unknown_scheme),
    ("start-line", start_line),
    ("header-syntax", header_syntax),
    ("via-garbage", via_garbage),
    ("long-tokens", long_tokens),
    ("byte-flips", byte_flips),
    ("two-in-one", two_in_one),
    ("folding", folding),
    ("contact-storm", contact_storm),
];

/// The corpus: `count` mutants, mutation `i % MUTATIONS.len()` for the `i`-th (one in five
/// then gets a second, random one); the seed is one of `own` three times in four, else one of
/// `extra` (the torture messages: they name hosts herald does not serve, so their mutants
/// rarely reach the proxy's forwarding). Mutants longer than `target.max_len` are cut to it.
pub fn generate(
    seed: u64,
    count: usize,
    own: &[(String, Vec<u8>)],
    extra: &[(String, Vec<u8>)],
    target: &Target,
) -> Vec<Mutant> {
    assert!(!own.is_empty());
    let mut rng = Rng::new(seed);
    let mut out = Vec::with_capacity(count);
    let mut i = 0usize;
    while out.len() < count {
        let (first, mutate) = MUTATIONS[i % MUTATIONS.len()];
        let mut kind = first.to_owned();
        i += 1;
        let seeds = if extra.is_empty() || rng.chance(75) { own } else { extra };
        let (name, msg) = rng.pick(seeds);
        let token = format!("{seed:x}.{i}");
        let msg = replace_all(msg, UNIQUE.as_bytes(), token.as_bytes());
        let Some(mut bytes) = mutate(&mut rng, &msg, target) else { continue };
        if rng.chance(20) {
            let (second, again) = *rng.pick(MUTATIONS);
            if let Some(b) = again(&mut rng, &bytes, target) {
                bytes = b;
                kind = format!("{first}+{second}");
            }
        }
        if bytes.is_empty() {
            bytes.push(b'\n');
        }
        bytes.truncate(target.max_len);
        out.push(Mutant { kind, seed: name.clone(), token, bytes });
    }
    out
}

// --- helpers -----------------------------------------------------------------------------

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// The end of the header section (the index of the empty line's CRLF), or the message length.
fn head_end(m: &[u8]) -> usize {
    find(m, b"\r\n\r\n").map_or(m.len(), |i| i + 2)
}

fn replace_all(m: &[u8], from: &[u8], to: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(m.len());
    let mut i = 0;
    while i < m.len() {
        if m[i..].starts_with(from) {
            out.extend_from_slice(to);
            i += from.len();
        } else {
            out.push(m[i]);
            i += 1;
        }
    }
    out
}

/// Header lines (without CRLF) as byte ranges, and where the header section ends.
fn lines(m: &[u8]) -> Vec<(usize, usize)> {
    let end = head_end(m);
    let mut out = Vec::new();
    let mut start = 0;
    while start < end {
        let stop = find(&m[start..end], b"\r\n").map_or(end, |i| start + i);
        out.push((start, stop));
        start = stop + 2;
    }
    out
}

fn name_is(line: &[u8], name: &str, compact: &str) -> bool {
    let Some(colon) = line.iter().position(|b| *b == b':') else { return false };
    let n = String::from_utf8_lossy(&line[..colon]).trim().to_ascii_lowercase();
    n == name.to_ascii_lowercase() || (!compact.is_empty() && n == compact)
}

/// Inserts `text` (with CRLF) as a header line just before the empty line.
fn insert_header(m: &[u8], text: &str) -> Vec<u8> {
    let at = head_end(m);
    let mut out = m[..at].to_vec();
    out.extend_from_slice(text.as_bytes());
    out.extend_from_slice(b"\r\n");
    out.extend_from_slice(&m[at..]);
    out
}

/// Replaces the value of every `name` header (or adds one) with `value`.
fn set_header(m: &[u8], name: &str, value: &str) -> Vec<u8> {
    let compact = match name {
        "Content-Length" => "l",
        "Call-ID" => "i",
        "Via" => "v",
        _ => "",
    };
    let mut out = Vec::with_capacity(m.len() + value.len());
    let mut found = false;
    let mut last = 0;
    for (a, b) in lines(m) {
        if name_is(&m[a..b], name, compact) {
            out.extend_from_slice(&m[last..a]);
            out.extend_from_slice(format!("{name}: {value}").as_bytes());
            last = b;
            found = true;
        }
    }
    out.extend_from_slice(&m[last..]);
    if found {
        out
    } else {
        insert_header(m, &format!("{name}: {value}"))
    }
}

/// Removes every `name` (or `compact`) header line.
fn remove_headers(m: &[u8], name: &str, compact: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(m.len());
    let mut last = 0;
    for (a, b) in lines(m) {
        if name_is(&m[a..b], name, compact) {
            out.extend_from_slice(&m[last..a]);
            last = (b + 2).min(m.len());
        }
    }
    out.extend_from_slice(&m[last..]);
    out
}

fn set_content_length(m: &[u8], v: &str) -> Vec<u8> {
    set_header(m, "Content-Length", v)
}

fn body_len(m: &[u8]) -> usize {
    m.len() - (head_end(m) + 2).min(m.len())
}

// --- mutations ---------------------------------------------------------------------------

fn truncate(r: &mut Rng, m: &[u8], _: &Target) -> Option<Vec<u8>> {
    Some(m[..r.below(m.len().max(1))].to_vec())
}

/// Cut inside the header section: a message whose end never comes (streams wait for it).
fn truncate_head(r: &mut Rng, m: &[u8], _: &Target) -> Option<Vec<u8>> {
    let end = head_end(m).max(2);
    Some(m[..1 + r.below(end - 1)].to_vec())
}

fn oversized_body(r: &mut Rng, m: &[u8], t: &Target) -> Option<Vec<u8>> {
    let head = head_end(m) + 2;
    let size = *r.pick(&[8 * 1024, 60 * 1024, 65_536, 70 * 1024, 200 * 1024]);
    let size = size.min(t.max_len.saturating_sub(head + 40));
    let honest = r.chance(50);
    let mut out = set_content_length(&m[..head.min(m.len())], &size.to_string());
    if !honest {
        out = set_content_length(&out, &(size / 2).to_string());
    }
    out.extend(std::iter::repeat_n(b'x', size));
    Some(out)
}

fn huge_header_line(r: &mut Rng, m: &[u8], t: &Target) -> Option<Vec<u8>> {
    let size = (*r.pick(&[8_193, 16 * 1024, 70 * 1024])).min(t.max_len.saturating_sub(m.len() + 16));
    let name = *r.pick(&["Subject", "X-Huge", "Via", "To", "Call-ID", "Contact"]);
    let fill = if name == "Via" {
        format!("SIP/2.0/UDP {};branch=z9hG4bK{}", t.sender, "a".repeat(size))
    } else {
        "a".repeat(size)
    };
    Some(insert_header(m, &format!("{name}: {fill}")))
}

fn many_headers(r: &mut Rng, m: &[u8], t: &Target) -> Option<Vec<u8>> {
    let want = *r.pick(&[129, 1_000, 10_000]);
    let line = "X-H: v\r\n";
    let n = want.min(t.max_len.saturating_sub(m.len()) / line.len());
    let at = head_end(m);
    let mut out = m[..at].to_vec();
    out.extend(line.as_bytes().repeat(n));
    out.extend_from_slice(&m[at..]);
    Some(out)
}

fn many_vias(r: &mut Rng, m: &[u8], t: &Target) -> Option<Vec<u8>> {
    let want = *r.pick(&[71, 200, 1_000]);
    let one_line = r.chance(50);
    let via = format!("SIP/2.0/UDP 192.0.2.1:5060;branch=z9hG4bK{}", r.below(1 << 20));
    let at = head_end(m);
    let mut out = m[..at].to_vec();
    if one_line {
        let list = vec![via.as_str(); want].join(", ");
        out.extend(format!("Via: {list}\r\n").into_bytes());
    } else {
        for _ in 0..want {
            out.extend(format!("Via: {via}\r\n").into_bytes());
        }
    }
    out.truncate(t.max_len.saturating_sub(m.len() - at));
    out.extend_from_slice(&m[at..]);
    Some(out)
}

/// Route or Record-Route values past `limits.max_route` (issue 16: 1,000 Route headers were
/// dropped unanswered; herald answers 400 when the identifying headers can be read).
fn many_routes(r: &mut Rng, m: &[u8], t: &Target) -> Option<Vec<u8>> {
    let want = *r.pick(&[65, 300, 1_000]);
    let name = *r.pick(&["Route", "Record-Route"]);
    let route = format!("<sip:{}.example.com;lr>", r.word(&["p1", "p2", "edge", "core"]));
    let at = head_end(m);
    let mut out = m[..at].to_vec();
    if r.chance(50) {
        out.extend(format!("{name}: {}\r\n", vec![route.as_str(); want].join(", ")).into_bytes());
    } else {
        for _ in 0..want {
            out.extend(format!("{name}: {route}\r\n").into_bytes());
        }
    }
    out.truncate(t.max_len.saturating_sub(m.len() - at));
    out.extend_from_slice(&m[at..]);
    Some(out)
}

fn duplicate_header(r: &mut Rng, m: &[u8], _: &Target) -> Option<Vec<u8>> {
    let ls = lines(m);
    if ls.len() < 2 {
        return None;
    }
    let (a, b) = ls[1 + r.below(ls.len() - 1)];
    let mut line = String::from_utf8_lossy(&m[a..b]).into_owned();
    if r.chance(50) {
        // Conflicting rather than equal: change the value's last character.
        line.push('7');
    }
    Some(insert_header(m, &line))
}

fn two_content_lengths(r: &mut Rng, m: &[u8], _: &Target) -> Option<Vec<u8>> {
    let n = body_len(m);
    let other = [n, n + 1, n.saturating_sub(1), 0][r.below(4)];
    let name = *r.pick(&["Content-Length", "l", "content-length"]);
    Some(insert_header(m, &format!("{name}: {other}")))
}

fn two_call_ids(r: &mut Rng, m: &[u8], _: &Target) -> Option<Vec<u8>> {
    let name = *r.pick(&["Call-ID", "i"]);
    Some(insert_header(m, &format!("{name}: other-{}@hostile", r.below(1000))))
}

fn cseq_mismatch(r: &mut Rng, m: &[u8], _: &Target) -> Option<Vec<u8>> {
    let v = *r.pick(&["1 ACK", "1 BYE", "1 invite", "1 FOO", "99999999999 INVITE", "-1 INVITE", "1", "INVITE 1"]);
    Some(set_header(m, "CSeq", v))
}

fn bad_escape(r: &mut Rng, m: &[u8], _: &Target) -> Option<Vec<u8>> {
    let esc = *r.pick(&["%", "%G1", "%0", "%%", "%00", "%zz", "%4", "%C0%80", "%FF%FE"]);
    let text = String::from_utf8_lossy(m).into_owned();
    // Into the Request-URI user part, else the From URI.
    Some(
        match r.below(3) {
            0 => text.replacen("sip:", &format!("sip:a{esc}b"), 1),
            1 => text.replacen("<sip:", &format!("<sip:x{esc}@"), 1).replacen("@@", "@", 1),
            _ => text.replacen(";tag=", &format!(";tag={esc};x{esc}=y"), 1),
        }
        .into_bytes(),
    )
}

fn cl_too_short(r: &mut Rng, m: &[u8], _: &Target) -> Option<Vec<u8>> {
    let n = body_len(m);
    let mut out = set_content_length(m, &n.saturating_sub(1 + r.below(n.max(1))).to_string());
    if n == 0 {
        out.extend_from_slice(b"extra body bytes");
    }
    Some(out)
}

fn cl_too_long(r: &mut Rng, m: &[u8], _: &Target) -> Option<Vec<u8>> {
    let n = body_len(m);
    Some(set_content_length(m, &(n + 1 + r.below(5000)).to_string()))
}

fn junk_inserted(r: &mut Rng, m: &[u8], _: &Target) -> Option<Vec<u8>> {
    let mut out = m.to_vec();
    for _ in 0..1 + r.below(4) {
        let at = r.below(out.len() + 1);
        let n = 1 + r.below(64);
        let junk = r.bytes(n);
        out.splice(at..at, junk);
    }
    Some(out)
}

fn nul_bytes(r: &mut Rng, m: &[u8], _: &Target) -> Option<Vec<u8>> {
    let mut out = m.to_vec();
    for _ in 0..1 + r.below(8) {
        let at = r.below(out.len() + 1);
        if r.chance(50) && at < out.len() {
            out[at] = 0;
        } else {
            out.insert(at, 0);
        }
    }
    Some(out)
}

fn mixed_line_ends(r: &mut Rng, m: &[u8], _: &Target) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(m.len());
    let mut i = 0;
    while i < m.len() {
        if m[i..].starts_with(b"\r\n") {
            out.extend_from_slice(r.word(&["\r\n", "\n", "\r", "\n\r", "\r\r\n"]).as_bytes());
            i += 2;
        } else {
            out.push(m[i]);
            i += 1;
        }
    }
    Some(out)
}

fn non_utf8(r: &mut Rng, m: &[u8], _: &Target) -> Option<Vec<u8>> {
    let bad: &[&[u8]] = &[b"\xc0\x80", b"\xff", b"\xed\xa0\x80", b"\xf8\x88\x80\x80\x80", b"\xc3", b"\xe2\x82"];
    let mut out = m.to_vec();
    let end = head_end(m).max(1);
    for _ in 0..1 + r.below(4) {
        let at = r.below(end);
        out.splice(at..at, r.pick(bad).iter().copied());
    }
    Some(out)
}

fn unknown_scheme(r: &mut Rng, m: &[u8], _: &Target) -> Option<Vec<u8>> {
    let scheme = *r.pick(&["foo:", "tel:", "sips:", "http://", "urn:x:", "SIP:", "sip::", "mailto:", "x-\u{1}:", ":"]);
    let text = String::from_utf8_lossy(m).into_owned();
    let n = 1 + r.below(3);
    Some(text.replacen("sip:", scheme, n).into_bytes())
}

fn start_line(r: &mut Rng, m: &[u8], _: &Target) -> Option<Vec<u8>> {
    let end = find(m, b"\r\n")?;
    let first = String::from_utf8_lossy(&m[..end]).into_owned();
    let parts: Vec<&str> = first.split(' ').collect();
    let long = "A".repeat(8_200);
    let new = match r.below(9) {
        0 => first.to_ascii_lowercase(),
        1 => first.replace(' ', "   "),
        2 => first.replace("SIP/2.0", "SIP/3.0"),
        3 => format!("{} {}", parts[0], parts.get(1).unwrap_or(&"")),
        4 => format!("{long} sip:x@y SIP/2.0"),
        5 => "SIP/2.0 99 Too Small".into(),
        6 => "SIP/2.0 1000 Too Big".into(),
        7 => format!("{}\t{}", parts[0], parts[1..].join(" ")),
        _ => String::new(),
    };
    let mut out = new.into_bytes();
    out.extend_from_slice(&m[end..]);
    Some(out)
}

fn header_syntax(r: &mut Rng, m: &[u8], _: &Target) -> Option<Vec<u8>> {
    let junk = *r.pick(&[
        "NoColonHere",
        ": empty name",
        "Bad Name: x",
        "To : <sip:x@y>",
        "X-Ctl: a\u{7}b",
        "Content-Type: application/sdp; boundary=\"unterminated",
        "From: \"unterminated <sip:x@y>;tag=1",
        "Expires: 99999999999999999999",
        "Expires: -5",
        "Contact: <sip:x@y;expires=-1>;q=7",
        "Authorization: Digest username=\"a\", realm=\"\\\"",
        "Require: ",
        "Route: <sip:127.0.0.1:1;lr>, <>, <sip:",
    ]);
    Some(insert_header(m, junk))
}

fn via_garbage(r: &mut Rng, m: &[u8], t: &Target) -> Option<Vec<u8>> {
    let s = t.sender;
    let v = *r.pick(&[
        "SIP/2.0/UDP",
        "SIP/2.0/XYZ host;branch=z9hG4bKx",
        "SIP/2.0/UDP [::1;branch=z9hG4bKx",
        "SIP/2.0/UDP 127.0.0.1:0;branch=z9hG4bKx",
        "SIP/2.0/UDP 127.0.0.1:99999;branch=z9hG4bKx",
        "SIP/2.0/UDP 127.0.0.1;rport=99999;received=not-an-ip",
        "SIP/2.0/UDP 127.0.0.1;maddr=255.255.255.255;ttl=300",
        "SIP/2.0/UDP 127.0.0.1;branch=",
        "SIP/2.0/UDP 127.0.0.1;branch=z9hG4bK;branch=z9hG4bK2",
        "SIP/1.0/UDP 127.0.0.1",
        ";;;",
    ]);
    // Replace the whole Via set with this value, or put it on top.
    if r.chance(50) {
        Some(set_header(m, "Via", v))
    } else {
        let at = find(m, b"\r\n")? + 2;
        let mut out = m[..at].to_vec();
        out.extend(format!("Via: {v}\r\nVia: SIP/2.0/UDP {s};rport\r\n").into_bytes());
        out.extend_from_slice(&m[at..]);
        Some(out)
    }
}

fn long_tokens(r: &mut Rng, m: &[u8], _: &Target) -> Option<Vec<u8>> {
    let long = "z".repeat(*r.pick(&[1_000, 8_000, 8_193]));
    let text = String::from_utf8_lossy(m).into_owned();
    Some(
        match r.below(4) {
            0 => text.replacen("@hostile", &format!("@{long}"), 1),
            1 => text.replacen(";tag=", &format!(";tag={long}"), 1),
            2 => text.replacen("branch=z9hG4bK", &format!("branch=z9hG4bK{long}"), 1),
            _ => text.replacen("sip:", &format!("sip:{long}@"), 1),
        }
        .into_bytes(),
    )
}

fn byte_flips(r: &mut Rng, m: &[u8], _: &Target) -> Option<Vec<u8>> {
    let mut out = m.to_vec();
    if out.is_empty() {
        return None;
    }
    for _ in 0..1 + r.below(8) {
        let i = r.below(out.len());
        out[i] ^= 1 << r.below(8);
    }
    Some(out)
}

/// Two messages in one datagram (RFC 4475 dblreq) or a message and junk.
fn two_in_one(r: &mut Rng, m: &[u8], _: &Target) -> Option<Vec<u8>> {
    let mut out = m.to_vec();
    if r.chance(50) {
        out.extend_from_slice(m);
    } else {
        out.extend_from_slice(b"\r\n\r\nGARBAGE AFTER THE MESSAGE\r\n");
    }
    Some(out)
}

/// Header folding (continuation lines) where it is allowed and where it is not.
fn folding(r: &mut Rng, m: &[u8], _: &Target) -> Option<Vec<u8>> {
    let fold = *r.pick(&["\r\n ", "\r\n\t", "\r\n \r\n ", "\r\n"]);
    let text = String::from_utf8_lossy(m).into_owned();
    let at = *r.pick(&[": ", ";", ", ", " SIP/2.0"]);
    Some(text.replacen(at, &format!("{at}{fold}"), 1 + r.below(3)).into_bytes())
}

/// A REGISTER-like flood of Contact values (the registrar's binding limit).
fn contact_storm(r: &mut Rng, m: &[u8], t: &Target) -> Option<Vec<u8>> {
    let n = *r.pick(&[21, 100, 1_000]);
    let mut out = m.to_vec();
    let per = if r.chance(50) { 1 } else { 50 };
    let mut i = 0;
    while i < n && out.len() < t.max_len {
        let vals: Vec<String> =
            (0..per).map(|k| format!("<sip:c{}@{};expires={}>", i + k, t.sender, r.below(100_000))).collect();
        out = insert_header(&out, &format!("Contact: {}", vals.join(", ")));
        i += per;
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_corpus_is_deterministic() {
        let t = Target {
            herald: "127.0.0.1:5060".parse().unwrap(),
            sender: "127.0.0.1:5070".parse().unwrap(),
            via_transport: "UDP",
            callee: "c".into(),
            callee_tcp: "ct".into(),
            max_len: 65_507,
        };
        let s = seeds(&t);
        let a = generate(7, 300, &s, &[], &t);
        let b = generate(7, 300, &s, &[], &t);
        assert!(a.iter().zip(&b).all(|(x, y)| x.bytes == y.bytes && x.kind == y.kind));
        assert!(a.iter().all(|m| !m.bytes.is_empty() && m.bytes.len() <= t.max_len));
    }
}
