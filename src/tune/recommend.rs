//! The arithmetic behind every recommendation, apart from the machine reads so it can be tested:
//! socket queues sized from herald's service time and the wait the operator accepts (seed 003,
//! ch. 5: the socket queue is the K of an M/G/c/K system, and a message queued behind K others
//! waits K service times), scheduler slices sized to herald's service time (seed 003, ch. 6-7),
//! and the kernel's own bounds (sched_setattr(2), socket(7)).

/// The shortest and longest custom slice the kernel accepts: sched_setattr(2) clamps
/// `sched_runtime` of a fair task to 0.1..=100 ms (kernel/sched/syscalls.c). Seed 003 ch. 7 met
/// the same floor for `sched_min_granularity_ns` ("the minimum value allowed ... is 100,000").
pub const SLICE_MIN_NS: u64 = 100_000;
pub const SLICE_MAX_NS: u64 = 100_000_000;

/// Messages a worker's socket should hold: the ones it can serve within the target wait. A
/// message that finds K queued ahead of it waits about K × S before herald starts on it, so
/// K = ⌈W / S⌉; a deeper queue only holds messages that will be answered after the client has
/// given up waiting for them (RFC 3261 T1, 500 ms, triggers its retransmission).
pub fn queue_messages(target_wait_us: f64, service_us: f64) -> u64 {
    if service_us <= 0.0 || target_wait_us <= 0.0 {
        return 1;
    }
    (target_wait_us / service_us).ceil().max(1.0) as u64
}

/// Bytes of socket memory those messages take: the kernel charges each datagram's `truesize`
/// (payload plus sk_buff overhead, rounded to its allocation), not its length, against SO_RCVBUF.
pub fn queue_bytes(messages: u64, truesize: u64) -> u64 {
    messages.saturating_mul(truesize.max(1))
}

/// The SO_RCVBUF value to ask for so that the socket holds `bytes`: setsockopt doubles what it
/// is given ("the kernel doubles this value ... to allow space for bookkeeping overhead",
/// socket(7)), rounded up to whole pages.
pub fn sockopt_request(bytes: u64, page: u64) -> u64 {
    round_up(bytes.div_ceil(2), page.max(1))
}

pub fn round_up(v: u64, unit: u64) -> u64 {
    v.div_ceil(unit.max(1)) * unit.max(1)
}

/// The slice a herald worker should ask the scheduler for: the time it needs to finish what one
/// wake-up hands it, a full `recvmmsg` batch of `batch` messages at `service_us` each. Seed 003
/// ch. 6 (finding 2) set `sched_min_granularity_ns` to the measured mean service time so that a
/// thread finishes its work before it can be preempted; a shorter slice also lets a waking worker
/// preempt sooner (EEVDF picks the earliest virtual deadline, and the deadline is one slice
/// away), which is what seed 003 got from `sched_wakeup_granularity_ns = 0` (finding 3).
pub fn slice_ns(service_us: f64, batch: u64) -> u64 {
    let ns = (service_us * batch as f64 * 1_000.0).ceil();
    (ns as u64).clamp(SLICE_MIN_NS, SLICE_MAX_NS)
}

/// Seed 003 ch. 7 (§7.4.2): `sched_latency_ns` of 800 µs per core gave the lowest drop rate on
/// 2-, 4- and 6-core servers (kernels before 6.6 only).
pub fn latency_ns(cores: usize) -> u64 {
    800_000 * cores.max(1) as u64
}

/// Seed 003 ch. 7 (§7.5.1): `sched_migration_cost` 0 where all cores share one processor
/// (migration costs little cache and an idle core should pull work at once), 500 µs where they
/// span processors (a move loses the cache; keep threads unless a core is really idle).
pub fn migration_cost_ns(packages: usize) -> u64 {
    if packages <= 1 {
        0
    } else {
        500_000
    }
}

/// `netdev_max_backlog`: packets a CPU queues before the receive softirq runs (loopback, RPS and
/// non-NAPI drivers queue here). When the softirq is deferred to ksoftirqd, that thread waits
/// for the running task's slice, so the queue must hold what arrives in one slice when all of it
/// lands on one CPU: ⌈rate × slice⌉. Never below `current` (a ceiling others may need).
pub fn netdev_backlog(packets_per_s: f64, slice_ns: u64, current: u64) -> u64 {
    let need = (packets_per_s * slice_ns as f64 / 1e9).ceil() as u64;
    need.max(current)
}

