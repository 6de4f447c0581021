//! Property tests for the message layer: generated messages parse to their model, the
//! canonical form is a fixed point, proxy edits touch exactly what they should, hostile bytes
//! never panic, and parsing never allocates in proportion to hostile input.
//!
//! Case counts default to 256 per property (less for the 70 KB inputs); `PROPTEST_CASES`
//! overrides all of them. Failures are not persisted to disk.

use bytes::{Bytes, BytesMut};
use herald_sip::editor::canonical;
use herald_sip::framing::{next_cut, next_frame, Cut, Frame};
use herald_sip::headers::unquote;
use herald_sip::{Editor, Framing, HeaderField, HeaderName, Limits, Message};
use proptest::prelude::*;
use proptest::sample::{select, Index};
use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::net::{Ipv4Addr, Ipv6Addr};

// ---------------------------------------------------------------------------------------------
// Counting allocator: per-thread current and peak bytes, so that tests running in parallel do
// not disturb each other's measurements.

struct Counting;

thread_local! {
    static CURRENT: Cell<isize> = const { Cell::new(0) };
    static PEAK: Cell<isize> = const { Cell::new(0) };
}

fn note(delta: isize) {
    let _ = CURRENT.try_with(|c| {
        let now = c.get() + delta;
        c.set(now);
        let _ = PEAK.try_with(|p| p.set(p.get().max(now)));
    });
}

// SAFETY: every call is forwarded to `System` unchanged; the bookkeeping touches only
// const-initialised thread-locals without destructors, which never allocate.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let p = System.alloc(layout);
        if !p.is_null() {
            note(layout.size() as isize);
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        let p = System.alloc_zeroed(layout);
        if !p.is_null() {
            note(layout.size() as isize);
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        System.dealloc(ptr, layout);
        note(-(layout.size() as isize));
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let p = System.realloc(ptr, layout, new_size);
        if !p.is_null() {
            note(new_size as isize - layout.size() as isize);
        }
        p
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

/// Runs `f` and returns its result with the peak number of bytes it held allocated at once on
/// this thread (bytes that existed before the call do not count).
fn peak_during<R>(f: impl FnOnce() -> R) -> (R, usize) {
    CURRENT.with(|c| c.set(0));
    PEAK.with(|p| p.set(0));
    let r = f();
    (r, PEAK.with(|p| p.get()).max(0) as usize)
}

fn config(cases: u32) -> ProptestConfig {
    let mut c = ProptestConfig::default();
    if std::env::var_os("PROPTEST_CASES").is_none() {
        c.cases = cases;
    }
    c.failure_persistence = None;
    c
}

// ---------------------------------------------------------------------------------------------
// The model of a generated message.

#[derive(Debug, Clone)]
enum Display {
    None,
    /// `token *(SP token)`
    Tokens(Vec<String>),
    /// A quoted-string; `escape_all` also escapes characters that need no escaping.
    Quoted {
        text: String,
        escape_all: bool,
    },
}

#[derive(Debug, Clone)]
struct Addr {
    display: Display,
    uri: String,
    /// Use the addr-spec form (no `<>`) when the URI allows it and there is no display name.
    bare: bool,
    tag: Option<String>,
    params: Vec<(String, Option<String>)>,
}

#[derive(Debug, Clone)]
struct ViaM {
    transport: String,
    sent_by: String,
    port: Option<u16>,
    branch: String,
    params: Vec<(String, Option<String>)>,
}

#[derive(Debug, Clone)]
struct ContactM {
    addr: Addr,
    q: Option<(&'static str, u16)>,
    expires: Option<u32>,
}

#[derive(Debug, Clone)]
enum Start {
    Request { method: String, uri: String },
    Response { code: u16, reason: String },
}

/// How the model is written: which optional LWS is folded, compact names, name case, order.
#[derive(Debug, Clone)]
struct Style {
    folds: Vec<u8>,
    compact: bool,
    case_bits: Vec<bool>,
    order_keys: Vec<u8>,
    /// Start a new Via / Route line before value i (index 0 ignored).
    via_breaks: Vec<bool>,
    route_breaks: Vec<bool>,
}

#[derive(Debug, Clone)]
struct Model {
    start: Start,
    vias: Vec<ViaM>,
    from: Addr,
    to: Addr,
    call_id: String,
    cseq: u32,
    cseq_method: String,
    max_forwards: Option<u8>,
    contacts: Vec<ContactM>,
    routes: Vec<String>,
    unknown: Vec<(String, String)>,
    body: Vec<u8>,
    style: Style,
}

/// What a message says, as extracted through the typed accessors (or predicted from a model).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Summary {
    method: Option<String>,
    request_uri: Option<String>,
    status: Option<u16>,
    reason: Option<Vec<u8>>,
    vias: Vec<(String, Option<u16>, Option<String>)>,
    from: (Option<String>, String, Option<String>),
    to: (Option<String>, String, Option<String>),
    call_id: String,
    cseq: (u32, String),
    max_forwards: Option<u8>,
    contacts: Vec<(String, Option<u16>, Option<u32>)>,
    routes: Vec<String>,
    unknown: Vec<(String, Vec<u8>)>,
    body: Vec<u8>,
}

fn display_text(d: &Display) -> Option<String> {
    match d {
        Display::None => None,
        Display::Tokens(w) => Some(w.join(" ")),
        Display::Quoted { text, .. } => Some(text.clone()),
    }
}

impl Model {
    fn expected(&self) -> Summary {
        let (method, request_uri, status, reason) = match &self.start {
            Start::Request { method, uri } => (Some(method.clone()), Some(uri.clone()), None, None),
            Start::Response { code, reason } => (None, None, Some(*code), Some(reason.as_bytes().to_vec())),
        };
        let addr = |a: &Addr| (display_text(&a.display), a.uri.clone(), a.tag.clone());
        Summary {
            method,
            request_uri,
            status,
            reason,
            vias: self.vias.iter().map(|v| (v.transport.clone(), v.port, Some(v.branch.clone()))).collect(),
            from: addr(&self.from),
            to: addr(&self.to),
            call_id: self.call_id.clone(),
            cseq: (self.cseq, self.cseq_method.clone()),
            max_forwards: self.max_forwards,
            contacts: self.contacts.iter().map(|c| (c.addr.uri.clone(), c.q.map(|q| q.1), c.expires)).collect(),
            routes: self.routes.clone(),
            unknown: sorted(self.unknown.iter().map(|(n, v)| (n.to_ascii_lowercase(), unfold(v.as_bytes()))).collect()),
            body: self.body.clone(),
        }
    }
}

/// Unknown headers are generated in random order relative to each other.
fn sorted<T: Ord>(mut v: Vec<T>) -> Vec<T> {
    v.sort();
    v
}

/// Collapses each fold (`*WSP CRLF 1*WSP`) into one SP, as `editor::canonical` does.
fn unfold(v: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(v.len());
    let mut i = 0;
    while i < v.len() {
        if v[i] == b'\r' && v.get(i + 1) == Some(&b'\n') {
            while out.last().is_some_and(|b| *b == b' ' || *b == b'\t') {
                out.pop();
            }
            out.push(b' ');
            i += 2;
            while i < v.len() && (v[i] == b' ' || v[i] == b'\t') {
                i += 1;
            }
            continue;
        }
        out.push(v[i]);
        i += 1;
    }
    out
}

fn summarize(m: &Message) -> Summary {
    let name_addr = |a: herald_sip::headers::NameAddr<'_>| {
        (a.display_name.map(|d| unquote(d).into_owned()), a.uri.as_str().to_string(), a.tag().map(str::to_string))
    };
    let cseq = m.cseq().expect("CSeq");
    Summary {
        method: m.method().map(|x| x.as_str().to_string()),
        request_uri: m.request_uri_bytes().map(|u| String::from_utf8(u.to_vec()).expect("ASCII URI")),
        status: m.status(),
        reason: m.reason().map(<[u8]>::to_vec),
        vias: m
            .vias()
            .map(|v| {
                let v = v.expect("Via");
                (v.transport.to_string(), v.port, v.branch().map(str::to_string))
            })
            .collect(),
        from: name_addr(m.from_header().expect("From")),
        to: name_addr(m.to_header().expect("To")),
        call_id: m.call_id().expect("Call-ID").to_string(),
        cseq: (cseq.seq, cseq.method.as_str().to_string()),
        max_forwards: m.max_forwards().expect("Max-Forwards"),
        contacts: m
            .contacts()
            .map(|c| {
                let c = c.expect("Contact");
                let uri = c.address().expect("not *").uri.as_str().to_string();
                (uri, c.q(), c.expires())
            })
            .collect(),
        routes: m.routes().map(|r| r.expect("Route").uri.as_str().to_string()).collect(),
        unknown: sorted(
            m.headers()
                .iter()
                .filter(|h| h.name == HeaderName::Other)
                .map(|h| (String::from_utf8_lossy(m.name_of(h)).to_ascii_lowercase(), unfold(m.value_of(h))))
                .collect(),
        ),
        body: m.body().to_vec(),
    }
}

// ---------------------------------------------------------------------------------------------
// Rendering.

struct Writer<'s> {
    style: &'s Style,
    fold_at: usize,
    case_at: usize,
}

