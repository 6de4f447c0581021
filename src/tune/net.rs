//! Socket and network settings: receive/send buffer ceilings, UDP memory, the per-CPU input
//! backlog, the listen queue ceiling, and herald's own `udp_buffer_bytes`, all sized from the
//! measured service time and socket memory per message.

use super::inputs::Inputs;
use super::recommend;
use super::setting::{read_value, Setting, Target};
use std::path::{Path, PathBuf};

/// What herald asks listen(2) for (crates/server/src/bind.rs LISTEN_BACKLOG); the kernel
/// silently caps it at somaxconn.
const HERALD_LISTEN_BACKLOG: u64 = 1024;

fn sysctl(name: &str) -> (PathBuf, Result<String, String>) {
    let path = Path::new("/proc/sys").join(name.replace('.', "/"));
    let v = read_value(&path);
    (path, v)
}

fn number(v: &Result<String, String>) -> Option<u64> {
    v.as_ref().ok()?.trim().parse().ok()
}

pub fn settings(i: &Inputs) -> Vec<Setting> {
    let w = &i.work;
    let page = i.machine.page;
    let wait_us = w.target_wait_ms * 1000.0;
    let queue = recommend::queue_messages(wait_us, w.service_us);
    let bytes = recommend::queue_bytes(queue, w.truesize);
    let request = recommend::sockopt_request(bytes, page);
    let queue_why = format!(
        "a worker's socket should hold the messages it serves within the target wait W = {} ms: K = W / S = {} µs / {:.1} µs = \
         {queue} messages (seed 003 ch. 5: the socket queue is the K of an M/G/c/K queue; a message behind K others waits K·S, \
         and one kept longer than RFC 3261's T1 = 500 ms has been retransmitted already) × {} bytes of socket memory each \
         ({}; {}-byte messages, RFC 3261 §18.1.1's UDP ceiling unless --message-bytes) = {bytes} bytes",
        w.target_wait_ms, wait_us, w.service_us, w.truesize, w.truesize_source, w.message_bytes
    );
    let mut out = Vec::new();
    out.push(
        Setting::new("herald [server] udp_buffer_bytes", Target::Advice, Ok(w.udp_buffer_bytes.to_string())).recommend(
            request.to_string(),
            format!(
                "{queue_why}; setsockopt doubles what it is given (socket(7)), so ask for half, in whole pages. The configured \
                 {} holds {} messages = {:.1} ms of work. Set it in the configuration file (herald tune does not edit it)",
                w.udp_buffer_bytes,
                2 * w.udp_buffer_bytes / w.truesize.max(1),
                (2 * w.udp_buffer_bytes / w.truesize.max(1)) as f64 * w.service_us / 1000.0
            ),
        ),
    );
    let wanted = request.max(w.udp_buffer_bytes);
    let (path, current) = sysctl("net.core.rmem_max");
    let rmem_max = number(&current).unwrap_or(0).max(wanted);
    out.push(Setting::new("net.core.rmem_max", Target::File(path), current).recommend(
        rmem_max.to_string(),
        format!(
            "the most SO_RCVBUF a process without CAP_NET_ADMIN gets: herald asks with SO_RCVBUFFORCE, which root passes, but \
             an unprivileged herald is cut to rmem_max. Needed: max(configured {}, recommended {request}) = {wanted}; never \
             lowered (other programs may rely on the ceiling)",
            w.udp_buffer_bytes
        ),
    ));
    let (path, current) = sysctl("net.core.rmem_default");
    let keep = current.clone().unwrap_or_default();
    out.push(Setting::new("net.core.rmem_default", Target::File(path), current).recommend(
        keep,
        "the buffer of sockets that do not set SO_RCVBUF; herald sets its own, so raising it would only cost every other \
         socket memory: keep",
    ));
    let (path, current) = sysctl("net.core.wmem_max");
    let wmem_max = number(&current).unwrap_or(0).max(w.udp_buffer_bytes);
    out.push(Setting::new("net.core.wmem_max", Target::File(path), current).recommend(
        wmem_max.to_string(),
        format!(
            "herald asks for SO_SNDBUF = udp_buffer_bytes ({}) too; UDP sends leave at once, so only an unprivileged herald \
             needs the ceiling to match its configuration; never lowered",
            w.udp_buffer_bytes
        ),
    ));
    let (path, current) = sysctl("net.ipv4.udp_mem");
    let now: Vec<u64> =
        current.as_ref().map(|v| v.split_whitespace().filter_map(|x| x.parse().ok()).collect()).unwrap_or_default();
    let buffer = 2 * w.udp_buffer_bytes.max(request);
    if now.len() == 3 {
        let r = recommend::udp_mem([now[0], now[1], now[2]], w.udp_sockets, buffer, page);
        out.push(Setting::new("net.ipv4.udp_mem", Target::File(path), current).recommend(
            format!("{} {} {}", r[0], r[1], r[2]),
            format!(
                "pages for all UDP sockets together (min, pressure, max; udp(7)): above max the kernel drops before a \
                 socket's own buffer is full. herald's {} UDP sockets ({} workers × UDP listen addresses) × {buffer} bytes \
                 each = {} pages of {page} bytes; pressure and max raised to that, never lowered",
                w.udp_sockets,
                w.workers,
                w.udp_sockets.saturating_mul(buffer).div_ceil(page)
            ),
        ));
    } else {
        out.push(Setting::new("net.ipv4.udp_mem", Target::File(path), current));
    }
    let (path, current) = sysctl("net.core.netdev_max_backlog");
    let slice = i.machine.base_slice_ns.unwrap_or(i.slice_ns());
    let backlog = recommend::netdev_backlog(w.messages_per_s, slice, number(&current).unwrap_or(0));
    out.push(Setting::new("net.core.netdev_max_backlog", Target::File(path), current).recommend(
        backlog.to_string(),
        format!(
            "packets a CPU queues before its receive softirq runs (loopback, RPS and non-NAPI drivers queue here). When the \
             softirq is deferred to ksoftirqd it waits up to one slice ({slice} ns) of the running task, so the queue must \
             hold what arrives meanwhile if it all lands on one CPU: λ × slice = {:.0}/s ({}) × {slice} ns = {} packets; never \
             lowered",
            w.messages_per_s,
            w.rate_source,
            (w.messages_per_s * slice as f64 / 1e9).ceil()
        ),
    ));
    let (path, current) = sysctl("net.core.somaxconn");
    let somaxconn = if w.tcp_listeners == 0 {
        number(&current).unwrap_or(0)
    } else {
        number(&current).unwrap_or(0).max(HERALD_LISTEN_BACKLOG)
    };
    out.push(Setting::new("net.core.somaxconn", Target::File(path), current).recommend(
        somaxconn.to_string(),
        format!(
            "the kernel cuts every listen(2) backlog to somaxconn; herald asks for {HERALD_LISTEN_BACKLOG} per listener (a \
             burst of clients reconnecting after a restart) and has {} TCP listeners; never lowered (per network namespace)",
            w.tcp_listeners
        ),
    ));
    out
}
