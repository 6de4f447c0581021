//! Reads herald's Prometheus metrics endpoint (`[metrics] listen` in herald's config) and turns
//! two scrapes into the server's view of a measurement window ([`ServerMetrics`]): per message
//! type, the mean and second moment of the socket queue wait and of the service time, and the
//! datagrams the kernel dropped - the inputs of the queueing models (seed 003).
//!
//! [`fetch`] is a blocking HTTP/1.1 GET over `std::net::TcpStream` with timeouts; [`parse`]
//! reads the Prometheus text format 0.0.4 and OpenMetrics text (comments, escaped label values,
//! `+Inf`/`-Inf`/`NaN`, optional timestamps), skipping lines it cannot read rather than failing.

use crate::results::{MessageTiming, Moments, ServerMetrics};
use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::Duration;

/// Connect, write and read timeout of [`fetch`].
const TIMEOUT: Duration = Duration::from_secs(5);
/// Largest response [`fetch`] reads (herald's is tens of KiB).
const MAX_RESPONSE: u64 = 16 << 20;

/// One sample line: `name{labels} value`.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    pub name: String,
    /// In the order written.
    pub labels: Vec<(String, String)>,
    pub value: f64,
}

impl Sample {
    pub fn label(&self, name: &str) -> Option<&str> {
        self.labels.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str())
    }
}

/// The samples of one scrape.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Scrape {
    pub samples: Vec<Sample>,
}

impl Scrape {
    /// The value of the first sample called `name` whose labels include all of `labels`.
    pub fn get(&self, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
        self.matching(name, labels).next().map(|s| s.value)
    }

    /// The sum over every sample called `name` whose labels include all of `labels` (0 if none).
    pub fn sum(&self, name: &str, labels: &[(&str, &str)]) -> f64 {
        self.matching(name, labels).map(|s| s.value).sum()
    }

    fn matching<'a>(&'a self, name: &'a str, labels: &'a [(&str, &str)]) -> impl Iterator<Item = &'a Sample> + 'a {
        self.samples.iter().filter(move |s| s.name == name && labels.iter().all(|(k, v)| s.label(k) == Some(*v)))
    }

    /// The distinct values of label `label` among samples called `name`, in first-seen order.
    pub fn label_values(&self, name: &str, label: &str) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        for s in self.samples.iter().filter(|s| s.name == name) {
            if let Some(v) = s.label(label) {
                if !out.iter().any(|o| o == v) {
                    out.push(v.to_string());
                }
            }
        }
        out
    }
}

/// GETs `url` (`http://HOST:PORT/PATH`; no TLS) and parses the body.
pub fn fetch(url: &str) -> Result<Scrape, String> {
    let rest = url.strip_prefix("http://").ok_or_else(|| format!("{url}: only http:// URLs are supported"))?;
    let (authority, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, "/metrics"),
    };
    if authority.is_empty() {
        return Err(format!("{url}: no host"));
    }
    let with_port = if authority.ends_with(']') || !authority.contains(':') {
        format!("{authority}:80")
    } else {
        authority.to_string()
    };
    let addrs: Vec<_> = with_port.to_socket_addrs().map_err(|e| format!("{url}: {e}"))?.collect();
    let mut last = format!("{url}: no address");
    let mut stream = None;
    for a in addrs {
        match TcpStream::connect_timeout(&a, TIMEOUT) {
            Ok(s) => {
                stream = Some(s);
                break;
            }
            Err(e) => last = format!("{url}: connect {a}: {e}"),
        }
    }
    let mut stream = stream.ok_or(last)?;
    let io = |e: std::io::Error| format!("{url}: {e}");
    stream.set_read_timeout(Some(TIMEOUT)).map_err(io)?;
    stream.set_write_timeout(Some(TIMEOUT)).map_err(io)?;
    let request = format!(
        "GET {path} HTTP/1.1\r\nHost: {authority}\r\nAccept: text/plain\r\nUser-Agent: herald-bench\r\n\
         Connection: close\r\n\r\n"
    );
    stream.write_all(request.as_bytes()).map_err(io)?;
    let mut response = Vec::new();
    stream.take(MAX_RESPONSE + 1).read_to_end(&mut response).map_err(io)?;
    if response.len() as u64 > MAX_RESPONSE {
        return Err(format!("{url}: response larger than {MAX_RESPONSE} bytes"));
    }
    let body = http_body(&response).map_err(|e| format!("{url}: {e}"))?;
    Ok(parse(&String::from_utf8_lossy(&body)))
}