impl Writer<'_> {
    /// Optional LWS: nothing, one SP, or a fold.
    fn opt_lws(&mut self) -> &'static str {
        let f = self.style.folds.get(self.fold_at % self.style.folds.len().max(1)).copied().unwrap_or(0);
        self.fold_at += 1;
        ["", " ", "\r\n ", " \r\n\t", "", " "][usize::from(f) % 6]
    }

    /// Required LWS: one SP, several, or a fold.
    fn lws(&mut self) -> &'static str {
        match self.opt_lws() {
            "" => " ",
            s => s,
        }
    }

    fn name(&mut self, long: &str, compact: Option<&str>) -> String {
        let base = match compact {
            Some(c) if self.style.compact => c,
            _ => long,
        };
        base.chars()
            .map(|c| {
                let flip = self.style.case_bits.get(self.case_at % self.style.case_bits.len().max(1)) == Some(&true);
                self.case_at += 1;
                if flip {
                    if c.is_ascii_uppercase() {
                        c.to_ascii_lowercase()
                    } else {
                        c.to_ascii_uppercase()
                    }
                } else {
                    c
                }
            })
            .collect()
    }

    fn header(&mut self, long: &str, compact: Option<&str>, value: &str) -> Vec<u8> {
        let name = self.name(long, compact);
        let before = match self.opt_lws() {
            "" => "",
            _ => " ",
        };
        format!("{name}{before}:{}{value}\r\n", self.opt_lws()).into_bytes()
    }

    fn params(&mut self, params: &[(String, Option<String>)]) -> String {
        let mut s = String::new();
        for (n, v) in params {
            s.push_str(self.opt_lws());
            s.push(';');
            s.push_str(self.opt_lws());
            s.push_str(n);
            if let Some(v) = v {
                s.push('=');
                s.push_str(v);
            }
        }
        s
    }

    fn addr(&mut self, a: &Addr) -> String {
        let mut s = String::new();
        let bracket = !a.bare || !matches!(a.display, Display::None);
        match &a.display {
            Display::None => {}
            Display::Tokens(words) => {
                s.push_str(&words.join(" "));
                s.push_str(self.opt_lws());
            }
            Display::Quoted { text, escape_all } => {
                s.push('"');
                for c in text.chars() {
                    if c == '"' || c == '\\' || (*escape_all && c.is_ascii()) {
                        s.push('\\');
                    }
                    s.push(c);
                }
                s.push('"');
                s.push_str(self.opt_lws());
            }
        }
        if bracket {
            s.push('<');
            s.push_str(&a.uri);
            s.push('>');
        } else {
            s.push_str(&a.uri);
        }
        let mut params = Vec::new();
        if let Some(t) = &a.tag {
            params.push(("tag".to_string(), Some(t.clone())));
        }
        params.extend(a.params.iter().cloned());
        s.push_str(&self.params(&params));
        s
    }

    /// A list header: values joined by commas, starting a new line where `breaks` says.
    fn list(&mut self, long: &str, compact: Option<&str>, values: &[String], breaks: &[bool]) -> Vec<Vec<u8>> {
        let mut lines = Vec::new();
        let mut cur = String::new();
        for (i, v) in values.iter().enumerate() {
            if i > 0 && breaks.get(i).copied().unwrap_or(false) {
                lines.push(self.header(long, compact, &cur));
                cur.clear();
            } else if i > 0 {
                cur.push_str(self.opt_lws());
                cur.push(',');
                cur.push_str(self.opt_lws());
            }
            cur.push_str(v);
        }
        if !values.is_empty() {
            lines.push(self.header(long, compact, &cur));
        }
        lines
    }
}

