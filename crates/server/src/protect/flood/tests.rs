use super::*;
use herald_core::auth::PeerPrefix;
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr};
use std::time::Duration;

fn settings() -> FloodSettings {
    FloodSettings {
        window: Duration::from_secs(2),
        max_requests: 30,
        auth_window: Duration::from_secs(60),
        max_auth_failures: 10,
        max_auth_failures_per_source: 50,
        ban: Duration::from_secs(300),
        account_failures: 10,
        account_lock_max: Duration::from_secs(300),
        max_sources: 10_000,
        trusted: vec![PeerPrefix::parse("10.1.0.0/16").unwrap()],
    }
}

const ATTACKER: IpAddr = IpAddr::V4(Ipv4Addr::new(198, 51, 100, 7));
const USER: IpAddr = IpAddr::V4(Ipv4Addr::new(198, 51, 100, 8));

fn udp(ip: IpAddr) -> Peer {
    Peer::udp(SocketAddr::new(ip, 5060))
}

fn tcp(ip: IpAddr) -> Peer {
    Peer { transport: Transport::Tcp, addr: SocketAddr::new(ip, 40_000), conn: Some(herald_core::ConnId(1)) }
}

fn s(n: u64) -> Duration {
    Duration::from_secs(n)
}

fn get(c: &AtomicU64) -> u64 {
    c.load(Ordering::Relaxed)
}

fn wrong(g: &FloodGuard, at: Instant, from: &Peer, user: &str) {
    g.auth_failed(at, from, Some(user), Failure::WrongResponse);
}

#[test]
fn a_udp_flood_loses_only_its_excess_and_is_never_banned() {
    let t0 = Instant::now();
    let g = FloodGuard::new(settings(), t0);
    let verdicts: Vec<_> = (0..100).map(|_| g.check_request(&udp(ATTACKER), t0)).collect();
    assert!(verdicts[..30].iter().all(|&v| v == FloodVerdict::Allow));
    assert!(verdicts[30..].iter().all(|&v| v == FloodVerdict::Drop));
    assert_eq!((get(&g.counters.rate_limited), get(&g.counters.request_bans)), (70, 0));
    assert_eq!(g.banned_sources(t0), 0);
    assert_eq!(g.check_request(&udp(USER), t0), FloodVerdict::Allow);
    // Still flooding in the next window: the share the sliding window has room for passes (the
    // 30 admitted weigh half at its middle), not nothing as under a ban.
    let mid = t0 + s(3);
    let passed = (0..100).filter(|_| g.check_request(&udp(ATTACKER), mid) == FloodVerdict::Allow).count();
    assert_eq!(passed, 15);
}

#[test]
fn a_tcp_flood_is_banned_on_every_transport_until_the_ban_is_lifted() {
    let t0 = Instant::now();
    let g = FloodGuard::new(settings(), t0);
    let verdicts: Vec<_> = (0..100).map(|_| g.check_request(&tcp(ATTACKER), t0)).collect();
    assert!(verdicts[..30].iter().all(|&v| v == FloodVerdict::Allow));
    assert!(verdicts[30..].iter().all(|&v| v == FloodVerdict::Drop));
    assert_eq!((get(&g.counters.request_bans), get(&g.counters.dropped)), (1, 70));
    assert_eq!(g.banned_sources(t0), 1);
    // A proven source's ban covers its UDP too; other sources are untouched.
    assert_eq!(g.check_request(&udp(ATTACKER), t0 + s(10)), FloodVerdict::Drop);
    assert_eq!(g.check_request(&tcp(USER), t0), FloodVerdict::Allow);
    assert_eq!(g.check_request(&tcp(ATTACKER), t0 + s(299)), FloodVerdict::Drop);
    // The ban lasts `ban`; it is lifted (and counted) when it ends, whoever's request passes
    // by, then the source starts afresh.
    assert_eq!(g.check_request(&udp(USER), t0 + s(301)), FloodVerdict::Allow);
    assert_eq!(get(&g.counters.request_bans_lifted), 1);
    assert_eq!(g.banned_sources(t0 + s(301)), 0);
    assert_eq!(g.check_request(&tcp(ATTACKER), t0 + s(301)), FloodVerdict::Allow);
}