/// The body of a complete `Connection: close` HTTP/1.1 response with status 200.
fn http_body(response: &[u8]) -> Result<Vec<u8>, String> {
    let head_end = response.windows(4).position(|w| w == b"\r\n\r\n").ok_or("no complete HTTP response head")?;
    let head = String::from_utf8_lossy(&response[..head_end]);
    let body = &response[head_end + 4..];
    let mut lines = head.split("\r\n");
    let status_line = lines.next().unwrap_or("");
    let status = status_line.split(' ').nth(1).unwrap_or("");
    if status != "200" {
        return Err(format!("HTTP status line {status_line:?}"));
    }
    let header = |name: &str| {
        head.split("\r\n").skip(1).find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.trim().eq_ignore_ascii_case(name).then(|| v.trim().to_string())
        })
    };
    if header("Transfer-Encoding").is_some_and(|v| v.to_ascii_lowercase().contains("chunked")) {
        return dechunk(body);
    }
    match header("Content-Length") {
        Some(n) => {
            let n: usize = n.parse().map_err(|_| format!("bad Content-Length {n:?}"))?;
            body.get(..n).map(<[u8]>::to_vec).ok_or_else(|| format!("body cut short: {} of {n} bytes", body.len()))
        }
        None => Ok(body.to_vec()),
    }
}

/// Decodes a chunked body (RFC 9112 §7.1); trailers are ignored.
fn dechunk(mut b: &[u8]) -> Result<Vec<u8>, String> {
    let mut out = Vec::new();
    loop {
        let line_end = b.windows(2).position(|w| w == b"\r\n").ok_or("chunk size line cut short")?;
        let size_text = String::from_utf8_lossy(&b[..line_end]);
        let size_hex = size_text.split(';').next().unwrap_or("").trim();
        let size = usize::from_str_radix(size_hex, 16).map_err(|_| format!("bad chunk size {size_hex:?}"))?;
        b = &b[line_end + 2..];
        if size == 0 {
            return Ok(out);
        }
        let chunk = b.get(..size).ok_or("chunk cut short")?;
        out.extend_from_slice(chunk);
        b = b.get(size + 2..).ok_or("chunk cut short")?;
    }
}

/// Parses exposition text. Lines that are not samples (comments, `# EOF`, blank) are skipped, and
/// so are malformed lines: one odd series must not hide all the others.
pub fn parse(text: &str) -> Scrape {
    Scrape { samples: text.lines().filter_map(parse_line).collect() }
}

fn parse_line(line: &str) -> Option<Sample> {
    let line = line.trim();
    if line.is_empty() || line.starts_with('#') {
        return None;
    }
    let name_end = line.find(|c: char| c == '{' || c.is_whitespace()).unwrap_or(line.len());
    let name = &line[..name_end];
    if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':') {
        return None;
    }
    let mut rest = &line[name_end..];
    let mut labels = Vec::new();
    if let Some(after) = rest.strip_prefix('{') {
        let (parsed, tail) = parse_labels(after)?;
        labels = parsed;
        rest = tail;
    }
    // The value, then an optional timestamp.
    let value = parse_value(rest.split_whitespace().next()?)?;
    Some(Sample { name: name.to_string(), labels, value })
}

/// `a="x",b="y\"z"}` → labels and what follows the `}`.
fn parse_labels(mut s: &str) -> Option<(Vec<(String, String)>, &str)> {
    let mut labels = Vec::new();
    loop {
        s = s.trim_start();
        if let Some(tail) = s.strip_prefix('}') {
            return Some((labels, tail));
        }
        let eq = s.find('=')?;
        let key = s[..eq].trim().to_string();
        if key.is_empty() {
            return None;
        }
        s = s[eq + 1..].trim_start().strip_prefix('"')?;
        let mut value = String::new();
        let mut chars = s.char_indices();
        let end = loop {
            let (i, c) = chars.next()?;
            match c {
                '"' => break i,
                '\\' => match chars.next()?.1 {
                    'n' => value.push('\n'),
                    other => value.push(other), // \\ and \" (and any other escaped char as itself)
                },
                c => value.push(c),
            }
        };
        labels.push((key, value));
        s = s[end + 1..].trim_start();
        s = s.strip_prefix(',').unwrap_or(s);
    }
}