/// `udp_mem` (pages, all UDP sockets together): the pressure and hard limits must let every
/// herald socket fill its buffer at once, else the kernel drops before SO_RCVBUF is reached.
/// Returns [min, pressure, max], each never lowered.
pub fn udp_mem(current: [u64; 3], sockets: u64, buffer_bytes: u64, page: u64) -> [u64; 3] {
    let need = sockets.saturating_mul(buffer_bytes).div_ceil(page.max(1));
    [current[0], current[1].max(need), current[2].max(need)]
}

/// File descriptors herald can hold: one per TCP connection it accepts (`[limits]
/// max_tcp_connections`), one per listening and UDP socket of each worker, and `spare` for
/// everything else (epoll, eventfds, the metrics and admin endpoints, log files).
pub fn nofile(max_tcp_connections: u64, sockets: u64, spare: u64) -> u64 {
    max_tcp_connections + sockets + spare
}

/// Worker utilisation at `messages_per_s`: ρ = λ·S / c.
pub fn utilisation(messages_per_s: f64, service_us: f64, workers: usize) -> f64 {
    messages_per_s * service_us / 1e6 / workers.max(1) as f64
}

/// How much longer a message takes under `schedutil` than at full clock: it picks a frequency
/// of about 1.25 × utilisation × f_max (Documentation/scheduler/schedutil.rst), so a core busy
/// a fraction ρ runs at min(1, 1.25ρ) of its top speed and every message takes 1/that longer.
pub fn schedutil_stretch(utilisation: f64) -> f64 {
    let f = (1.25 * utilisation).clamp(0.05, 1.0);
    1.0 / f
}

/// A CPU mask (hex, as /sys writes it) of cores 0..cores.
pub fn all_cores_mask(cores: usize) -> String {
    let cores = cores.max(1);
    let mut words: Vec<String> = Vec::new();
    let mut left = cores;
    while left > 0 {
        let bits = left.min(32);
        let word: u64 = if bits == 32 { 0xffff_ffff } else { (1u64 << bits) - 1 };
        words.push(format!("{word:08x}"));
        left -= bits;
    }
    words.reverse();
    let joined = words.join(",");
    let trimmed = joined.trim_start_matches('0');
    trimmed.strip_prefix(',').unwrap_or(trimmed).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_queue_holds_what_a_worker_serves_within_the_target_wait() {
        assert_eq!(queue_messages(50_000.0, 10.0), 5_000);
        assert_eq!(queue_messages(50_000.0, 7.0), 7_143); // rounded up
        assert_eq!(queue_messages(50_000.0, 0.0), 1);
        assert_eq!(queue_bytes(5_000, 2_304), 11_520_000);
        // setsockopt doubles: ask for half, in whole pages
        assert_eq!(sockopt_request(11_520_000, 4096), 5_763_072);
        assert_eq!(sockopt_request(1, 4096), 4096);
    }

    #[test]
    fn slices_cover_one_batch_within_the_kernels_bounds() {
        assert_eq!(slice_ns(10.0, 32), 320_000);
        assert_eq!(slice_ns(1.0, 32), SLICE_MIN_NS);
        assert_eq!(slice_ns(10_000.0, 32), SLICE_MAX_NS);
        assert_eq!(latency_ns(2), 1_600_000);
        assert_eq!(migration_cost_ns(1), 0);
        assert_eq!(migration_cost_ns(2), 500_000);
    }

    #[test]
    fn ceilings_are_raised_to_the_need_and_never_lowered() {
        assert_eq!(netdev_backlog(60_000.0, 1_400_000, 1000), 1000);
        assert_eq!(netdev_backlog(1_000_000.0, 1_400_000, 1000), 1400);
        assert_eq!(udp_mem([10, 20, 30], 2, 8 << 20, 4096), [10, 4096, 4096]);
        assert_eq!(udp_mem([10, 20_000, 30_000], 2, 8 << 20, 4096), [10, 20_000, 30_000]);
        assert_eq!(nofile(65_536, 4, 256), 65_796);
    }

    #[test]
    fn schedutil_slows_lightly_loaded_cores() {
        assert!((utilisation(60_000.0, 10.0, 2) - 0.3).abs() < 1e-9);
        assert!((schedutil_stretch(0.4) - 2.0).abs() < 1e-9);
        assert_eq!(schedutil_stretch(0.9), 1.0);
    }

    #[test]
    fn masks_are_written_as_sysfs_reads_them() {
        assert_eq!(all_cores_mask(2), "3");
        assert_eq!(all_cores_mask(16), "ffff");
        assert_eq!(all_cores_mask(32), "ffffffff");
        assert_eq!(all_cores_mask(40), "ff,ffffffff");
    }
}
