//! What every protocol role reads: the run's constants (users, the two sides' message pieces,
//! the proxy, the transport's reliability), the clock as the loop last read it, the run's seeded
//! randomness and the transaction counter. The event loop owns it and lends it to one role at a
//! time.

use super::held::Held;
use super::users::User;
use super::wire::Local;
use herald_core::transaction::Timers;
use herald_sip::text::push_hex;
use herald_sip::Limits;
use rand::rngs::SmallRng;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

pub struct Context {
    /// The instant the run's clock counts from (`now` and every deadline are µs since then).
    epoch: Instant,
    /// The same instant as CLOCK_MONOTONIC ns (read right after it), which [`Context::clock`]
    /// subtracts from the clock read as one number.
    epoch_ns: u64,
    /// µs since `epoch`, as the loop last read it.
    pub now: u64,
    /// Receive time (same clock) of the message being handled: its kernel stamp when there is
    /// one, else the time it was read. Latencies end here.
    pub rx_us: u64,
    pub users: Vec<User>,
    /// Per user: the address of record `sip:user@domain` and the To value `<sip:user@domain>`
    /// of calls to it, written once instead of for every call.
    aors: Vec<(String, String)>,
    pub caller_local: Local,
    pub callee_local: Local,
    pub proxy: SocketAddr,
    /// A stream transport (TCP, TLS): no retransmissions (RFC 3261 §17.1.1.2, §17.1.2.2).
    pub reliable: bool,
    pub rng: SmallRng,
    pub run_id: u32,
    /// `z9hG4bK` and the run id in hex and a dot: what every branch of the run starts with.
    branch_prefix: String,
    /// A dot, the run id in hex and `@bench`: what every Call-ID of the run ends with
    /// (`c{slot}.{generation}` before it), written once rather than for every call.
    pub call_id_suffix: String,
    next_tx: u32,
    pub limits: Limits,
    /// T1, T2, T4 and Timer D of the client transactions (RFC 3261 defaults).
    pub timers: Timers,
    /// New calls, registrations and refreshes may start (false while draining).
    pub accepting: bool,
    /// How long our callee held each answer our callers time (see [`Held`]).
    pub held: Held,
    /// How long our callee rings when an INVITE does not say ([`super::wire::RING_HEADER`]):
    /// a caller whose plan rings that long leaves the header out.
    pub callee_ring_us: u64,
}

impl Context {
    pub fn new(
        caller_local: Local,
        callee_local: Local,
        proxy: SocketAddr,
        reliable: bool,
        users: Vec<User>,
        rng: SmallRng,
        run_id: u32,
    ) -> Context {
        let aors = users
            .iter()
            .map(|u| {
                let aor = ["sip:", &u.name, "@", &caller_local.domain].concat();
                let to = ["<", &aor, ">"].concat();
                (aor, to)
            })
            .collect();
        let epoch = Instant::now();
        Context {
            epoch,
            epoch_ns: herald_sys::monotonic_ns(),
            now: 0,
            rx_us: 0,
            users,
            aors,
            caller_local,
            callee_local,
            proxy,
            reliable,
            rng,
            run_id,
            branch_prefix: {
                let mut prefix = String::from("z9hG4bK");
                push_hex(&mut prefix, u64::from(run_id), 0);
                prefix.push('.');
                prefix
            },
            call_id_suffix: {
                let mut suffix = String::from(".");
                push_hex(&mut suffix, u64::from(run_id), 0);
                suffix.push_str("@bench");
                suffix
            },
            next_tx: 1,
            limits: Limits::default(),
            timers: Timers::default(),
            accepting: true,
            held: Held::default(),
            callee_ring_us: 0,
        }
    }

    /// Reads the clock: µs since the run's epoch.
    pub fn clock(&mut self) -> u64 {
        // CLOCK_MONOTONIC as one number, not `Instant::elapsed` (~60 instructions more a read,
        // and the loop reads the clock several times per wake-up; callgrind).
        self.now = herald_sys::monotonic_ns().saturating_sub(self.epoch_ns) / 1000;
        self.now
    }

