//! Loading and validating the configuration. Every error names the file, the line and the key:
//! `herald.toml:12: key 'timers.t1_ms': t1_ms (5000) must not exceed t2_ms (4000)`.

use super::error::ConfigError;
use super::schema::{Config, ListenTransport, DEFAULT_CONFIG};
use std::ops::Range;
use std::path::Path;
use toml::de::{DeTable, DeValue};
use toml::Spanned;

impl Config {
    /// Reads and validates a configuration file.
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        let file = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|e| ConfigError {
            file: file.clone(),
            line: 0,
            key: String::new(),
            message: format!("cannot read: {e}"),
        })?;
        Config::from_toml(&text, &file)
    }

    /// `path` when given, else the built-in [`DEFAULT_CONFIG`].
    pub fn load_or_default(path: Option<&Path>) -> Result<Config, ConfigError> {
        match path {
            Some(p) => Config::load(p),
            None => Config::from_toml(DEFAULT_CONFIG, "<built-in>"),
        }
    }

    /// Parses and validates TOML text; `file` is only used in error messages.
    pub fn from_toml(text: &str, file: &str) -> Result<Config, ConfigError> {
        let err = |span: Option<Range<usize>>, key: String, message: String| ConfigError {
            file: file.to_string(),
            line: span.map_or(1, |s| line_of(text, s.start)),
            key,
            message,
        };
        let de = toml::de::Deserializer::parse(text).map_err(|e| {
            let key = e.span().map(|s| key_at(text, s.start)).unwrap_or_default();
            err(e.span(), key, e.message().trim().to_string())
        })?;
        let config: Config = serde_path_to_error::deserialize(de).map_err(|e| {
            let mut path: Vec<Seg> = e.path().iter().filter_map(Seg::from_serde).collect();
            let inner = e.into_inner();
            let message = inner.message().trim().to_string();
            // serde reports an unknown key at its parent's path: add the key itself.
            if let Some(field) = unknown_field(&message) {
                if path.last() != Some(&Seg::Key(field.clone())) {
                    path.push(Seg::Key(field));
                }
            }
            let span = inner.span().or_else(|| locate(text, &path));
            err(span, render(&path), message)
        })?;
        if let Err((path, message)) = config.validate(text) {
            return Err(err(locate(text, &path), render(&path), message));
        }
        // The files `[tls]` names must load now: a bad key is a config error, not a failed
        // handshake hours later.
        let tls = &config.tls;
        let identity = tls.certificate.as_deref().zip(tls.private_key.as_deref());
        if let Err((leaf, message)) = crate::pem::check(identity, tls.client_ca_file.as_deref(), tls.ca_file.as_deref())
        {
            let path = vec![Seg::Key("tls".into()), Seg::Key(leaf.into())];
            return Err(err(locate(text, &path), render(&path), message));
        }
        Ok(config)
    }

    /// Checks what serde cannot: ranges and relations between keys. Returns the offending key.
    fn validate(&self, text: &str) -> Result<(), (Vec<Seg>, String)> {
        let key = |parts: &[&str]| parts.iter().map(|p| Seg::Key(p.to_string())).collect::<Vec<_>>();
        let fail = |parts: &[&str], msg: String| Err((key(parts), msg));
        let s = &self.server;
        if s.workers > 1024 {
            return fail(&["server", "workers"], format!("{} workers is more than 1024", s.workers));
        }
        if s.udp_buffer_bytes < 4096 {
            return fail(&["server", "udp_buffer_bytes"], "must be at least 4096".into());
        }
        if s.drain_timeout_s > 3600 {
            return fail(&["server", "drain_timeout_s"], "must be at most 3600 seconds".into());
        }
        if self.listen.is_empty() {
            return fail(&["listen"], "at least one [[listen]] entry is needed".into());
        }
        for (i, l) in self.listen.iter().enumerate() {
            let at = |leaf: &str| vec![Seg::Key("listen".into()), Seg::Index(i), Seg::Key(leaf.into())];
            if l.transports.is_empty() {
                return Err((
                    at("transports"),
                    "list at least one of \"udp\", \"tcp\", \"tls\", \"ws\", \"wss\"".into(),
                ));
            }
            for (j, t) in l.transports.iter().enumerate() {
                if l.transports[..j].contains(t) {
                    return Err((at("transports"), format!("{t:?} is listed twice").to_lowercase()));
                }
            }
            if l.transports.contains(&ListenTransport::Tcp) && l.transports.contains(&ListenTransport::Tls) {
                return Err((
                    at("transports"),
                    "tcp and tls are both TCP listeners: give tls its own address (port 5061)".into(),
                ));
            }
            let streams: Vec<String> =
                l.transports.iter().filter(|t| t.is_stream()).map(|t| format!("{t:?}").to_lowercase()).collect();
            if streams.len() > 1 {
                return Err((
                    at("transports"),
                    format!("{} are all TCP listeners: give each its own address", streams.join(" and ")),
                ));
            }
            for (j, other) in self.listen[..i].iter().enumerate() {
                // TCP and TLS on one port would split connections between two protocols.
                let clash = l
                    .transports
                    .iter()
                    .find(|t| other.transports.iter().any(|o| o == *t || (o.is_stream() && t.is_stream())));
                if other.address == l.address && l.address.port() != 0 {
                    if let Some(t) = clash {
                        let t = format!("{t:?}").to_lowercase();
                        return Err((at("address"), format!("{} {t} clashes with listen[{j}]", l.address)));
                    }
                }
            }
        }
        let has_tls = self.listen.iter().any(|l| l.transports.iter().any(|t| t.needs_certificate()));
        if let Err((leaf, message)) = self.tls.validate(has_tls) {
            return fail(&["tls", leaf], message);
        }
        if let Err((leaf, message)) = self.websocket.validate() {
            return fail(&["websocket", leaf], message);
        }
        if let Err((leaf, message)) = self.nat.validate() {
            return fail(&["nat", leaf], message);
        }
        for (key, names) in [("domains", &self.domains), ("aliases", &self.aliases)] {
            for (i, d) in names.iter().enumerate() {
                if d.is_empty() || d.chars().any(|c| c.is_whitespace() || c == ',' || c == ';') {
                    return Err((vec![Seg::Key(key.into()), Seg::Index(i)], format!("'{d}' is not a host name")));
                }
            }
        }
        let t = &self.timers;
        if t.t1_ms == 0 {
            return fail(&["timers", "t1_ms"], "must be at least 1".into());
        }
        if t.t4_ms == 0 {
            return fail(&["timers", "t4_ms"], "must be at least 1".into());
        }
        if t.t1_ms > t.t2_ms {
            return Err((
                pick(text, "timers", &["t1_ms", "t2_ms"]),
                format!("t1_ms ({}) must not exceed t2_ms ({})", t.t1_ms, t.t2_ms),
            ));
        }
        let r = &self.registrar;
        if r.min_expires > r.default_expires || r.default_expires > r.max_expires {
            return Err((
                pick(text, "registrar", &["default_expires", "min_expires", "max_expires"]),
                format!(
                    "need min_expires ({}) <= default_expires ({}) <= max_expires ({})",
                    r.min_expires, r.default_expires, r.max_expires
                ),
            ));
        }
        if r.max_bindings_per_aor == 0 {
            return fail(&["registrar", "max_bindings_per_aor"], "must be at least 1".into());
        }
        let l = &self.limits;
        let ranges: [(&str, usize, usize, usize); 12] = [
            ("max_message_size", l.max_message_size, 512, 16 << 20),
            ("max_headers", l.max_headers, 8, 100_000),
            ("max_header_line", l.max_header_line, 64, 16 << 20),
            ("max_via", l.max_via, 1, 10_000),
            ("max_route", l.max_route, 1, 10_000),
            ("max_start_line", l.max_start_line, 32, 16 << 20),
            ("max_tcp_connections", l.max_tcp_connections, 1, 100_000_000),
            ("inbox_capacity", l.inbox_capacity, 1, 100_000_000),
            ("max_tcp_connections_per_ip", l.max_tcp_connections_per_ip, 1, 100_000_000),
            ("max_transactions", l.max_transactions, 1, 1_000_000_000),
            ("max_held_bytes", l.max_held_bytes, 1 << 20, 1 << 40),
            ("tcp_write_queue_bytes", l.tcp_write_queue_bytes, l.max_message_size, usize::MAX),
        ];
        for (name, v, lo, hi) in ranges {
            if v < lo || v > hi {
                let msg = if name == "tcp_write_queue_bytes" {
                    format!("{v} is less than max_message_size ({lo}): one message must fit")
                } else {
                    format!("{v} is outside {lo}..={hi}")
                };
                return fail(&["limits", name], msg);
            }
        }
        if l.tcp_idle_timeout_s == 0 {
            return fail(&["limits", "tcp_idle_timeout_s"], "must be at least 1".into());
        }
        if !(1..=3600).contains(&l.tcp_incomplete_message_timeout_s) {
            return fail(&["limits", "tcp_incomplete_message_timeout_s"], "must be between 1 and 3600".into());
        }
        if let Some((k, msg)) = self.flood.problems() {
            return fail(&["flood", k], msg);
        }
        if let Some((k, msg)) = self.overload.problems() {
            return fail(&["overload", k], msg);
        }
        if let Some((k, msg)) = self.location.problems() {
            return fail(&["location", k], msg);
        }
        if let (super::location::LocationMode::Redis, Err((k, msg))) =
            (self.location.mode, self.location.redis.validate())
        {
            return fail(&["location", "redis", k], msg);
        }
        if let Some((at, message)) = self.admin.problems() {
            let mut path = vec![Seg::Key("admin".into())];
            if let Some(i) = at.token {
                path.extend([Seg::Key("token".into()), Seg::Index(i)]);
            }
            path.push(Seg::Key(at.key.into()));
            return Err((path, message));
        }
        if let Err((i, leaf, message)) = super::routing::check(&self.route, &self.gateway_set) {
            return Err((vec![Seg::Key("route".into()), Seg::Index(i), Seg::Key(leaf.into())], message));
        }
        if let Err(e) = tracing_subscriber::EnvFilter::builder().parse(&self.log.level) {
            return fail(&["log", "level"], format!("not a log level or filter: {e}"));
        }
        if let Err((steps, message)) = super::gateways::validate(&self.gateway_set) {
            return Err((steps.into_iter().map(Seg::from).collect(), message));
        }
        Ok(())
    }
}