fn parse_value(v: &str) -> Option<f64> {
    match v {
        "+Inf" | "Inf" | "+inf" | "inf" => Some(f64::INFINITY),
        "-Inf" | "-inf" => Some(f64::NEG_INFINITY),
        "NaN" | "nan" => Some(f64::NAN),
        _ => v.parse().ok(),
    }
}

/// What herald saw between two scrapes: per message type (`type` label), the count and the
/// moments of queue wait and service time computed from the changes of `_count`, `_sum` and
/// `_squared_sum_total` (`_squared_sum` before herald's exposition became OpenMetrics, whose
/// counters end in `_total`); the socket drops; the workers gauge of `after`.
pub fn window(before: &Scrape, after: &Scrape) -> ServerMetrics {
    let delta = |name: &str, labels: &[(&str, &str)]| (after.sum(name, labels) - before.sum(name, labels)).max(0.0);
    let mut m = ServerMetrics {
        workers: after.get("herald_workers", &[]).unwrap_or(0.0) as u32,
        socket_drops: delta("herald_socket_drops_total", &[]).round() as u64,
        ..Default::default()
    };
    let moments = |family: &str, ty: &str| {
        let labels = [("type", ty)];
        let n = delta(&format!("{family}_count"), &labels);
        if n <= 0.0 {
            return Moments::default();
        }
        let squares = match format!("{family}_squared_sum_total") {
            total if after.get(&total, &labels).is_some() => total,
            _ => format!("{family}_squared_sum"),
        };
        Moments {
            mean_us: delta(&format!("{family}_sum"), &labels) / n * 1e6,
            second_moment_us2: delta(&squares, &labels) / n * 1e12,
        }
    };
    for ty in after.label_values("herald_messages_received_total", "type") {
        let count = delta("herald_messages_received_total", &[("type", &ty)]).round() as u64;
        if count == 0 {
            continue;
        }
        let timing = MessageTiming {
            count,
            queue_wait: moments("herald_queue_wait_seconds", &ty),
            service: moments("herald_service_seconds", &ty),
        };
        m.messages.insert(ty, timing);
    }
    m
}

#[cfg(test)]
mod tests {
    use super::*;

    const BEFORE: &str = r#"# HELP herald_workers Worker threads.
# TYPE herald_workers gauge
herald_workers 2
herald_socket_drops_total 5
herald_messages_received_total{type="OPTIONS",transport="udp"} 10
herald_messages_received_total{type="OPTIONS",transport="tcp"} 0
herald_messages_received_total{type="INVITE",transport="udp"} 0
herald_service_seconds_bucket{type="OPTIONS",le="+Inf"} 10
herald_service_seconds_sum{type="OPTIONS"} 0.0001
herald_service_seconds_count{type="OPTIONS"} 10
herald_service_seconds_squared_sum{type="OPTIONS"} 0.000000001
herald_queue_wait_seconds_sum{type="OPTIONS"} 0.001
herald_queue_wait_seconds_count{type="OPTIONS"} 10
herald_queue_wait_seconds_squared_sum{type="OPTIONS"} 0.0000001
"#;

