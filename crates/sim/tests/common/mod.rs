//! The cast of the call-flow tests: herald at 192.0.2.10 for example.com, with digest users.
#![allow(dead_code)]

use herald_sim::{HeraldConfig, Sim, UaId};
use std::time::Duration;

pub const HERALD: &str = "192.0.2.10:5060";

pub fn config(seed: u64) -> HeraldConfig {
    let mut cfg = HeraldConfig::new(HERALD.parse().unwrap(), "example.com", seed);
    cfg.users = ["alice", "bob", "dave"].iter().map(|u| (u.to_string(), format!("{u}-password"))).collect();
    cfg
}

/// A UA for `user` at `addr` that knows its password.
pub fn ua(sim: &mut Sim, name: &str, user: &str, addr: &str) -> UaId {
    let id = sim.add_ua(name, addr);
    sim.ua_mut(id).set_user(user).set_password(&format!("{user}-password"));
    id
}

/// Registers `id` and runs until the registration is answered; returns its final status.
pub fn register(sim: &mut Sim, id: UaId) -> u16 {
    let call = sim.act(id, |ua, now| ua.register(now, 3600));
    let done = sim.run_until(Duration::from_secs(40), |s| s.ua(id).outcome(&call, "REGISTER").is_some());
    assert!(done, "REGISTER of {} never answered", sim.ua(id).name);
    sim.ua(id).outcome(&call, "REGISTER").unwrap().status
}

pub fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}