/// Issue 15: 99 forged OPTIONS "from" 127.0.0.2 locked it out over TCP too.
#[test]
fn udp_evidence_never_drops_a_connection_oriented_request() {
    let t0 = Instant::now();
    let g = FloodGuard::new(settings(), t0);
    let victim = IpAddr::V4(Ipv4Addr::new(127, 0, 0, 2));
    for _ in 0..99 {
        g.check_request(&udp(victim), t0);
    }
    // Forged failures under many names: a UDP ban, and UDP locks of "alice" at the address.
    for i in 0..60 {
        wrong(&g, t0, &udp(victim), &format!("user{}", i % 5));
    }
    for _ in 0..11 {
        g.auth_failed(t0, &udp(victim), Some("alice"), Failure::BadNonce);
    }
    assert_eq!(g.check_request(&udp(victim), t0), FloodVerdict::Drop, "UDP is banned");
    assert_eq!(get(&g.counters.auth_bans), 1);
    assert!(g.locked_out(t0, &udp(victim), "alice"));
    // The peer that proves its address is not held to any of it.
    for _ in 0..29 {
        assert_eq!(g.check_request(&tcp(victim), t0), FloodVerdict::Allow);
    }
    let tls = Peer { transport: Transport::Tls, ..tcp(victim) };
    assert_eq!(g.check_request(&tls, t0 + s(1)), FloodVerdict::Allow);
    assert!(!g.locked_out(t0, &tcp(victim), "alice"), "a UDP-earned user lock does not apply to TCP");
    // Failures over TCP are the peer's own: they lock it (on every transport).
    for _ in 0..11 {
        g.auth_failed(t0, &tcp(victim), Some("bob"), Failure::BadNonce);
    }
    assert!(g.locked_out(t0, &tcp(victim), "bob"));
    assert!(g.locked_out(t0, &udp(victim), "bob"));
}

#[test]
fn a_steady_rate_under_the_limit_is_never_limited() {
    let t0 = Instant::now();
    let g = FloodGuard::new(settings(), t0);
    // 10 requests per second for a minute: 20 per 2 s window, under 30.
    for i in 0..600 {
        let at = t0 + Duration::from_millis(100 * i);
        assert_eq!(g.check_request(&udp(USER), at), FloodVerdict::Allow, "request {i}");
        assert_eq!(g.check_request(&tcp(ATTACKER), at), FloodVerdict::Allow, "request {i}");
    }
}

/// Issue 15: one phone retrying a wrong password behind a NAT took the office down.
#[test]
fn failures_count_per_address_and_user_so_other_users_behind_a_nat_keep_working() {
    let t0 = Instant::now();
    let g = FloodGuard::new(FloodSettings { account_failures: 1000, ..settings() }, t0);
    let nat = udp(ATTACKER);
    for i in 0..10 {
        assert!(!g.locked_out(t0 + s(i), &nat, "alice"));
        wrong(&g, t0 + s(i), &nat, "alice");
    }
    assert!(!g.locked_out(t0 + s(10), &nat, "alice"), "10 failures are allowed");
    wrong(&g, t0 + s(10), &nat, "alice");
    assert!(g.locked_out(t0 + s(11), &nat, "alice"), "the 11th locks the pair");
    assert_eq!(get(&g.counters.user_locks), 1);
    // Bob behind the same address, and alice elsewhere, are not affected; nor are requests.
    assert!(!g.locked_out(t0 + s(11), &nat, "bob"));
    assert!(!g.locked_out(t0 + s(11), &udp(USER), "alice"));
    assert_eq!(g.check_request(&nat, t0 + s(11)), FloodVerdict::Allow);
    assert_eq!((get(&g.counters.auth_bans), g.banned_sources(t0 + s(11))), (0, 0));
    assert_eq!(g.locked_users(t0 + s(11)), 1);
    // Refusals are counted; the lock ends after `ban`.
    assert_eq!(get(&g.counters.auth_refused), 1);
    assert!(g.locked_out(t0 + s(309), &nat, "alice"));
    assert!(!g.locked_out(t0 + s(311), &nat, "alice"));
    assert_eq!(g.locked_users(t0 + s(311)), 0);
    assert_eq!(get(&g.counters.user_locks_lifted), 1);
}