impl Model {
    fn render(&self) -> Vec<u8> {
        let mut w = Writer { style: &self.style, fold_at: 0, case_at: 0 };
        let mut out = match &self.start {
            Start::Request { method, uri } => format!("{method} {uri} SIP/2.0\r\n"),
            Start::Response { code, reason } => format!("SIP/2.0 {code} {reason}\r\n"),
        }
        .into_bytes();

        // Blocks of lines; blocks are reordered, lines inside a block are not.
        let mut blocks: Vec<Vec<Vec<u8>>> = Vec::new();
        let vias: Vec<String> = self
            .vias
            .iter()
            .map(|v| {
                let port = v.port.map(|p| format!(":{p}")).unwrap_or_default();
                let mut params = vec![("branch".to_string(), Some(v.branch.clone()))];
                params.extend(v.params.iter().cloned());
                format!("SIP/2.0/{}{}{}{port}{}", v.transport, w.lws(), v.sent_by, w.params(&params))
            })
            .collect();
        blocks.push(w.list("Via", Some("v"), &vias, &self.style.via_breaks));
        let from = w.addr(&self.from);
        blocks.push(vec![w.header("From", Some("f"), &from)]);
        let to = w.addr(&self.to);
        blocks.push(vec![w.header("To", Some("t"), &to)]);
        blocks.push(vec![w.header("Call-ID", Some("i"), &self.call_id)]);
        let cseq = format!("{}{}{}", self.cseq, w.lws(), self.cseq_method);
        blocks.push(vec![w.header("CSeq", None, &cseq)]);
        if let Some(n) = self.max_forwards {
            blocks.push(vec![w.header("Max-Forwards", None, &n.to_string())]);
        }
        if !self.contacts.is_empty() {
            let values: Vec<String> = self
                .contacts
                .iter()
                .map(|c| {
                    let mut s = w.addr(&c.addr);
                    let mut p = Vec::new();
                    if let Some((q, _)) = c.q {
                        p.push(("q".to_string(), Some(q.to_string())));
                    }
                    if let Some(e) = c.expires {
                        p.push(("expires".to_string(), Some(e.to_string())));
                    }
                    s.push_str(&w.params(&p));
                    s
                })
                .collect();
            blocks.push(w.list("Contact", Some("m"), &values, &[]));
        }
        if !self.routes.is_empty() {
            let values: Vec<String> = self.routes.iter().map(|r| format!("<{r}>")).collect();
            blocks.push(w.list("Route", None, &values, &self.style.route_breaks));
        }
        for (n, v) in &self.unknown {
            blocks.push(vec![w.header(n, None, v)]);
        }
        if !self.body.is_empty() {
            blocks.push(vec![w.header("Content-Type", Some("c"), "application/octet-stream")]);
        }
        blocks.push(vec![w.header("Content-Length", Some("l"), &self.body.len().to_string())]);

        let keys = &self.style.order_keys;
        let mut order: Vec<usize> = (0..blocks.len()).collect();
        order.sort_by_key(|&i| keys.get(i % keys.len().max(1)).copied().unwrap_or(0));
        for i in order {
            for line in &blocks[i] {
                out.extend_from_slice(line);
            }
        }
        out.extend_from_slice(b"\r\n");
        out.extend_from_slice(&self.body);
        out
    }
}

// ---------------------------------------------------------------------------------------------
// Strategies.

const METHODS: &[&str] = &[
    "INVITE",
    "ACK",
    "BYE",
    "CANCEL",
    "REGISTER",
    "OPTIONS",
    "INFO",
    "PRACK",
    "SUBSCRIBE",
    "NOTIFY",
    "UPDATE",
    "MESSAGE",
    "REFER",
    "PUBLISH",
];

fn method() -> impl Strategy<Value = String> {
    prop_oneof![
        3 => select(METHODS).prop_map(str::to_string),
        1 => "[A-Z][A-Za-z0-9.!%*_+`'~-]{0,11}",
    ]
}

fn hostname() -> impl Strategy<Value = String> {
    (prop::collection::vec("[a-z0-9]([a-z0-9-]{0,6}[a-z0-9])?", 0..3), "[a-z][a-z0-9]{0,5}").prop_map(|(mut l, top)| {
        l.push(top);
        l.join(".")
    })
}