/// For an error about related keys of one table: the first of `keys` that the file sets (the
/// others may hold their defaults), else the first.
fn pick(text: &str, table: &str, keys: &[&str]) -> Vec<Seg> {
    let path = |k: &str| vec![Seg::Key(table.to_string()), Seg::Key(k.to_string())];
    keys.iter().map(|k| path(k)).find(|p| locate_exact(text, p).is_some()).unwrap_or_else(|| path(keys[0]))
}

/// One step of a key path.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Seg {
    Key(String),
    Index(usize),
}

impl From<super::gateways::Step> for Seg {
    fn from(s: super::gateways::Step) -> Seg {
        match s {
            super::gateways::Step::Key(k) => Seg::Key(k.to_string()),
            super::gateways::Step::Index(i) => Seg::Index(i),
        }
    }
}

impl Seg {
    fn from_serde(s: &serde_path_to_error::Segment) -> Option<Seg> {
        match s {
            serde_path_to_error::Segment::Map { key } => Some(Seg::Key(key.clone())),
            serde_path_to_error::Segment::Seq { index } => Some(Seg::Index(*index)),
            serde_path_to_error::Segment::Enum { .. } | serde_path_to_error::Segment::Unknown => None,
        }
    }
}

/// `a.b[2].c`
fn render(path: &[Seg]) -> String {
    let mut s = String::new();
    for seg in path {
        match seg {
            Seg::Key(k) => {
                if !s.is_empty() {
                    s.push('.');
                }
                s.push_str(k);
            }
            Seg::Index(i) => s.push_str(&format!("[{i}]")),
        }
    }
    s
}