#[test]
fn the_per_source_total_still_bans_a_scanner_of_user_names() {
    let t0 = Instant::now();
    let g = FloodGuard::new(settings(), t0);
    let scanner = udp(ATTACKER);
    // 50 failures over 10 names: no name reaches its own limit, the source reaches its total.
    for i in 0..50 {
        wrong(&g, t0, &scanner, &format!("user{}", i % 10));
    }
    assert_eq!(g.check_request(&scanner, t0), FloodVerdict::Allow);
    g.auth_failed(t0, &scanner, None, Failure::Malformed); // no name: counted per source only
    assert_eq!(g.check_request(&scanner, t0), FloodVerdict::Drop);
    assert_eq!((get(&g.counters.auth_bans), get(&g.counters.user_locks)), (1, 0));
    assert_eq!(g.check_request(&udp(USER), t0), FloodVerdict::Allow);
    assert_eq!(g.check_request(&udp(ATTACKER), t0 + s(301)), FloodVerdict::Allow);
    assert_eq!(get(&g.counters.auth_bans_lifted), 1);
}

#[test]
fn ipv6_sources_count_per_64() {
    let t0 = Instant::now();
    let g = FloodGuard::new(settings(), t0);
    let in_64 = |host: u16| IpAddr::V6(Ipv6Addr::new(0x2001, 0xdb8, 1, 2, host, 0, 0, host));
    let other_64 = IpAddr::V6(Ipv6Addr::new(0x2001, 0xdb8, 1, 3, 0, 0, 0, 1));
    // 30 requests from 30 addresses of one /64 use up its rate; the 31st address is limited.
    for host in 0..30 {
        assert_eq!(g.check_request(&udp(in_64(host)), t0), FloodVerdict::Allow);
    }
    assert_eq!(g.check_request(&udp(in_64(999)), t0), FloodVerdict::Drop);
    assert_eq!(g.check_request(&udp(other_64), t0), FloodVerdict::Allow);
    // Issue 16: 27 addresses of one /64 guessing. Per (/64, user) the 11th failure locks.
    let guess = |host: u16, user: &str| {
        let from = tcp(in_64(host));
        let refused = g.locked_out(t0, &from, user);
        if !refused {
            wrong(&g, t0, &from, user);
        }
        !refused
    };
    let tried = (0..27).filter(|&h| guess(h, "alice")).count();
    assert!(tried <= 11, "{tried} guesses from one /64");
    // And the whole /64 is one source for the total: 50 over many names ban it.
    let named = FloodGuard::new(FloodSettings { account_failures: 1000, ..settings() }, t0);
    for host in 0..51u16 {
        wrong(&named, t0, &tcp(in_64(host)), &format!("user{host}"));
    }
    assert_eq!(named.check_request(&tcp(in_64(5000)), t0), FloodVerdict::Drop);
    assert_eq!(named.banned_sources(t0), 1);
    assert_eq!(named.check_request(&tcp(other_64), t0), FloodVerdict::Allow);
}