    const AFTER: &str = r#"herald_workers 4
herald_socket_drops_total 9
herald_messages_received_total{type="OPTIONS",transport="udp"} 14
herald_messages_received_total{type="OPTIONS",transport="tcp"} 6
herald_messages_received_total{type="INVITE",transport="udp"} 0
herald_messages_received_total{type="REGISTER",transport="udp"} 2
herald_service_seconds_sum{type="OPTIONS"} 0.0003
herald_service_seconds_count{type="OPTIONS"} 20
herald_service_seconds_squared_sum{type="OPTIONS"} 0.000000011
herald_queue_wait_seconds_sum{type="OPTIONS"} 0.0014
herald_queue_wait_seconds_count{type="OPTIONS"} 14
herald_queue_wait_seconds_squared_sum{type="OPTIONS"} 0.0000001016
herald_service_seconds_sum{type="REGISTER"} 0.00002
herald_service_seconds_count{type="REGISTER"} 2
herald_service_seconds_squared_sum{type="REGISTER"} 0.0000000002
"#;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() <= 1e-9 * b.abs().max(1.0)
    }

    #[test]
    fn parses_the_text_format() {
        let s = parse(concat!(
            "# HELP x_total A \"quoted\" help\n",
            "# TYPE x_total counter\n",
            "\n",
            "x_total 3\n",
            "y{a=\"1\",b=\"two words\"} 4.5e-3 1700000000000\n",
            "y{ a = \"q\\\"uote\\\\back\\nnl\" , } -Inf\n",
            "h_bucket{le=\"+Inf\"} +Inf\n",
            "n NaN\n",
            "bad line here\n",
            "z{unterminated=\"x} 1\n",
            "w{} 7\n",
            "# EOF\n",
        ));
        assert_eq!(s.get("x_total", &[]), Some(3.0));
        assert_eq!(s.get("y", &[("b", "two words")]), Some(4.5e-3));
        let odd = s.samples.iter().find(|x| x.value == f64::NEG_INFINITY).unwrap();
        assert_eq!(odd.label("a"), Some("q\"uote\\back\nnl"));
        assert_eq!(s.get("h_bucket", &[("le", "+Inf")]), Some(f64::INFINITY));
        assert!(s.get("n", &[]).unwrap().is_nan());
        assert_eq!(s.get("w", &[]), Some(7.0));
        assert_eq!(s.get("z", &[]), None, "malformed lines are skipped");
        assert_eq!(s.samples.len(), 6);
    }

    #[test]
    fn window_takes_differences_and_moments() {
        let m = window(&parse(BEFORE), &parse(AFTER));
        assert_eq!(m.workers, 4);
        assert_eq!(m.socket_drops, 4);
        assert_eq!(m.messages.keys().collect::<Vec<_>>(), ["OPTIONS", "REGISTER"], "INVITE saw nothing");
        let o = &m.messages["OPTIONS"];
        assert_eq!(o.count, 10);
        // service: 10 more, sum +0.0002 s, squares +1e-8 s² → mean 20 µs, E[S²] = 1000 µs².
        assert!(close(o.service.mean_us, 20.0), "{o:?}");
        assert!(close(o.service.second_moment_us2, 1000.0), "{o:?}");
        // queue wait: 4 more (UDP only), sum +0.0004 s, squares +1.6e-9 s² → 100 µs, 400 µs².
        assert!(close(o.queue_wait.mean_us, 100.0), "{o:?}");
        assert!(close(o.queue_wait.second_moment_us2, 400.0), "{o:?}");
        // A type that first appears in `after` counts from zero; no queue wait series → zeros.
        let r = &m.messages["REGISTER"];
        assert_eq!(r.count, 2);
        assert!(close(r.service.mean_us, 10.0) && close(r.service.second_moment_us2, 100.0), "{r:?}");
        assert_eq!(r.queue_wait, Moments::default());
    }

    /// herald's OpenMetrics text (prometheus-client): counter samples with `_total`, numbers
    /// written shortest-exact, `# EOF`. The same window as from the 0.0.4 names.
    #[test]
    fn window_reads_openmetrics_names() {
        let om = |text: &str| {
            text.replace("_squared_sum{", "_squared_sum_total{").replace("0.000000001\n", "1e-9\n") + "# EOF\n"
        };
        let (before, after) = (om(BEFORE), om(AFTER));
        assert!(before.contains("herald_service_seconds_squared_sum_total{type=\"OPTIONS\"} 1e-9"), "{before}");
        assert_eq!(window(&parse(&before), &parse(&after)), window(&parse(BEFORE), &parse(AFTER)));
    }

    #[test]
    fn http_bodies() {
        let ok = b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhello";
        assert_eq!(http_body(ok).unwrap(), b"hello");
        let chunked = b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n3;x=y\r\nhel\r\n2\r\nlo\r\n0\r\n\r\n";
        assert_eq!(http_body(chunked).unwrap(), b"hello");
        assert!(http_body(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n").unwrap_err().contains("404"));
        assert!(http_body(b"HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\nshort").is_err());
        assert!(http_body(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n").is_err());
        assert!(http_body(b"garbage").is_err());
    }

    #[test]
    fn fetch_refuses_what_it_cannot_do() {
        assert!(fetch("https://127.0.0.1:1/metrics").unwrap_err().contains("http://"));
        assert!(fetch("http:///metrics").unwrap_err().contains("no host"));
    }
}