/// serde's message for `deny_unknown_fields`: "unknown field `x`, expected ...".
fn unknown_field(message: &str) -> Option<String> {
    let rest = message.strip_prefix("unknown field `")?;
    Some(rest[..rest.find('`')?].to_string())
}

/// 1-based line of a byte offset.
fn line_of(text: &str, offset: usize) -> usize {
    text.as_bytes()[..offset.min(text.len())].iter().filter(|b| **b == b'\n').count() + 1
}

/// The span of the key at `path`, or of its nearest ancestor that the file contains.
fn locate(text: &str, path: &[Seg]) -> Option<Range<usize>> {
    (0..=path.len()).rev().find_map(|n| locate_exact(text, &path[..n]))
}

/// The span of exactly `path` in the document: a key's own span for table entries, the
/// element's span for array elements; `None` if the file does not contain it.
fn locate_exact(text: &str, path: &[Seg]) -> Option<Range<usize>> {
    let root = DeTable::parse(text).ok()?;
    if path.is_empty() {
        return None;
    }
    let mut table: &DeTable = root.get_ref();
    let mut value: Option<&Spanned<DeValue>> = None;
    let mut span = None;
    for seg in path {
        match seg {
            Seg::Key(k) => {
                let t = match value {
                    None => table,
                    Some(v) => v.get_ref().as_table()?,
                };
                let (key, v) = t.get_key_value(k.as_str())?;
                span = Some(key.span());
                value = Some(v);
                table = t;
            }
            Seg::Index(i) => {
                let v = value?.get_ref().as_array()?.get(*i)?;
                span = Some(v.span());
                value = Some(v);
            }
        }
    }
    span
}

/// The dotted key written on the line holding `offset`, qualified by the table header above it:
/// used for TOML syntax errors, which carry a position but no key.
fn key_at(text: &str, offset: usize) -> String {
    let line_no = line_of(text, offset);
    let mut table = String::new();
    let mut index: std::collections::HashMap<String, usize> = Default::default();
    for (n, line) in text.lines().enumerate() {
        let l = line.trim();
        let header = l
            .strip_prefix("[[")
            .and_then(|r| r.split("]]").next())
            .map(|h| (h.trim(), true))
            .or_else(|| l.strip_prefix('[').and_then(|r| r.split(']').next()).map(|h| (h.trim(), false)));
        if let Some((name, array)) = header {
            table = if array {
                let i = index.entry(name.to_string()).or_insert(usize::MAX);
                *i = i.wrapping_add(1);
                format!("{name}[{i}]")
            } else {
                name.to_string()
            };
            if n + 1 == line_no {
                return table;
            }
            continue;
        }
        if n + 1 == line_no {
            let lhs = l.split('=').next().unwrap_or("").trim().trim_matches('"');
            return match (table.is_empty(), lhs.is_empty()) {
                (true, _) => lhs.to_string(),
                (false, true) => table,
                (false, false) => format!("{table}.{lhs}"),
            };
        }
    }
    table
}