fn host() -> impl Strategy<Value = String> {
    prop_oneof![
        3 => hostname(),
        1 => any::<[u8; 4]>().prop_map(|o| Ipv4Addr::from(o).to_string()),
        1 => any::<u128>().prop_map(|a| format!("[{}]", Ipv6Addr::from(a))),
    ]
}

fn uri_param() -> impl Strategy<Value = String> {
    prop_oneof![
        Just(";lr".to_string()),
        "transport=(udp|tcp|tls|sctp|ws)".prop_map(|p| format!(";{p}")),
        Just(";user=phone".to_string()),
        "x[a-z0-9-]{0,6}(=[a-zA-Z0-9._~-]{1,8})?".prop_map(|p| format!(";{p}")),
    ]
}

fn sip_uri() -> impl Strategy<Value = String> {
    (
        select(&["sip", "sips", "SIP", "sip"][..]),
        prop::option::of(("([a-zA-Z0-9_.!~*'-]|%[0-9A-F]{2}){1,12}", prop::option::of("[a-z0-9]{0,8}"))),
        host(),
        prop::option::of(any::<u16>()),
        prop::collection::vec(uri_param(), 0..3),
    )
        .prop_map(|(scheme, user, host, port, params)| {
            let mut s = format!("{scheme}:");
            if let Some((u, pw)) = user {
                s.push_str(&u);
                if let Some(pw) = pw {
                    s.push(':');
                    s.push_str(&pw);
                }
                s.push('@');
            }
            s.push_str(&host);
            if let Some(p) = port {
                s.push_str(&format!(":{p}"));
            }
            s.extend(params);
            s
        })
}

fn display() -> impl Strategy<Value = Display> {
    prop_oneof![
        2 => Just(Display::None),
        1 => prop::collection::vec("[A-Za-z0-9.!%*_+`'~-]{1,8}", 1..4).prop_map(Display::Tokens),
        1 => ("([ -~]|é|中|😀){0,16}", any::<bool>()).prop_map(|(text, escape_all)| Display::Quoted { text, escape_all }),
    ]
}

fn gen_params() -> impl Strategy<Value = Vec<(String, Option<String>)>> {
    prop::collection::vec(("x[a-z]{0,4}", prop::option::of("[a-zA-Z0-9.-]{1,6}")), 0..3)
}

fn addr(tagged: bool) -> impl Strategy<Value = Addr> {
    (display(), sip_uri(), any::<bool>(), prop::option::of("[a-zA-Z0-9.-]{1,12}"), gen_params()).prop_map(
        move |(display, uri, bare, tag, params)| Addr {
            display,
            // addr-spec form only for URIs without ';' (RFC 3261 §20.10).
            bare: bare && !uri.contains(';'),
            uri,
            tag: if tagged { tag } else { None },
            params,
        },
    )
}

fn via() -> impl Strategy<Value = ViaM> {
    let param = prop_oneof![
        Just(("rport".to_string(), None)),
        any::<[u8; 4]>().prop_map(|o| ("received".to_string(), Some(Ipv4Addr::from(o).to_string()))),
        any::<u8>().prop_map(|t| ("ttl".to_string(), Some(t.to_string()))),
        ("x[a-z]{0,4}", "[a-z0-9]{1,5}").prop_map(|(n, v)| (n, Some(v))),
    ];
    (
        select(&["UDP", "TCP", "TLS", "SCTP", "WS", "WSS", "udp"][..]),
        host(),
        prop::option::of(any::<u16>()),
        "z9hG4bK[a-zA-Z0-9.-]{1,16}",
        prop::collection::vec(param, 0..3),
    )
        .prop_map(|(t, sent_by, port, branch, params)| ViaM {
            transport: t.to_string(),
            sent_by,
            port,
            branch,
            params,
        })
}

fn contact() -> impl Strategy<Value = ContactM> {
    let q = select(&[("0", 0u16), ("0.5", 500), ("1", 1000), ("0.123", 123), ("1.0", 1000), ("0.05", 50)][..]);
    (addr(false), prop::option::of(q), prop::option::of(any::<u32>())).prop_map(|(addr, q, expires)| ContactM {
        addr,
        q,
        expires,
    })
}

fn call_id() -> impl Strategy<Value = String> {
    let word = "[a-zA-Z0-9.!%*_+`'~()<>:\\\\\"/\\[\\]?{}-]{1,16}";
    (word, prop::option::of(word)).prop_map(|(a, b)| match b {
        Some(b) => format!("{a}@{b}"),
        None => a,
    })
}

fn style() -> impl Strategy<Value = Style> {
    (
        prop_oneof![Just(vec![0u8]), prop::collection::vec(any::<u8>(), 1..16)],
        any::<bool>(),
        prop_oneof![Just(vec![false]), prop::collection::vec(any::<bool>(), 1..8)],
        prop::collection::vec(any::<u8>(), 1..24),
        prop::collection::vec(any::<bool>(), 3),
        prop::collection::vec(any::<bool>(), 4),
    )
        .prop_map(|(folds, compact, case_bits, order_keys, via_breaks, route_breaks)| Style {
            folds,
            compact,
            case_bits,
            order_keys,
            via_breaks,
            route_breaks,
        })
}

fn unknown_header() -> impl Strategy<Value = (String, String)> {
    // Values: visible text with single spaces, some of which may be folds.
    ("X-[A-Za-z0-9-]{1,10}", prop::collection::vec("[!-~]{1,8}", 1..5), any::<u8>()).prop_map(|(n, words, fold)| {
        let mut v = String::new();
        for (i, word) in words.iter().enumerate() {
            if i > 0 {
                v.push_str(if fold & (1 << (i % 8)) != 0 { "\r\n " } else { " " });
            }
            v.push_str(word);
        }
        (n, v)
    })
}

