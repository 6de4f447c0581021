use super::*;
use std::net::{Ipv4Addr, Ipv6Addr};

fn settings() -> FloodSettings {
    FloodSettings {
        window: Duration::from_secs(2),
        max_requests: 30,
        auth_window: Duration::from_secs(60),
        max_auth_failures: 10,
        ban: Duration::from_secs(300),
        max_sources: 10_000,
        trusted: vec![Prefix::parse("10.1.0.0/16").unwrap()],
    }
}

const ATTACKER: IpAddr = IpAddr::V4(Ipv4Addr::new(198, 51, 100, 7));
const USER: IpAddr = IpAddr::V4(Ipv4Addr::new(198, 51, 100, 8));

#[test]
fn a_flooding_source_is_banned_and_others_are_not() {
    let t0 = Instant::now();
    let g = FloodGuard::new(settings(), t0);
    let verdicts: Vec<_> = (0..100).map(|_| g.check_request(ATTACKER, t0)).collect();
    assert!(verdicts[..30].iter().all(|&v| v == Verdict::Allow));
    assert!(verdicts[30..].iter().all(|&v| v == Verdict::Drop));
    assert_eq!(g.counters.request_bans.load(Ordering::Relaxed), 1);
    assert_eq!(g.counters.dropped.load(Ordering::Relaxed), 70);
    assert_eq!(g.check_request(USER, t0), Verdict::Allow);
    assert_eq!(g.banned_sources(t0), 1);
    // The ban lasts `ban`, then the source starts afresh.
    assert_eq!(g.check_request(ATTACKER, t0 + Duration::from_secs(299)), Verdict::Drop);
    assert_eq!(g.check_request(ATTACKER, t0 + Duration::from_secs(301)), Verdict::Allow);
    assert_eq!(g.banned_sources(t0 + Duration::from_secs(301)), 0);
}

#[test]
fn a_steady_rate_under_the_limit_is_never_banned() {
    let t0 = Instant::now();
    let g = FloodGuard::new(settings(), t0);
    // 10 requests per second for a minute: 20 per 2 s window, under 30.
    for i in 0..600 {
        assert_eq!(g.check_request(USER, t0 + Duration::from_millis(100 * i)), Verdict::Allow, "request {i}");
    }
}

#[test]
fn failed_authentications_ban_the_source() {
    let t0 = Instant::now();
    let g = FloodGuard::new(settings(), t0);
    for i in 0..11 {
        assert_eq!(g.check_request(ATTACKER, t0 + Duration::from_secs(i)), Verdict::Allow);
        g.auth_failed(ATTACKER, t0 + Duration::from_secs(i));
    }
    assert_eq!(g.check_request(ATTACKER, t0 + Duration::from_secs(12)), Verdict::Drop);
    assert_eq!(g.counters.auth_bans.load(Ordering::Relaxed), 1);
    assert_eq!(g.check_request(USER, t0 + Duration::from_secs(12)), Verdict::Allow);
}

#[test]
fn trusted_prefixes_and_mapped_addresses() {
    let t0 = Instant::now();
    let g = FloodGuard::new(settings(), t0);
    let trunk = IpAddr::V4(Ipv4Addr::new(10, 1, 200, 3));
    for _ in 0..1000 {
        assert_eq!(g.check_request(trunk, t0), Verdict::Allow);
        g.auth_failed(trunk, t0);
    }
    // ::ffff:198.51.100.7 is the same source as 198.51.100.7.
    let mapped = IpAddr::V6(Ipv4Addr::new(198, 51, 100, 7).to_ipv6_mapped());
    for _ in 0..31 {
        g.check_request(mapped, t0);
    }
    assert_eq!(g.check_request(ATTACKER, t0), Verdict::Drop);
}

#[test]
fn prefixes_parse_and_match() {
    let p = Prefix::parse("2001:db8::/32").unwrap();
    assert!(p.contains(IpAddr::V6("2001:db8:1::5".parse::<Ipv6Addr>().unwrap())));
    assert!(!p.contains(IpAddr::V6("2001:db9::5".parse::<Ipv6Addr>().unwrap())));
    assert!(!p.contains(ATTACKER));
    assert!(Prefix::parse("0.0.0.0/0").unwrap().contains(ATTACKER));
    assert!(Prefix::parse("127.0.0.1").unwrap().contains(IpAddr::V4(Ipv4Addr::LOCALHOST)));
    assert!(!Prefix::parse("127.0.0.1").unwrap().contains(IpAddr::V4(Ipv4Addr::new(127, 0, 0, 2))));
    assert!(Prefix::parse("10.0.0.0/33").is_err());
    assert!(Prefix::parse("banana").is_err());
}

#[test]
fn tables_stay_bounded_under_many_sources() {
    let t0 = Instant::now();
    let mut s = settings();
    s.max_sources = 640;
    s.max_requests = 0; // every source is banned on its first request
    let g = FloodGuard::new(s, t0);
    for i in 0..100_000u32 {
        let ip = IpAddr::V4(Ipv4Addr::from(0xC000_0000 + i));
        g.check_request(ip, t0);
    }
    let banned = g.banned_sources(t0);
    assert!(banned <= 640 + SHARDS, "{banned} bans kept");
    assert!(g.counters.untracked.load(Ordering::Relaxed) > 90_000);
    // Once the bans expire there is room again.
    let later = t0 + Duration::from_secs(301);
    assert_eq!(g.check_request(IpAddr::V4(Ipv4Addr::new(203, 0, 113, 1)), later), Verdict::Drop);
}
