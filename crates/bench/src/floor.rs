//! `herald bench floor`: what this machine's kernel charges for the datagrams of one call,
//! whatever the server or the load generator does with them.
//!
//! A proxy relaying the calls of `herald bench calls` (or SIPp's uac and uas) through itself,
//! record-routing, receives 6 datagrams per call (INVITE, 180, 200, ACK, BYE, 200) and sends 7
//! (a 100 Trying and the 6 relayed); the two ends of a generator together send 6 and receive 7.
//! On loopback the sending system call also runs the receive path of the datagram (IP input,
//! the socket queue) and wakes the reader, so a send is charged for both ends of the wire.
//!
//! The floor is therefore `sends × cost of a send to a sleeping reader + receives × cost of a
//! receive in a full batch`: a server that never woke up, read everything in batches of 32 and
//! spent no time on SIP would still pay that much per call. Comparing it with a target (a
//! quarter of Kamailio's CPU per call, a fifth of SIPp's) tells whether the target is within
//! reach of any implementation on this machine. Every cost is measured as the CPU time of the
//! thread making the system call (CLOCK_THREAD_CPUTIME_ID around it, the clock's own cost
//! subtracted): the same accounting as the utime + stime the benchmarks read from /proc.

use herald_sys::{send_batch, thread_cpu_ns, RecvBatch, Wait, BATCH};
use serde::{Deserialize, Serialize};
use std::io;
use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Datagrams a proxy sends per relayed call (100 Trying, INVITE, 180, 200, ACK, BYE, 200).
pub const PROXY_SENDS: u32 = 7;
/// Datagrams a proxy receives per relayed call (INVITE, 180, 200, ACK, BYE, 200).
pub const PROXY_RECEIVES: u32 = 6;
/// Datagrams the two ends of a generator send per call (INVITE, ACK, BYE; 180, 200, 200).
pub const GENERATOR_SENDS: u32 = 6;
/// Datagrams they receive per call (100, 180, 200, 200; INVITE, ACK, BYE).
pub const GENERATOR_RECEIVES: u32 = 7;
/// Receive slot size: room for any datagram these measurements send.
const SLOT: usize = 2048;

/// What to measure with.
#[derive(Debug, Clone, Copy)]
pub struct Options {
    /// Datagram payload, bytes (a SIP message of a call averages 500 to 700).
    pub size: usize,
    /// Samples per measurement.
    pub count: usize,
}

/// The measured costs, µs of CPU time each.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Costs {
    /// One datagram sent (sendmmsg of one) to a socket whose reader is blocked in recvmmsg:
    /// includes delivering it and waking the reader.
    pub send_to_sleeping_reader_us: f64,
    /// Per datagram, sent 32 at a time to a reader that never sleeps (no wake-up to pay).
    pub send_batched_to_busy_reader_us: f64,
    /// One queued datagram read with a recvmmsg of its own.
    pub recv_one_us: f64,
    /// Per datagram, 32 queued datagrams read with one recvmmsg.
    pub recv_batched_us: f64,
    /// The reader's CPU for each datagram that woke it: the wake-up plus its recvmmsg.
    pub wake_and_recv_us: f64,
    /// One timed sleep of 1 ms and the wake-up after it (a timer-driven loop's tick).
    pub timer_wake_us: f64,
}

/// The costs and the floors they imply.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Floor {
    pub size: usize,
    pub count: usize,
    pub costs: Costs,
    /// A proxy's floor per call: [`PROXY_SENDS`] sends to sleeping readers and
    /// [`PROXY_RECEIVES`] batched receives, nothing else.
    pub proxy_floor_us: f64,
    /// A generator's floor per call (caller and callee together).
    pub generator_floor_us: f64,
}

impl Floor {
    pub fn from_costs(size: usize, count: usize, costs: Costs) -> Floor {
        let floor = |sends: u32, receives: u32| {
            f64::from(sends) * costs.send_to_sleeping_reader_us + f64::from(receives) * costs.recv_batched_us
        };
        Floor {
            size,
            count,
            costs,
            proxy_floor_us: floor(PROXY_SENDS, PROXY_RECEIVES),
            generator_floor_us: floor(GENERATOR_SENDS, GENERATOR_RECEIVES),
        }
    }
}

/// Runs every measurement (about `count` × 3 ms).
pub fn measure(opts: Options) -> io::Result<Floor> {
    let clock = clock_cost_ns();
    let (send_to_sleeping_reader_us, wake_and_recv_us) = send_to_sleeping_reader(opts, clock)?;
    let costs = Costs {
        send_to_sleeping_reader_us,
        send_batched_to_busy_reader_us: send_batched_to_busy_reader(opts, clock)?,
        recv_one_us: receive(opts, clock, 1)?,
        recv_batched_us: receive(opts, clock, BATCH)?,
        wake_and_recv_us,
        timer_wake_us: timer_wake(opts),
    };
    Ok(Floor::from_costs(opts.size, opts.count, costs))
}