/// Issue 16: 11 IPv4 addresses found a password at guess 200-500 with zero bans. Twenty
/// addresses guess alice's password as fast as they are let, five times a second each.
#[test]
fn account_back_off_slows_a_distributed_guesser() {
    let t0 = Instant::now();
    let set = settings();
    let (threshold, cap) = (set.account_failures, set.account_lock_max);
    let g = FloodGuard::new(set, t0);
    let guessers: Vec<Peer> = (0..20).map(|i| udp(IpAddr::V4(Ipv4Addr::new(203, 0, 113, i)))).collect();
    // Alice's registered phone logged in before the attack.
    let phone = udp(USER);
    g.auth_succeeded(t0, &phone, "alice");
    let mut per_minute = [0u32; 10];
    for tick in 0..(10 * 60 * 5) {
        let now = t0 + Duration::from_millis(200 * tick);
        for from in &guessers {
            if !g.locked_out(now, from, "alice") {
                per_minute[(tick / 300) as usize] += 1;
                wrong(&g, now, from, "alice");
            }
        }
        // The phone keeps working all along (re-registering every 20 s).
        if tick % 100 == 0 {
            assert!(!g.locked_out(now, &phone, "alice"), "the known phone is refused at {tick}");
        }
    }
    // First minute: the free `threshold`, then one per lock (1, 2, 4, ... s).
    let bound = threshold + (cap.as_secs() as f64).log2().ceil() as u32;
    assert!(per_minute[0] <= bound, "{per_minute:?} > {bound}");
    assert!(per_minute[1..].iter().all(|&n| n <= 1), "{per_minute:?}");
    assert!(per_minute.iter().sum::<u32>() <= bound + 5, "{per_minute:?}");
    assert!(get(&g.counters.account_locks) >= 10);
    // The attack stops. A new device of alice gets in within the cap at most.
    let stop = t0 + s(600);
    let laptop = tcp(IpAddr::V4(Ipv4Addr::new(192, 0, 2, 77)));
    assert!(!g.locked_out(stop + cap, &laptop, "alice"));
    assert!(!g.locked_out(stop, &laptop, "bob"), "other accounts are not affected");
}

/// Waiting for the counts to decay buys no fresh guesses: the lock length is remembered.
#[test]
fn a_patient_guesser_gets_one_guess_per_lock() {
    let t0 = Instant::now();
    let g = FloodGuard::new(settings(), t0);
    let from = udp(ATTACKER);
    let burst = |at: Instant| {
        (0..20).filter(|_| !g.locked_out(at, &from, "alice") && (wrong(&g, at, &from, "alice"), true).1).count()
    };
    assert_eq!(burst(t0), 10, "the free ones");
    // Every half hour, a burst of 20: one passes each time (the lock doubles, then stays at
    // the cap), where a forgotten account would give 10 again.
    for half_hours in 1..=10 {
        assert_eq!(burst(t0 + s(1800 * half_hours)), 1, "after {half_hours} half hours");
    }
    assert!(g.locked_out(t0 + s(18_000) + s(299), &from, "alice"), "at the cap");
}

#[test]
fn a_login_restarts_the_doubling() {
    let t0 = Instant::now();
    let g = FloodGuard::new(settings(), t0);
    let from = |i: u8| tcp(IpAddr::V4(Ipv4Addr::new(203, 0, 113, i)));
    let mut now = t0;
    for i in 0..10 {
        wrong(&g, now, &from(i), "alice");
    }
    // Locks of 1, 2, 4, 8 s.
    for expected in [1, 2, 4, 8] {
        assert!(g.locked_out(now + Duration::from_millis(expected * 1000 - 1), &from(50), "alice"));
        now += s(expected);
        assert!(!g.locked_out(now, &from(50), "alice"));
        wrong(&g, now, &from(50), "alice");
    }
    assert!(g.locked_out(now + s(15), &from(50), "alice"), "16 s now");
    g.auth_succeeded(now + s(16), &from(60), "alice");
    now += s(16);
    // The failures still count (the window has not passed): the next one locks, but for 1 s.
    wrong(&g, now, &from(50), "alice");
    assert!(g.locked_out(now, &from(50), "alice"));
    assert!(!g.locked_out(now + s(1), &from(50), "alice"));
    assert!(!g.locked_out(now, &from(60), "alice"), "the address that logged in is exempt");
}

