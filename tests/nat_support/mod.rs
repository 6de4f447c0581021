//! A real NAT between a phone and herald, for tests/nat_traversal.rs: three network namespaces,
//! herald's (10.97.N.1, the "internet"), a router's (10.97.N.2 outside, 192.168.N.1 inside,
//! forwarding, nftables `masquerade` on its outside interface: a home router's NAT) and the
//! phone's (192.168.N.2, default route via the router). herald has no route to 192.168.N.0/24:
//! it can reach the phone only through the NAT's mapping, as on the internet.
//!
//! The phones are UDP sockets of the test process opened inside the phone's namespace (a
//! thread enters it with setns(2), binds, and hands the socket back), so a test writes and reads
//! every byte a phone sends and sees, keep-alives included.
//!
//! Needs root, iproute2 and nftables (`nft`); without namespaces the tests skip (as
//! tests/netns_phones.rs does), without `nft` they fail naming the package.

#![allow(dead_code)] // not every test uses every helper

use crate::common::{last_stat_row, tail, SippRun};
use crate::netns_support::{delete_netns, ip, or_skip, wait_until, Proc};
use std::fs::File;
use std::net::{SocketAddr, UdpSocket};
use std::os::fd::AsRawFd;
use std::os::raw::c_int;
use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

extern "C" {
    fn setns(fd: c_int, nstype: c_int) -> c_int;
}
const CLONE_NEWNET: c_int = 0x4000_0000;

/// The three namespaces; deleted (with everything still running inside) on drop.
pub struct NatLab {
    pub herald_ns: String,
    pub router_ns: String,
    pub phone_ns: String,
    /// herald's address (10.97.N.1).
    pub herald_ip: String,
    /// The NAT's public address (10.97.N.2): where the phone's packets come from.
    pub public_ip: String,
    /// The phone's private address (192.168.N.2).
    pub phone_ip: String,
}

impl NatLab {
    /// Makes the namespaces, links, addresses, route and NAT. `Err`: the machine cannot (no
    /// root, no iproute2, no netns support): the caller skips. A missing `nft` panics.
    pub fn create() -> Result<NatLab, String> {
        static COUNTER: AtomicU32 = AtomicU32::new(0);
        let k = COUNTER.fetch_add(1, Ordering::SeqCst);
        let pid = std::process::id();
        let n = (pid.wrapping_mul(11).wrapping_add(k)) % 250 + 1;
        let lab = NatLab {
            herald_ns: format!("hnat-h-{pid}-{k}"),
            router_ns: format!("hnat-r-{pid}-{k}"),
            phone_ns: format!("hnat-p-{pid}-{k}"),
            herald_ip: format!("10.97.{n}.1"),
            public_ip: format!("10.97.{n}.2"),
            phone_ip: format!("192.168.{n}.2"),
        };
        let gw = format!("192.168.{n}.1");
        for name in [&lab.herald_ns, &lab.router_ns, &lab.phone_ns] {
            let _ = ip(&["netns", "del", name]);
        }
        ip(&["netns", "add", &lab.herald_ns])?;
        // From here on, Drop deletes what was made.
        ip(&["netns", "add", &lab.router_ns])?;
        ip(&["netns", "add", &lab.phone_ns])?;
        let (h, r, p) = (lab.herald_ns.as_str(), lab.router_ns.as_str(), lab.phone_ns.as_str());
        ip(&["link", "add", "veth-h", "netns", h, "type", "veth", "peer", "name", "veth-out", "netns", r])?;
        ip(&["link", "add", "veth-p", "netns", p, "type", "veth", "peer", "name", "veth-in", "netns", r])?;
        ip(&["-n", h, "addr", "add", &format!("{}/24", lab.herald_ip), "dev", "veth-h"])?;
        ip(&["-n", r, "addr", "add", &format!("{}/24", lab.public_ip), "dev", "veth-out"])?;
        ip(&["-n", r, "addr", "add", &format!("{gw}/24"), "dev", "veth-in"])?;
        ip(&["-n", p, "addr", "add", &format!("{}/24", lab.phone_ip), "dev", "veth-p"])?;
        for (ns, dev) in [(h, "veth-h"), (r, "veth-out"), (r, "veth-in"), (p, "veth-p")] {
            ip(&["-n", ns, "link", "set", dev, "up"])?;
        }
        for ns in [h, r, p] {
            ip(&["-n", ns, "link", "set", "lo", "up"])?;
        }
        ip(&["-n", p, "route", "add", "default", "via", &gw])?;
        ip(&["netns", "exec", r, "sh", "-c", "echo 1 > /proc/sys/net/ipv4/ip_forward"])?;
        let nft = |args: &[&str]| {
            let mut all = vec!["netns", "exec", r, "nft"];
            all.extend_from_slice(args);
            ip(&all).unwrap_or_else(|e| panic!("NAT setup: {e} (install the Debian package nftables)"))
        };
        nft(&["add", "table", "ip", "nat"]);
        nft(&["add chain ip nat post { type nat hook postrouting priority 100 ; }"]);
        nft(&["add", "rule", "ip", "nat", "post", "oifname", "veth-out", "masquerade"]);
        Ok(lab)
    }