fn model() -> impl Strategy<Value = Model> {
    let start = prop_oneof![
        (method(), sip_uri()).prop_map(|(method, uri)| Start::Request { method, uri }),
        (100u16..=699, "([A-Za-z][A-Za-z ]{0,20})?").prop_map(|(code, reason)| Start::Response { code, reason }),
    ];
    (
        (start, prop::collection::vec(via(), 1..=3), addr(true), addr(true), call_id(), any::<u32>(), method()),
        (
            prop::option::of(any::<u8>()),
            prop::collection::vec(contact(), 0..=3),
            prop::collection::vec(sip_uri().prop_map(|u| if u.contains(";lr") { u } else { u + ";lr" }), 0..=4),
            prop::collection::vec(unknown_header(), 0..4),
            prop_oneof![2 => Just(vec![]), 1 => prop::collection::vec(any::<u8>(), 1..300)],
            style(),
        ),
    )
        .prop_map(
            |(
                (start, vias, from, to, call_id, cseq, cseq_method),
                (max_forwards, contacts, routes, unknown, body, style),
            )| {
                let cseq_method = match &start {
                    Start::Request { method, .. } => method.clone(),
                    Start::Response { .. } => cseq_method,
                };
                Model {
                    start,
                    vias,
                    from,
                    to,
                    call_id,
                    cseq,
                    cseq_method,
                    max_forwards,
                    contacts,
                    routes,
                    unknown,
                    body,
                    style,
                }
            },
        )
}

// ---------------------------------------------------------------------------------------------
// Helpers for the no-panic and allocation properties.

fn parse(bytes: &[u8]) -> Result<Message, herald_sip::ParseError> {
    Message::parse(Bytes::copy_from_slice(bytes), &Limits::default())
}

/// Everything the public API offers on arbitrary input; only panics matter.
fn exercise(data: &[u8]) {
    let limits = Limits::default();
    if let Ok(msg) = Message::parse(Bytes::copy_from_slice(data), &limits) {
        let _ = msg.validate();
        let _ = msg.validate_all();
        for h in msg.headers() {
            let _ = msg.typed(h);
        }
        let _ = msg.request_uri();
        let _ = msg.top_via();
        let _ = (msg.from_header(), msg.to_header(), msg.call_id(), msg.cseq(), msg.max_forwards());
        let _ = (msg.routes().count(), msg.record_routes().count(), msg.contacts().count());
        // The shortcuts agree with the list they stand for.
        for name in [HeaderName::Via, HeaderName::Contact, HeaderName::Route, HeaderName::RecordRoute] {
            let listed = msg.list_values(name).next().map(|r| r.map_err(|e| e.to_string()));
            assert_eq!(msg.first_list_value(name).map(|r| r.map_err(|e| e.to_string())), listed);
        }
        if let Some((top, second)) = msg.top_two_via_spans() {
            let spans: Vec<_> = msg.list_values(HeaderName::Via).take(2).map(|v| v.unwrap().span).collect();
            assert_eq!(spans, vec![top, second]);
        }
        let canon = canonical(&msg);
        if let Ok(again) = Message::parse(canon, &limits) {
            let _ = again.validate_all();
            let _ = canonical(&again);
        }
        let mut e = Editor::new(&msg);
        e.prepend_header("Via", b"SIP/2.0/UDP p.invalid;branch=z9hG4bKx").set_max_forwards(9);
        if let Some(Ok(v)) = msg.list_values(HeaderName::Route).next() {
            e.remove_list_value(v);
        }
        let _ = Message::parse(e.finish(), &limits);
    }
    let mut buf = BytesMut::from(data);
    while let Ok(Some(_)) = next_frame(&mut buf, &limits) {}
    cuts_as_frames_do(data, &limits);
}

/// `next_cut` takes off the stream exactly what `next_frame` does, and a message it parsed on
/// the way is the message `parse_as(.., Stream)` makes of that frame (and parses, always).
fn cuts_as_frames_do(data: &[u8], limits: &Limits) {
    let (mut frames, mut cuts) = (BytesMut::from(data), BytesMut::from(data));
    loop {
        let (frame, cut) = (next_frame(&mut frames, limits), next_cut(&mut cuts, limits));
        assert_eq!(frames.len(), cuts.len(), "the same bytes left");
        match (frame, cut) {
            (Ok(Some(Frame::Message(bytes))), Ok(Some(Cut::Parsed(msg)))) => {
                let again = Message::parse_as(bytes, limits, Framing::Stream).expect("a parsed cut parses as a frame");
                assert_eq!(again.as_bytes(), msg.as_bytes());
                assert_eq!(again.headers(), msg.headers());
                assert_eq!(again.body(), msg.body());
            }
            (Ok(Some(f)), Ok(Some(Cut::Frame(c)))) => assert_eq!(f, c),
            (Ok(None), Ok(None)) => return,
            (Err(a), Err(b)) => {
                assert_eq!(a, b);
                return;
            }
            (f, c) => panic!("next_frame {f:?}, next_cut {c:?}"),
        }
    }
}

#[derive(Debug, Clone)]
enum Mutation {
    Truncate(Index),
    Flip(Index, u8),
    DuplicateLine(Index),
    Insert(Index, Vec<u8>),
    Delete(Index, usize),
}

const JUNK: &[&[u8]] = &[b"\r\n", b"\r\n ", b",", b";", b"<", b">", b"\"", b"\\", b":", b"\0", b"%", b"\n", b"\r"];