#[test]
fn trusted_prefixes_mapped_addresses_and_accounts() {
    let t0 = Instant::now();
    let g = FloodGuard::new(settings(), t0);
    let trunk = IpAddr::V4(Ipv4Addr::new(10, 1, 200, 3));
    for i in 0..1000 {
        assert_eq!(g.check_request(&tcp(trunk), t0), FloodVerdict::Allow);
        assert_eq!(g.check_request(&udp(trunk), t0), FloodVerdict::Allow);
        g.auth_failed(t0, &udp(trunk), Some(&format!("user{i}")), Failure::BadNonce);
    }
    assert_eq!(g.banned_sources(t0), 0);
    // A trunk relaying guesses for one account is still guessing: the account backs off.
    for _ in 0..10 {
        wrong(&g, t0, &udp(trunk), "carol");
    }
    assert!(g.locked_out(t0, &udp(trunk), "carol"));
    // ::ffff:198.51.100.7 is the same source as 198.51.100.7.
    let mapped = IpAddr::V6(Ipv4Addr::new(198, 51, 100, 7).to_ipv6_mapped());
    for _ in 0..31 {
        g.check_request(&tcp(mapped), t0);
    }
    assert_eq!(g.check_request(&tcp(ATTACKER), t0), FloodVerdict::Drop);
}

#[test]
fn prefixes_parse_and_match() {
    let p = PeerPrefix::parse("2001:db8::/32").unwrap();
    assert!(p.contains(IpAddr::V6("2001:db8:1::5".parse::<Ipv6Addr>().unwrap())));
    assert!(!p.contains(IpAddr::V6("2001:db9::5".parse::<Ipv6Addr>().unwrap())));
    assert!(!p.contains(ATTACKER));
    assert!(PeerPrefix::parse("0.0.0.0/0").unwrap().contains(ATTACKER));
    assert!(PeerPrefix::parse("127.0.0.1").unwrap().contains(IpAddr::V4(Ipv4Addr::LOCALHOST)));
    assert!(!PeerPrefix::parse("127.0.0.1").unwrap().contains(IpAddr::V4(Ipv4Addr::new(127, 0, 0, 2))));
    assert!(PeerPrefix::parse("10.0.0.0/33").is_err());
    assert!(PeerPrefix::parse("banana").is_err());
}

#[test]
fn tables_stay_bounded_under_many_sources() {
    let t0 = Instant::now();
    let mut set = settings();
    set.max_sources = 640;
    set.max_requests = 0; // every source is over the limit on its first request
    let g = FloodGuard::new(set, t0);
    for i in 0..100_000u32 {
        let ip = IpAddr::V4(Ipv4Addr::from(0xC000_0000 + i));
        g.check_request(&udp(ip), t0);
        g.check_request(&tcp(ip), t0);
        wrong(&g, t0, &udp(ip), &format!("user{i}"));
    }
    let banned = g.banned_sources(t0);
    assert!(banned <= 640 + SHARDS, "{banned} bans kept");
    assert!(get(&g.counters.untracked) > 90_000);
    // Once the bans expire there is room again.
    let later = t0 + s(301);
    assert_eq!(g.check_request(&tcp(IpAddr::V4(Ipv4Addr::new(203, 0, 113, 1))), later), FloodVerdict::Drop);
    assert_eq!(g.banned_sources(later), 1);
}