    /// `ip netns exec <herald's namespace> PROGRAM`.
    pub fn herald_command(&self, program: &str) -> Command {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", &self.herald_ns, program]);
        c
    }

    /// A UDP socket bound to `addr` inside namespace `ns` (read timeout 50 ms).
    pub fn udp_in(ns: &str, addr: &str) -> UdpSocket {
        let (ns, addr) = (ns.to_owned(), addr.to_owned());
        std::thread::spawn(move || {
            let f = File::open(format!("/run/netns/{ns}")).unwrap_or_else(|e| panic!("open netns {ns}: {e}"));
            // SAFETY: setns(2) on an open namespace file descriptor; it only changes this
            // thread, which ends after binding (the socket stays in the namespace).
            let rc = unsafe { setns(f.as_raw_fd(), CLONE_NEWNET) };
            assert_eq!(rc, 0, "setns {ns}: {}", std::io::Error::last_os_error());
            let s = UdpSocket::bind(&addr).unwrap_or_else(|e| panic!("bind {addr} in {ns}: {e}"));
            s.set_read_timeout(Some(Duration::from_millis(50))).unwrap();
            s
        })
        .join()
        .unwrap()
    }

    /// A TCP connection from inside namespace `ns` to `to` (read timeout 50 ms).
    pub fn tcp_in(ns: &str, to: SocketAddr) -> std::net::TcpStream {
        let ns = ns.to_owned();
        std::thread::spawn(move || {
            let f = File::open(format!("/run/netns/{ns}")).unwrap_or_else(|e| panic!("open netns {ns}: {e}"));
            // SAFETY: as in `udp_in`; the connection stays in the namespace after the thread ends.
            let rc = unsafe { setns(f.as_raw_fd(), CLONE_NEWNET) };
            assert_eq!(rc, 0, "setns {ns}: {}", std::io::Error::last_os_error());
            let c = std::net::TcpStream::connect(to).unwrap_or_else(|e| panic!("connect {to} in {ns}: {e}"));
            c.set_read_timeout(Some(Duration::from_millis(50))).unwrap();
            c
        })
        .join()
        .unwrap()
    }

    /// `GET PATH` over HTTP/1.1 to `addr` from inside namespace `ns` (the metrics endpoint of a
    /// herald there): the whole answer.
    pub fn http_get_in(ns: &str, addr: &str, path: &str) -> String {
        let (ns, addr, path) = (ns.to_owned(), addr.to_owned(), path.to_owned());
        std::thread::spawn(move || {
            use std::io::{Read, Write};
            let f = File::open(format!("/run/netns/{ns}")).unwrap_or_else(|e| panic!("open netns {ns}: {e}"));
            // SAFETY: as in `udp_in`; this thread only fetches and ends.
            let rc = unsafe { setns(f.as_raw_fd(), CLONE_NEWNET) };
            assert_eq!(rc, 0, "setns {ns}: {}", std::io::Error::last_os_error());
            let mut c = std::net::TcpStream::connect(&addr).unwrap_or_else(|e| panic!("connect {addr} in {ns}: {e}"));
            c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
            write!(c, "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n").unwrap();
            let mut out = String::new();
            let _ = c.read_to_string(&mut out);
            out
        })
        .join()
        .unwrap()
    }

    /// `herald serve --config CONFIG` in herald's namespace, log in `dir/NAME/NAME.out`; returns
    /// once herald logged "herald serving".
    /// Each herald runs in its own directory `dir/NAME` (its location database is there).
    pub fn start_herald(&self, dir: &Path, name: &str, config: &str) -> Proc {
        let dir = &dir.join(name);
        std::fs::create_dir_all(dir).unwrap();
        let conf = dir.join(format!("{name}.toml"));
        std::fs::write(&conf, config).unwrap();
        let mut cmd = self.herald_command(env!("CARGO_BIN_EXE_herald"));
        cmd.args(["serve", "--config", conf.to_str().unwrap()]).env("RUST_LOG", "info,herald=debug").current_dir(dir);
        let mut h = Proc::spawn(cmd, dir, name, false);
        let up = wait_until(Duration::from_secs(20), || h.text().contains("herald serving") || h.exited().is_some());
        assert!(up && h.exited().is_none(), "{name} did not start; log:\n{}", h.text());
        h
    }

