//! Open TCP connections per remote IP address (`limits.max_tcp_connections_per_ip`): one host
//! must not take every connection slot and file descriptor of the process.
//!
//! Sharded like the connection registry, so accepting workers rarely meet on one lock. An entry
//! lives only while its address has connections open, so memory follows the open connections,
//! which `max_tcp_connections` bounds.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Mutex;

const SHARDS: usize = 64;

pub(crate) struct PerIp {
    shards: Box<[Mutex<HashMap<IpAddr, u32>>]>,
}

impl PerIp {
    pub(crate) fn new() -> PerIp {
        PerIp { shards: (0..SHARDS).map(|_| Mutex::default()).collect() }
    }

    fn shard(&self, ip: IpAddr) -> std::sync::MutexGuard<'_, HashMap<IpAddr, u32>> {
        let h = match ip {
            IpAddr::V4(a) => u64::from(u32::from(a)),
            IpAddr::V6(a) => {
                let b = u128::from(a);
                (b as u64) ^ ((b >> 64) as u64)
            }
        };
        let i = (h.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 58) as usize % SHARDS;
        self.shards[i].lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Counts a new connection from `ip` unless it already has `max`; `false` when refused.
    pub(crate) fn acquire(&self, ip: IpAddr, max: usize) -> bool {
        let mut m = self.shard(ip);
        let n = m.entry(ip).or_insert(0);
        if *n as usize >= max {
            if *n == 0 {
                m.remove(&ip);
            }
            return false;
        }
        *n += 1;
        true
    }

    /// A connection from `ip` counted by [`PerIp::acquire`] has closed.
    pub(crate) fn release(&self, ip: IpAddr) {
        let mut m = self.shard(ip);
        if let Some(n) = m.get_mut(&ip) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                m.remove(&ip);
            }
        }
    }

    #[cfg(test)]
    fn tracked(&self) -> usize {
        self.shards.iter().map(|s| s.lock().unwrap().len()).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_each_address_and_forgets_closed_ones() {
        let p = PerIp::new();
        let a: IpAddr = "192.0.2.1".parse().unwrap();
        let b: IpAddr = "2001:db8::1".parse().unwrap();
        assert!(p.acquire(a, 2));
        assert!(p.acquire(a, 2));
        assert!(!p.acquire(a, 2), "third from the same address");
        assert!(p.acquire(b, 2), "another address is not affected");
        p.release(a);
        assert!(p.acquire(a, 2), "room again after a close");
        p.release(a);
        p.release(a);
        p.release(b);
        assert_eq!(p.tracked(), 0, "no entry outlives its connections");
        p.release(a); // an extra release never underflows
        assert_eq!(p.tracked(), 0);
    }
}