/// Every ban, lock and lift leaves a `warn` line naming the source, the reason, the count and
/// the duration (issue 15: a shared address was banned without a trace).
#[test]
fn bans_locks_and_lifts_are_logged_at_warn() {
    use std::sync::{Arc, Mutex};
    #[derive(Clone, Default)]
    struct Buf(Arc<Mutex<Vec<u8>>>);
    impl std::io::Write for Buf {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let buf = Buf::default();
    let writer = buf.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::WARN)
        .with_ansi(false)
        .with_writer(move || writer.clone())
        .finish();
    // With a single dispatcher alive, tracing-core decides a call site's interest with the
    // registering thread's default: another test meeting a call site first (no subscriber on
    // its thread) would cache "never" for it. A second one makes it ask every dispatcher.
    let _second = tracing::Dispatch::new(tracing::subscriber::NoSubscriber::default());
    let t0 = Instant::now();
    tracing::subscriber::with_default(subscriber, || {
        tracing::callsite::rebuild_interest_cache();
        let g = FloodGuard::new(settings(), t0);
        let v6 = IpAddr::V6(Ipv6Addr::new(0x2001, 0xdb8, 0, 7, 1, 2, 3, 4));
        for _ in 0..31 {
            g.check_request(&tcp(v6), t0);
        }
        for _ in 0..11 {
            wrong(&g, t0, &udp(ATTACKER), "alice\n");
        }
        // A UDP flood: logged once, however long it goes on.
        for i in 0..200 {
            g.check_request(&udp(USER), t0 + Duration::from_millis(10 * i));
        }
        g.check_request(&udp(USER), t0 + s(301));
    });
    let text = String::from_utf8(buf.0.lock().unwrap().clone()).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let find = |what: &str| {
        lines.iter().find(|l| l.contains(what)).unwrap_or_else(|| panic!("no line with {what:?} in\n{text}"))
    };
    let banned = find("source banned");
    for part in
        ["WARN", "source=2001:db8:0:7::/64", "evidence=\"tcp/tls\"", "reason=\"requests\"", "count=31", "ban_s=300"]
    {
        assert!(banned.contains(part), "{part:?} missing in {banned}");
    }
    let locked = find("user locked");
    for part in ["WARN", "source=198.51.100.7", "evidence=\"udp\"", "user=alice\\n", "count=11", "lock_s=300"] {
        assert!(locked.contains(part), "{part:?} missing in {locked}");
    }
    let account = find("account back-off");
    assert!(
        account.contains("WARN") && account.contains("failures=10") && account.contains("lock_ms=1000"),
        "{account}"
    );
    assert!(find("ban lifted").contains("reason=\"requests\""));
    assert!(find("user lock lifted").contains("user=alice\\n"));
    let limited = find("rate limit");
    assert!(limited.contains("source=198.51.100.8") && limited.contains("evidence=\"udp\""), "{limited}");
    assert_eq!(lines.iter().filter(|l| l.contains("rate limit")).count(), 1, "{text}");
    assert!(lines.iter().all(|l| l.contains("WARN")), "{text}");
}

/// The memo of the last trusted IPv4 source answers as the prefixes do, whatever the order of
/// the sources asked about: trusted and not, IPv4, IPv6 and IPv4-mapped IPv6.
#[test]
fn the_trusted_memo_answers_as_the_prefixes_do() {
    let mut s = settings();
    s.trusted.push(PeerPrefix::parse("192.0.2.7").unwrap());
    s.trusted.push(PeerPrefix::parse("2001:db8::/32").unwrap());
    let prefixes = s.trusted.clone();
    let g = FloodGuard::new(s, Instant::now());
    let v4 = |a, b, c, d| IpAddr::V4(Ipv4Addr::new(a, b, c, d));
    let ips = [
        v4(10, 1, 2, 3),
        v4(10, 2, 2, 3),
        v4(192, 0, 2, 7),
        v4(192, 0, 2, 8),
        v4(0, 0, 0, 0),
        IpAddr::V6("2001:db8::1".parse().unwrap()),
        IpAddr::V6("2001:db9::1".parse().unwrap()),
        IpAddr::V6(Ipv4Addr::new(10, 1, 9, 9).to_ipv6_mapped()),
        IpAddr::V6(Ipv4Addr::new(10, 9, 9, 9).to_ipv6_mapped()),
    ];
    for a in ips {
        for b in ips {
            for ip in [a, b, a, b] {
                assert_eq!(g.trusted(ip), prefixes.iter().any(|p| p.contains(ip)), "{a} {b} {ip}");
            }
        }
    }
}