    /// `sipp -sf tests/sipp/SCENARIO -i IP -p PORT ARGS` on the phone's side (its private
    /// address) or herald's (`phone_side` false), control port PORT+1, media PORT+2;
    /// statistics, errors and messages in `dir/NAME*`.
    pub fn sipp(&self, phone_side: bool, dir: &Path, name: &str, scenario: &str, port: u16, args: &[&str]) -> Proc {
        let (ns, ip) = if phone_side { (&self.phone_ns, &self.phone_ip) } else { (&self.herald_ns, &self.herald_ip) };
        let scenario = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/sipp").join(scenario);
        let file = |suffix: &str| dir.join(format!("{name}{suffix}")).to_str().unwrap().to_owned();
        let (p, cp, mp) = (port.to_string(), (port + 1).to_string(), (port + 2).to_string());
        let mut cmd = Command::new("ip");
        cmd.args(["netns", "exec", ns, "sipp", "-sf", scenario.to_str().unwrap(), "-i", ip, "-p", &p, "-cp", &cp])
            .args(["-mp", &mp, "-nostdin", "-trace_stat", "-stf", &file(".csv"), "-fd", "1"])
            .args(["-trace_err", "-error_file", &file("_errors.log"), "-trace_msg", "-message_file"])
            .arg(file("_messages.log"))
            .args(args)
            .current_dir(dir);
        Proc::spawn(cmd, dir, name, false)
    }

    /// Waits for a [`NatLab::sipp`] run to end (killed after `timeout`) and reads its results.
    pub fn sipp_result(mut p: Proc, dir: &Path, timeout: Duration) -> SippRun {
        let name = p.name.clone();
        let Some(status) = p.wait(timeout) else {
            panic!("sipp {name} still running after {timeout:?}:\n{}", p.text());
        };
        let stats = last_stat_row(&dir.join(format!("{name}.csv")));
        SippRun { name: name.clone(), status, stats, errors: tail(&dir.join(format!("{name}_errors.log")), 40) }
    }
}

impl Drop for NatLab {
    fn drop(&mut self) {
        for ns in [&self.phone_ns, &self.router_ns, &self.herald_ns] {
            delete_netns(ns);
        }
    }
}

/// Creates the lab, or prints why the test is skipped and returns `None`.
pub fn lab_or_skip(test: &str) -> Option<NatLab> {
    or_skip(test, NatLab::create)
}

/// A UA on one socket: sends text, and reads datagrams, keeping the CRLF keep-alives apart.
pub struct Ua {
    pub sock: UdpSocket,
    pub addr: SocketAddr,
    /// CRLF keep-alives received so far, with their source.
    pub keepalives: Vec<SocketAddr>,
    /// Every SIP message received so far (start line first), with its source.
    pub log: Vec<(String, SocketAddr)>,
}

impl Ua {
    pub fn new(sock: UdpSocket) -> Ua {
        let addr = sock.local_addr().unwrap();
        Ua { sock, addr, keepalives: Vec::new(), log: Vec::new() }
    }

    pub fn send(&self, to: SocketAddr, text: &str) {
        self.sock.send_to(text.replace("\r\n", "\n").replace('\n', "\r\n").as_bytes(), to).unwrap();
    }

    /// Reads until a SIP message for which `pred` holds arrives (returned with its source) or
    /// `timeout` passes.
    pub fn wait_for(&mut self, timeout: Duration, mut pred: impl FnMut(&str) -> bool) -> Option<(String, SocketAddr)> {
        let deadline = Instant::now() + timeout;
        let mut buf = vec![0u8; 65536];
        while Instant::now() < deadline {
            match self.sock.recv_from(&mut buf) {
                Ok((n, from)) => {
                    let text = String::from_utf8_lossy(&buf[..n]).into_owned();
                    if text.trim().is_empty() {
                        self.keepalives.push(from);
                        continue;
                    }
                    self.log.push((text.clone(), from));
                    if pred(&text) {
                        return Some((text, from));
                    }
                }
                Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {}
                Err(e) => panic!("recv: {e}"),
            }
        }
        None
    }