fn mutation() -> impl Strategy<Value = Mutation> {
    let junk = prop_oneof![prop::collection::vec(any::<u8>(), 1..8), select(JUNK).prop_map(<[u8]>::to_vec),];
    prop_oneof![
        any::<Index>().prop_map(Mutation::Truncate),
        (any::<Index>(), 1u8..).prop_map(|(i, x)| Mutation::Flip(i, x)),
        any::<Index>().prop_map(Mutation::DuplicateLine),
        (any::<Index>(), junk).prop_map(|(i, j)| Mutation::Insert(i, j)),
        (any::<Index>(), 1usize..16).prop_map(|(i, n)| Mutation::Delete(i, n)),
    ]
}

fn mutate(mut b: Vec<u8>, muts: &[Mutation]) -> Vec<u8> {
    for m in muts {
        if b.is_empty() {
            break;
        }
        match m {
            Mutation::Truncate(i) => b.truncate(i.index(b.len())),
            Mutation::Flip(i, x) => {
                let i = i.index(b.len());
                b[i] ^= x;
            }
            Mutation::DuplicateLine(i) => {
                let at = i.index(b.len());
                let start = b[..at].iter().rposition(|&c| c == b'\n').map_or(0, |p| p + 1);
                let end = b[at..].iter().position(|&c| c == b'\n').map_or(b.len(), |p| at + p + 1);
                let line = b[start..end].to_vec();
                b.splice(end..end, line);
            }
            Mutation::Insert(i, j) => {
                let at = i.index(b.len() + 1);
                b.splice(at..at, j.iter().copied());
            }
            Mutation::Delete(i, n) => {
                let at = i.index(b.len());
                let end = (at + n).min(b.len());
                b.drain(at..end);
            }
        }
    }
    b
}

/// Fragments that look like SIP, so random concatenations get past the start line.
const FRAGMENTS: &[&str] = &[
    "INVITE sip:a@b SIP/2.0\r\n",
    "SIP/2.0 200 OK\r\n",
    "Via: SIP/2.0/UDP h;branch=z9hG4bK1",
    "v: SIP/2.0/TCP [::1]:5060",
    "From: <sip:a@b>;tag=1",
    "To: \"x\\\" y\" <sip:c@d>",
    "Call-ID: a@b",
    "CSeq: 1 INVITE",
    "Max-Forwards: 70",
    "Contact: *",
    "m: <sip:x@y>;q=0.5;expires=60",
    "Route: <sip:p;lr>",
    "Record-Route: <sip:q;lr>,<sip:r>",
    "Content-Length: 4",
    "l: 0",
    "Content-Type: application/sdp",
    "Authorization: Digest a=\"b\", c=d",
    "Date: Sat, 13 Nov 2010 23:29:00 GMT",
    "Retry-After: 5 (x(y)) ;duration=1",
    "Session-Expires: 90;refresher=uac",
    "Allow: INVITE, ACK",
    "X-Y: z",
    "\r\n",
    "\r\n ",
    "\r\n\r\n",
    ",",
    ";",
    ":",
    " ",
    "<",
    ">",
    "\"",
    "\\",
    "@",
    "%",
    "[",
    "]",
    "sip:",
    "tel:+1-555",
    "\u{0}",
    "\u{ff}",
    "body",
];

/// Hostile header lines for the allocation bound: (name, prefix, element, separator).
const HOSTILE: &[(&str, &str, &str, &str)] = &[
    ("Contact", "", "<sip:a@b>", ","),
    ("m", "", "a:b", ","),
    ("Allow", "", "A", ","),
    ("Supported", "", "x", ","),
    ("Accept", "", "a/b", ","),
    ("Route", "", "<sip:r;lr>", ","),
    ("Record-Route", "", "<sip:r>", ","),
    ("Via", "", "SIP/2.0/UDP h", ","),
    ("Date", "", "a", " "),
    ("Authorization", "Digest ", "a=b", ","),
    ("Call-Info", "", "<http://x>", ","),
    ("In-Reply-To", "", "a@b", ","),
    ("Accept-Language", "", "en", ","),
    ("Subject", "", "x", " "),
    ("X-Fold", "", "a", "\r\n "),
    ("X-Other", "", "\"q\"", ";"),
    ("Content-Type", "a/b", ";p=v", ""),
    ("Retry-After", "1 ", "(", ""),
];

const BASE_REQUEST: &str = "INVITE sip:bob@example.com SIP/2.0\r\nVia: SIP/2.0/UDP h;branch=z9hG4bK1\r\n\
From: <sip:a@b>;tag=1\r\nTo: <sip:b@c>\r\nCall-ID: a@b\r\nCSeq: 1 INVITE\r\n";

fn hostile_message() -> impl Strategy<Value = Vec<u8>> {
    (select(HOSTILE), 1usize..4100, 1usize..130, any::<bool>()).prop_map(
        |((name, prefix, elem, sep), n, lines, body)| {
            let mut value = String::from(prefix);
            for i in 0..n {
                if i > 0 {
                    value.push_str(sep);
                }
                value.push_str(elem);
            }
            let line = format!("{name}: {value}\r\n");
            let mut out = BASE_REQUEST.as_bytes().to_vec();
            for _ in 0..lines {
                if out.len() + line.len() > 69_000 {
                    break;
                }
                out.extend_from_slice(line.as_bytes());
            }
            if body {
                out.extend_from_slice(b"Content-Length: 0\r\n\r\n");
            } else {
                out.extend_from_slice(b"\r\n");
            }
            out
        },
    )
}

/// The bound from the brief: the header index (twice, for `Vec` growth) plus a small constant.
fn allocation_bound(limits: &Limits) -> usize {
    limits.max_headers * std::mem::size_of::<HeaderField>() * 2 + 16 * 1024
}

// ---------------------------------------------------------------------------------------------
// Properties.