/// What one pair of [`thread_cpu_ns`] reads adds to a measured interval, ns.
fn clock_cost_ns() -> u64 {
    const N: u64 = 2000;
    let start = thread_cpu_ns();
    for _ in 0..N {
        std::hint::black_box(thread_cpu_ns());
    }
    (thread_cpu_ns() - start) / N
}

/// CPU ns of `f`, the clock's own cost subtracted.
fn cpu_of<T>(clock_ns: u64, f: impl FnOnce() -> T) -> (T, u64) {
    let start = thread_cpu_ns();
    let out = f();
    let spent = thread_cpu_ns().saturating_sub(start).saturating_sub(clock_ns);
    (out, spent)
}

fn pair() -> io::Result<(UdpSocket, UdpSocket)> {
    let lo: SocketAddr = "127.0.0.1:0".parse().expect("literal address");
    let a = UdpSocket::bind(lo)?;
    let b = UdpSocket::bind(lo)?;
    let _ = socket2::SockRef::from(&b).set_recv_buffer_size(4 << 20);
    a.connect(b.local_addr()?)?;
    Ok((a, b))
}

/// Sends `n` (at most [`BATCH`]) copies of `payload` with one sendmmsg on a connected socket,
/// waiting for room as a blocking socket does.
fn send_n(sock: &UdpSocket, payload: &[u8], n: usize) -> io::Result<usize> {
    let copies = [payload; BATCH];
    match send_batch(sock, &copies[..n.min(BATCH)], Wait::IfBlocking) {
        (0, Some(e)) => Err(e),
        (sent, _) => Ok(sent),
    }
}

/// One recvmmsg of up to `max` datagrams (payloads only, as a bare measurement of the call);
/// how many it read (0 on EAGAIN or timeout).
fn recv(slots: &mut RecvBatch, sock: &UdpSocket, max: usize, wait: Wait) -> usize {
    slots.recv_at_most(sock, max, wait).unwrap_or(0)
}

/// (send to a sleeping reader, the reader's wake-up and receive), µs per datagram. The writer
/// waits 1 ms between datagrams, so the reader is asleep in recvmmsg again each time.
fn send_to_sleeping_reader(opts: Options, clock: u64) -> io::Result<(f64, f64)> {
    let (tx, rx) = pair()?;
    rx.set_read_timeout(Some(Duration::from_millis(50)))?;
    let stop = Arc::new(AtomicBool::new(false));
    let reader_ns = Arc::new(AtomicU64::new(0));
    let got = Arc::new(AtomicU64::new(0));
    let reader = {
        let (stop, reader_ns, got) = (stop.clone(), reader_ns.clone(), got.clone());
        std::thread::spawn(move || {
            let mut slots = RecvBatch::payload_only(SLOT);
            let start = thread_cpu_ns();
            while !stop.load(Ordering::Relaxed) {
                let n = recv(&mut slots, &rx, BATCH, Wait::IfBlocking);
                got.fetch_add(n as u64, Ordering::Relaxed);
            }
            reader_ns.store(thread_cpu_ns() - start, Ordering::Relaxed);
        })
    };
    let payload = vec![b'x'; opts.size];
    let mut spent = 0;
    for _ in 0..opts.count {
        std::thread::sleep(Duration::from_millis(1));
        let (sent, ns) = cpu_of(clock, || send_n(&tx, &payload, 1));
        sent?;
        spent += ns;
    }
    // Every datagram read before the reader stops (its CPU is shared out over them), but never
    // a wait without end: a datagram the kernel dropped would never come.
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while got.load(Ordering::Relaxed) < opts.count as u64 && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(1));
    }
    stop.store(true, Ordering::Relaxed);
    let _ = reader.join();
    // The reader's idle timeouts (every 50 ms) are part of its CPU too, but a few per second
    // against a thousand wake-ups by datagrams.
    let n = opts.count as f64;
    Ok((spent as f64 / n / 1000.0, reader_ns.load(Ordering::Relaxed) as f64 / n / 1000.0))
}