    /// `us` on the run's clock as an [`Instant`] (the transaction machines' time).
    pub fn instant(&self, us: u64) -> Instant {
        self.epoch + Duration::from_micros(us)
    }

    /// An [`Instant`] on the run's clock, µs (rounded up, so a deadline is never early).
    pub fn micros(&self, at: Instant) -> u64 {
        let d = at.saturating_duration_since(self.epoch);
        d.as_micros() as u64 + u64::from(!d.subsec_nanos().is_multiple_of(1000))
    }

    /// A fresh transaction id and its RFC 3261 branch (§8.1.1.7: starts with the magic cookie,
    /// unique per transaction).
    pub fn new_tx(&mut self) -> (u32, String) {
        let mut branch = String::with_capacity(self.branch_prefix.len() + 8);
        let id = self.new_branch_into(&mut branch);
        (id, branch)
    }

    /// [`Context::new_tx`] written into `branch` (emptied first): for a request that is no
    /// transaction of ours to keep (the ACK of a 2xx, §13.2.2.4, has a branch of its own), its
    /// branch in a buffer the caller keeps rather than a string of its own.
    pub fn new_branch_into(&mut self, branch: &mut String) -> u32 {
        let id = self.next_tx;
        self.next_tx = self.next_tx.wrapping_add(1).max(1);
        branch.clear();
        branch.push_str(&self.branch_prefix);
        push_hex(branch, u64::from(id), 0);
        id
    }

    /// The address of record `sip:user@domain` of user `user` (the Request-URI of calls to it).
    pub fn user_uri(&self, user: usize) -> &str {
        &self.aors[user].0
    }

    /// `<sip:user@domain>`: the To value of calls to user `user`.
    pub fn user_to(&self, user: usize) -> &str {
        &self.aors[user].1
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    /// The clock read as CLOCK_MONOTONIC ns counts what `Instant` counts from the same epoch
    /// (to the µs), and a deadline on it maps to the `Instant` herald-core's machines take and
    /// back.
    #[test]
    fn the_clock_counts_from_the_epoch_as_instants_do() {
        let local = Local::new("UDP", "127.0.0.1:5070".into(), "", "d".into());
        let users = vec![User { name: "a".into(), password: None }];
        let rng = SmallRng::seed_from_u64(1);
        let mut c = Context::new(local.clone(), local, "127.0.0.1:5060".parse().unwrap(), false, users, rng, 1);
        for _ in 0..3 {
            std::thread::sleep(Duration::from_millis(2));
            let before = c.epoch.elapsed().as_micros() as u64;
            let now = c.clock();
            let after = c.epoch.elapsed().as_micros() as u64;
            assert!(before <= now + 1 && now <= after + 1, "{before} {now} {after}");
            assert!(now >= 2_000);
            assert_eq!(c.micros(c.instant(now)), now);
        }
    }

    /// A branch written into a kept buffer is the one `new_tx` gives: the next id, unique.
    #[test]
    fn branches_written_into_a_buffer_are_new_tx_branches() {
        let local = Local::new("UDP", "127.0.0.1:5070".into(), "", "d".into());
        let users = vec![User { name: "a".into(), password: None }];
        let mut c = Context::new(
            local.clone(),
            local,
            "127.0.0.1:5060".parse().unwrap(),
            false,
            users,
            SmallRng::seed_from_u64(1),
            0xab,
        );
        let (id, branch) = c.new_tx();
        let mut buffer = String::from("stale");
        assert_eq!(c.new_branch_into(&mut buffer), id + 1);
        assert_eq!(buffer, branch.replace(&format!(".{id:x}"), &format!(".{:x}", id + 1)));
        assert!(buffer.starts_with("z9hG4bKab."), "{buffer}");
        assert_eq!(c.new_tx().0, id + 2);
        // Call-IDs end in the run id the router reads (`c{slot}.{generation}.{run}@bench`).
        assert_eq!(c.call_id_suffix, ".ab@bench");
    }
}