proptest! {
    #![proptest_config(config(256))]

    /// (a) A generated message parses, validates, and reads back as its model.
    #[test]
    fn generated_messages_match_their_model(m in model()) {
        let bytes = m.render();
        let msg = parse(&bytes).map_err(|e| TestCaseError::fail(format!("{e}\n{}", String::from_utf8_lossy(&bytes))))?;
        msg.validate_all().map_err(|e| TestCaseError::fail(format!("{e}\n{}", String::from_utf8_lossy(&bytes))))?;
        for h in msg.headers() {
            prop_assert!(msg.typed(h).is_ok());
        }
        if let Some(uri) = msg.request_uri().ok().map(|u| u.as_str().to_string()) {
            prop_assert_eq!(Some(uri), msg.request_uri_bytes().map(|b| String::from_utf8_lossy(b).into_owned()));
        }
        prop_assert_eq!(summarize(&msg), m.expected());
        prop_assert_eq!(msg.content_length(), Some(m.body.len() as u32));
    }

    /// (b) canonical is a fixed point and keeps the meaning.
    #[test]
    fn canonical_form_is_idempotent(m in model()) {
        let msg = parse(&m.render()).expect("generated message parses");
        let c1 = canonical(&msg);
        let again = Message::parse(c1.clone(), &Limits::default())
            .map_err(|e| TestCaseError::fail(format!("{e}\n{}", String::from_utf8_lossy(&c1))))?;
        again.validate_all().map_err(|e| TestCaseError::fail(format!("{e}\n{}", String::from_utf8_lossy(&c1))))?;
        let c2 = canonical(&again);
        prop_assert_eq!(&c1, &c2);
        prop_assert_eq!(summarize(&again), summarize(&msg));
        prop_assert_eq!(again.headers().len(), msg.headers().len());
        // No folding, no compact names survive.
        for h in again.headers() {
            prop_assert!(!again.value_of(h).windows(2).any(|w| w == b"\r\n"));
            if let Some(long) = h.name.canonical() {
                prop_assert_eq!(again.name_of(h), long.as_bytes());
            }
        }
    }

    /// (c) Proxy edits change exactly the edited lines; everything else is byte-identical.
    #[test]
    fn editor_changes_only_what_it_edits(m in model(), n in any::<u8>()) {
        let bytes = m.render();
        let msg = parse(&bytes).expect("generated message parses");
        const NEW_VIA: &[u8] = b"SIP/2.0/UDP proxy.invalid:5060;branch=z9hG4bKedited";
        let top_route = msg.list_values(HeaderName::Route).next().transpose().expect("Route splits");
        let mut e = Editor::new(&msg);
        e.prepend_header("Via", NEW_VIA).set_max_forwards(n);
        if let Some(v) = top_route {
            e.remove_list_value(v);
        }
        let out = e.finish();
        let edited = Message::parse(out.clone(), &Limits::default())
            .map_err(|e| TestCaseError::fail(format!("{e}\n{}", String::from_utf8_lossy(&out))))?;
        edited.validate_all().map_err(|e| TestCaseError::fail(format!("{e}\n{}", String::from_utf8_lossy(&out))))?;

        // The visible changes.
        let mut expected = summarize(&msg);
        expected.vias.insert(0, ("UDP".into(), Some(5060), Some("z9hG4bKedited".into())));
        expected.max_forwards = Some(n);
        if !expected.routes.is_empty() {
            expected.routes.remove(0);
        }
        prop_assert_eq!(summarize(&edited), expected);

        // Line by line: start line, then the new Via, then the original lines in order.
        let start_len = msg.headers().first().map_or(msg.head_end(), |h| h.line.start as usize);
        prop_assert_eq!(&out[..start_len], &msg.as_bytes()[..start_len]);
        let new_lines: Vec<&HeaderField> = edited.headers().iter().collect();
        prop_assert_eq!(edited.slice(new_lines[0].line), &b"Via: SIP/2.0/UDP proxy.invalid:5060;branch=z9hG4bKedited\r\n"[..]);
        let first_route = msg.headers().iter().position(|h| h.name == HeaderName::Route);
        let mf = msg.headers().iter().position(|h| h.name == HeaderName::MaxForwards);
        let mut j = 1;
        for (i, h) in msg.headers().iter().enumerate() {
            let old = msg.slice(h.line);
            if Some(i) == first_route {
                let values = msg.list_values(HeaderName::Route).filter(|v| v.as_ref().is_ok_and(|v| v.field == i)).count();
                if values == 1 {
                    continue; // the whole line went
                }
                let nh = new_lines[j];
                prop_assert_eq!(nh.name, HeaderName::Route);
                let left: Vec<Vec<u8>> = edited.list_values(HeaderName::Route)
                    .filter_map(|v| v.ok().filter(|v| v.field == j).map(|v| v.bytes.to_vec()))
                    .collect();
                let want: Vec<Vec<u8>> = msg.list_values(HeaderName::Route)
                    .filter_map(|v| v.ok().filter(|v| v.field == i).map(|v| v.bytes.to_vec()))
                    .skip(1)
                    .collect();
                prop_assert_eq!(left, want);
            } else if Some(i) == mf {
                let (ls, vs, ve) = (h.line.start as usize, h.value.start as usize, h.value.end as usize);
                let mut want = old[..vs - ls].to_vec();
                want.extend_from_slice(n.to_string().as_bytes());
                want.extend_from_slice(&old[ve - ls..]);
                prop_assert_eq!(edited.slice(new_lines[j].line), &want[..]);
            } else {
                prop_assert_eq!(edited.slice(new_lines[j].line), old);
            }
            j += 1;
        }
        if mf.is_none() {
            let want = format!("Max-Forwards: {n}\r\n");
            prop_assert_eq!(edited.slice(new_lines[j].line), want.as_bytes());
            j += 1;
        }
        prop_assert_eq!(j, new_lines.len());
        prop_assert_eq!(edited.body(), msg.body());
    }

    /// (e) After `check` the method, the top Via and the number of Vias, the tags, Call-ID and
    /// CSeq come from the message's memo: they read exactly as a fresh parse of the same bytes
    /// does, and `check` passes exactly when `validate` does. Mutations reach the awkward shapes (comma-separated and folded Vias,
    /// IPv6 sent-by, extension methods, missing tags).
    #[test]
    fn checked_messages_read_as_fresh_ones(m in model(), muts in prop::collection::vec(mutation(), 0..4)) {
        let bytes = mutate(m.render(), &muts);
        if let Ok(fresh) = parse(&bytes) {
            let mut memo = fresh.clone();
            prop_assert_eq!(memo.check().is_ok(), fresh.validate().is_ok());
            if memo.is_checked() {
                prop_assert_eq!(memo.top_via().ok(), fresh.top_via().ok());
                prop_assert_eq!(memo.top_via().ok().and_then(|v| v.branch()), fresh.top_via().ok().and_then(|v| v.branch()));
                prop_assert_eq!(memo.from_tag().ok(), fresh.from_tag().ok());
                prop_assert_eq!(memo.to_tag().ok(), fresh.to_tag().ok());
                prop_assert_eq!(memo.call_id().ok(), fresh.call_id().ok());
                prop_assert_eq!(memo.cseq().ok(), fresh.cseq().ok());
                prop_assert_eq!(memo.request_uri().ok(), fresh.request_uri().ok());
                prop_assert_eq!(memo.method(), fresh.method());
                prop_assert_eq!(memo.via_count(), fresh.via_count());
                prop_assert_eq!(memo.via_count(), fresh.vias().count());
                prop_assert!(memo.validate().is_ok());
            }
        }
    }

    /// (d) Mutated messages never panic anywhere in the API.
    #[test]
    fn mutated_messages_never_panic(m in model(), muts in prop::collection::vec(mutation(), 1..6)) {
        exercise(&mutate(m.render(), &muts));
    }

    /// (d) Arbitrary bytes and SIP-looking fragment soup never panic.
    #[test]
    fn arbitrary_bytes_never_panic(
        raw in prop::collection::vec(any::<u8>(), 0..2048),
        soup in prop::collection::vec(select(FRAGMENTS), 0..64),
    ) {
        exercise(&raw);
        exercise(soup.concat().as_bytes());
    }
}