/// Per datagram, sent [`BATCH`] at a time to a reader spinning on a non-blocking socket.
fn send_batched_to_busy_reader(opts: Options, clock: u64) -> io::Result<f64> {
    let (tx, rx) = pair()?;
    rx.set_nonblocking(true)?;
    let stop = Arc::new(AtomicBool::new(false));
    let reader = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            let mut slots = RecvBatch::payload_only(SLOT);
            while !stop.load(Ordering::Relaxed) {
                recv(&mut slots, &rx, BATCH, Wait::Never);
            }
        })
    };
    let payload = vec![b'x'; opts.size];
    let (mut spent, mut sent) = (0, 0);
    let rounds = opts.count.div_ceil(BATCH).max(1);
    for _ in 0..rounds {
        std::thread::sleep(Duration::from_millis(1));
        let (n, ns) = cpu_of(clock, || send_n(&tx, &payload, BATCH));
        sent += n?;
        spent += ns;
    }
    stop.store(true, Ordering::Relaxed);
    let _ = reader.join();
    Ok(spent as f64 / sent.max(1) as f64 / 1000.0)
}

/// Per datagram, reading `batch` queued datagrams with one non-blocking recvmmsg.
fn receive(opts: Options, clock: u64, batch: usize) -> io::Result<f64> {
    let (tx, rx) = pair()?;
    rx.set_nonblocking(true)?;
    let payload = vec![b'x'; opts.size];
    let mut slots = RecvBatch::payload_only(SLOT);
    let (mut spent, mut read) = (0, 0);
    let rounds = opts.count.div_ceil(batch).max(1);
    for _ in 0..rounds {
        let mut queued = 0;
        while queued < batch {
            queued += send_n(&tx, &payload, batch - queued)?;
        }
        let (n, ns) = cpu_of(clock, || recv(&mut slots, &rx, batch, Wait::Never));
        read += n;
        spent += ns;
        // Anything the batch call missed (it should not) is drained outside the measurement.
        while recv(&mut slots, &rx, BATCH, Wait::Never) > 0 {}
    }
    Ok(spent as f64 / read.max(1) as f64 / 1000.0)
}

/// CPU per 1-ms timed sleep and its wake-up, µs.
fn timer_wake(opts: Options) -> f64 {
    let start = thread_cpu_ns();
    for _ in 0..opts.count {
        std::thread::sleep(Duration::from_millis(1));
    }
    (thread_cpu_ns() - start) as f64 / opts.count as f64 / 1000.0
}

/// The table `herald bench floor` prints.
pub fn render(f: &Floor) -> String {
    let c = &f.costs;
    let mut out = format!("CPU per datagram on loopback, {} bytes, {} samples each (µs):\n", f.size, f.count);
    for (what, v) in [
        ("send, reader asleep (wakes it)", c.send_to_sleeping_reader_us),
        ("send, 32 per call, reader busy", c.send_batched_to_busy_reader_us),
        ("receive, one per call", c.recv_one_us),
        ("receive, 32 per call", c.recv_batched_us),
        ("reader woken by a datagram (wake + receive)", c.wake_and_recv_us),
        ("1 ms timed sleep and wake-up", c.timer_wake_us),
    ] {
        out += &format!("  {what:<44} {v:>8.2}\n");
    }
    out += &format!(
        "floor per call, proxy ({PROXY_SENDS} sends, {PROXY_RECEIVES} batched receives, no wake-ups):     {:>8.1} µs\n",
        f.proxy_floor_us
    );
    out += &format!(
        "floor per call, generator ({GENERATOR_SENDS} sends, {GENERATOR_RECEIVES} batched receives, no wake-ups): {:>8.1} µs\n",
        f.generator_floor_us
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn floors_add_up_the_datagrams_of_one_call() {
        let costs = Costs {
            send_to_sleeping_reader_us: 8.0,
            send_batched_to_busy_reader_us: 5.0,
            recv_one_us: 3.0,
            recv_batched_us: 1.5,
            wake_and_recv_us: 12.0,
            timer_wake_us: 20.0,
        };
        let f = Floor::from_costs(600, 10, costs);
        assert_eq!(f.proxy_floor_us, 7.0 * 8.0 + 6.0 * 1.5);
        assert_eq!(f.generator_floor_us, 6.0 * 8.0 + 7.0 * 1.5);
        let table = render(&f);
        assert!(table.contains("65.0 µs") && table.contains("58.5 µs"), "{table}");
    }

    #[test]
    fn measures_positive_costs_on_loopback() {
        let f = measure(Options { size: 600, count: 50 }).expect("loopback sockets");
        let c = f.costs;
        for v in [
            c.send_to_sleeping_reader_us,
            c.send_batched_to_busy_reader_us,
            c.recv_one_us,
            c.recv_batched_us,
            c.wake_and_recv_us,
        ] {
            assert!(v > 0.0 && v < 10_000.0, "{c:?}");
        }
        assert!(c.timer_wake_us >= 0.0, "{c:?}");
        assert_eq!(f, Floor::from_costs(600, 50, c));
    }
}