    /// What arrived so far, for failure messages.
    pub fn seen(&self) -> String {
        self.log
            .iter()
            .map(|(m, from)| format!("from {from}: {}", m.lines().next().unwrap_or("")))
            .collect::<Vec<_>>()
            .join("\n")
    }
}

/// The value of the first header `name` (case-insensitive) of a message.
pub fn header<'a>(msg: &'a str, name: &str) -> Option<&'a str> {
    msg.lines().find_map(|l| {
        let (n, v) = l.split_once(':')?;
        n.trim().eq_ignore_ascii_case(name).then(|| v.trim())
    })
}

/// The URI inside the first `<...>` of a header value (or the value itself).
pub fn uri_of(value: &str) -> &str {
    match (value.find('<'), value.find('>')) {
        (Some(a), Some(b)) if a < b => &value[a + 1..b],
        _ => value,
    }
}

/// The Request-URI of a request.
pub fn request_uri(msg: &str) -> &str {
    msg.lines().next().and_then(|l| l.split_whitespace().nth(1)).unwrap_or("")
}

/// The status of a response.
pub fn status(msg: &str) -> Option<u16> {
    let line = msg.lines().next()?;
    line.strip_prefix("SIP/2.0 ")?.get(..3)?.parse().ok()
}

/// A response to `req` as a UA writes it: Via, Record-Route, From, Call-ID and CSeq copied, To
/// with `tag`, and `contact` when given.
pub fn respond(req: &str, code: u16, reason: &str, tag: &str, contact: Option<&str>) -> String {
    let mut s = format!("SIP/2.0 {code} {reason}\n");
    for l in req.lines().skip(1) {
        let Some((n, v)) = l.split_once(':') else { break };
        let n = n.trim();
        if ["Via", "v", "Record-Route", "From", "f", "Call-ID", "i", "CSeq"].iter().any(|h| n.eq_ignore_ascii_case(h)) {
            s += &format!("{l}\n");
        } else if n.eq_ignore_ascii_case("To") || n == "t" {
            let v = v.trim();
            if v.contains(";tag=") {
                s += &format!("To: {v}\n");
            } else {
                s += &format!("To: {v};tag={tag}\n");
            }
        }
    }
    if let Some(c) = contact {
        s += &format!("Contact: <{c}>\n");
    }
    s += "Content-Length: 0\n\n";
    s
}

/// A UA on a TCP connection: messages without bodies, framed by their blank line (RFC 3261
/// §18.3 with Content-Length 0, which is all these tests send and herald relays here).
pub struct TcpUa {
    pub conn: std::net::TcpStream,
    buf: Vec<u8>,
    /// Every SIP message received so far (start line first).
    pub log: Vec<String>,
}

impl TcpUa {
    pub fn new(conn: std::net::TcpStream) -> TcpUa {
        TcpUa { conn, buf: Vec::new(), log: Vec::new() }
    }

    pub fn send(&mut self, text: &str) {
        use std::io::Write;
        self.conn.write_all(text.replace("\r\n", "\n").replace('\n', "\r\n").as_bytes()).unwrap();
    }

    /// Reads until a message for which `pred` holds arrives, or `timeout` passes.
    pub fn wait_for(&mut self, timeout: Duration, mut pred: impl FnMut(&str) -> bool) -> Option<String> {
        use std::io::Read;
        let deadline = Instant::now() + timeout;
        let mut chunk = [0u8; 8192];
        loop {
            while let Some(end) = self.buf.windows(4).position(|w| w == b"\r\n\r\n") {
                let msg: Vec<u8> = self.buf.drain(..end + 4).collect();
                let text = String::from_utf8_lossy(&msg).trim_start().to_owned();
                if text.is_empty() {
                    continue; // a CRLF keep-alive
                }
                self.log.push(text.clone());
                if pred(&text) {
                    return Some(text);
                }
            }
            if Instant::now() > deadline {
                return None;
            }
            match self.conn.read(&mut chunk) {
                Ok(0) => return None,
                Ok(n) => self.buf.extend_from_slice(&chunk[..n]),
                Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {}
                Err(e) => panic!("recv: {e}"),
            }
        }
    }

    /// What arrived so far, for failure messages.
    pub fn seen(&self) -> String {
        self.log.iter().map(|m| m.lines().next().unwrap_or("").to_owned()).collect::<Vec<_>>().join("\n")
    }
}