proptest! {
    #![proptest_config(config(64))]

    /// Parsing plus the receipt checks a proxy runs hold at most the header index and a
    /// constant, however hostile the input (up to 70 KB).
    #[test]
    fn parse_and_validate_allocation_is_bounded(input in hostile_input()) {
        check_allocation(&input, |m| m.validate())?;
    }

    /// The same bound for full validation (every typed header).
    #[test]
    fn parse_and_validate_all_allocation_is_bounded(input in hostile_input()) {
        check_allocation(&input, |m| m.validate_all())?;
    }
}

/// Input for the allocation properties; its Debug output is a summary, not 70,000 numbers.
#[derive(Clone)]
struct Input(Vec<u8>);

impl std::fmt::Debug for Input {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let head = &self.0[..self.0.len().min(400)];
        write!(f, "Input({} bytes: {:?}", self.0.len(), String::from_utf8_lossy(head))?;
        if self.0.len() > head.len() {
            write!(f, "...")?;
        }
        write!(f, ")")
    }
}

fn hostile_input() -> impl Strategy<Value = Input> {
    prop_oneof![
        1 => prop::collection::vec(any::<u8>(), 0..70_000),
        1 => prop::collection::vec(select(FRAGMENTS), 0..4000).prop_map(|f| f.concat().into_bytes()),
        2 => hostile_message(),
    ]
    .prop_map(Input)
}

fn check_allocation(
    input: &Input,
    check: impl Fn(&Message) -> Result<(), herald_sip::ParseError>,
) -> Result<(), TestCaseError> {
    let limits = Limits::default();
    let bound = allocation_bound(&limits);
    let buf = Bytes::from(input.0.clone());
    let warm = buf.clone(); // promote the Vec-backed Bytes outside the measurement
    let (result, peak) = peak_during(|| {
        let msg = Message::parse(buf.clone(), &limits);
        let checked = msg.as_ref().map(&check);
        (msg.is_ok(), checked.map(|r| r.is_ok()).unwrap_or(false))
    });
    drop(warm);
    prop_assert!(peak <= bound, "peak {} bytes > bound {} (parsed: {}, valid: {})", peak, bound, result.0, result.1);
    Ok(())
}

/// The fixture messages used by the benchmarks parse, validate and survive canonicalisation.
#[test]
fn bench_fixtures_are_valid() {
    for (name, bytes) in [
        ("invite", &include_bytes!("../benches/messages/invite.sip")[..]),
        ("trying100", include_bytes!("../benches/messages/trying100.sip")),
        ("ringing180", include_bytes!("../benches/messages/ringing180.sip")),
        ("ok200", include_bytes!("../benches/messages/ok200.sip")),
        ("ack", include_bytes!("../benches/messages/ack.sip")),
        ("bye", include_bytes!("../benches/messages/bye.sip")),
        ("register", include_bytes!("../benches/messages/register.sip")),
    ] {
        let m = parse(bytes).unwrap_or_else(|e| panic!("{name}: {e}"));
        m.validate_all().unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(m.trailing_octets(), 0, "{name}: Content-Length must match the body");
        assert_eq!(m.as_bytes(), bytes, "{name}");
        let c = canonical(&m);
        assert_eq!(&c[..], bytes, "{name}: fixtures are written in canonical form");
    }
}
