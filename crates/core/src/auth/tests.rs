//! Every digest path: each algorithm, RFC 7616 vectors, stale and forged nonces, replayed
//! nonce-counts, unknown users, wrong passwords, wrong realms, identities, malformed answers.

use super::digest::DigestAnswer;
use super::replay::{NcCheck, NonceCounts, SHARDS};
use super::*;
use bytes::Bytes;
use herald_credentials::{to_hex, Answer};
use herald_sip::headers::AuthValue;
use herald_sip::Limits;

const REALM: &str = "example.com";

pub(crate) fn authenticator(algorithms: &[Algorithm], policy: AuthPolicy, now: Instant) -> Authenticator {
    let mut creds = Credentials::new(REALM);
    creds.insert("alice", UserHa1::from_password("alice", REALM, "secret-a"));
    creds.insert("bob", UserHa1::from_password("bob", REALM, "secret-b"));
    let cfg = AuthConfig {
        realm: REALM.into(),
        domain_realms: Vec::new(),
        algorithms: algorithms.to_vec(),
        nonce_lifetime: Duration::from_secs(300),
        policy,
    };
    Authenticator::new(cfg, Arc::new(SharedCredentials::new(creds)), b"test secret", 7, now, 1_700_000_000)
}

/// What a client computes for a challenge (RFC 7616 §3.4.1, qop=auth).
#[allow(clippy::too_many_arguments)] // mirrors the RFC's inputs one to one
pub(crate) fn client_answer(
    alg: Algorithm,
    user: &str,
    realm: &str,
    password: &str,
    nonce: &str,
    method: &str,
    uri: &str,
    nc: u32,
) -> String {
    let answer =
        Answer { algorithm: alg, sess: false, user, realm, nonce, uri, nc: Some(nc), cnonce: "0a4f113b", opaque: None };
    answer.header_value(method, password)
}

/// The nonce of a challenge header value.
pub(crate) fn nonce_of(challenge: &str) -> String {
    let v = AuthValue::parse(challenge.as_bytes()).unwrap();
    v.param("nonce").unwrap().into_owned()
}

fn register(to_user: &str, auth: Option<&str>) -> Message {
    let auth = auth.map(|a| format!("Authorization: {a}\r\n")).unwrap_or_default();
    let text = format!(
        "REGISTER sip:example.com SIP/2.0\r\nVia: SIP/2.0/UDP 192.0.2.1:5061;branch=z9hG4bKr1\r\nMax-Forwards: 70\r\nFrom: <sip:{to_user}@example.com>;tag=1\r\nTo: <sip:{to_user}@example.com>\r\nCall-ID: r1\r\nCSeq: 1 REGISTER\r\nContact: <sip:{to_user}@192.0.2.1:5061>\r\n{auth}Content-Length: 0\r\n\r\n"
    );
    Message::parse(Bytes::from(text), &Limits::default()).unwrap()
}

fn peer() -> Peer {
    Peer::udp("192.0.2.1:5061".parse().unwrap())
}

/// Challenge, answer as `user`/`password` with `alg`, verify.
fn round(a: &Authenticator, now: Instant, alg: Algorithm, user: &str, password: &str, to_user: &str) -> Verdict {
    let headers = a.challenge(now, &register("alice", None), Challenge::Registrar, false);
    let nonce = nonce_of(&headers[0].1);
    let answer = client_answer(alg, user, REALM, password, &nonce, "REGISTER", "sip:example.com", 1);
    a.verify(now, peer(), &register(to_user, Some(&answer)), Challenge::Registrar)
}

#[test]
fn rfc_7616_example_responses() {
    // RFC 7616 §3.9.1: GET /dir/index.html, Mufasa / http-auth@example.org / Circle of Life.
    let value = "Digest username=\"Mufasa\", realm=\"http-auth@example.org\", uri=\"/dir/index.html\", algorithm=MD5, nonce=\"7ypf/xlj9XXwfDPEoM4URrv/xwf94BcCAzFZH4GiTo0v\", nc=00000001, cnonce=\"f2/wE4q74E6zIJEtWaHKaf5wv/H5QzzpXusqGemxURZJ\", qop=auth, response=\"8ca523f5e9506fed4657c9700eebdbec\", opaque=\"FQhe/qaU925kfnzjCev0ciny7QMkPqMAFRtzCUYo5tdS\"";
    let parsed = AuthValue::parse(value.as_bytes()).unwrap();
    let answer = DigestAnswer::from_value(&parsed).unwrap();
    let ha1 = UserHa1::from_password("Mufasa", "http-auth@example.org", "Circle of Life");
    assert_eq!(
        to_hex(&answer.expected(Algorithm::Md5, ha1.get(Algorithm::Md5), "GET")),
        "8ca523f5e9506fed4657c9700eebdbec"
    );
    assert_eq!(
        to_hex(&answer.expected(Algorithm::Sha256, ha1.get(Algorithm::Sha256), "GET")),
        "753927fa0e85d155564e2e272a28d1802ca10daf4496794697cf8db5856cb6c1"
    );
    assert_eq!(answer.nonce_count(), Some(1));
}

#[test]
fn each_served_domain_is_its_own_realm_with_its_own_users() {
    // Issue 15: domains = ["example.com", "example.org"] with users per domain; alice of
    // example.org is another account than alice of example.com.
    let now = Instant::now();
    let mut creds = Credentials::new(REALM);
    creds.insert("alice", UserHa1::from_password("alice", REALM, "secret-a"));
    creds.insert_in("example.org", "alice", UserHa1::from_password("alice", "example.org", "org-secret"));
    let cfg = AuthConfig {
        realm: REALM.into(),
        domain_realms: vec![(REALM.into(), REALM.into()), ("example.org".into(), "example.org".into())],
        algorithms: vec![Algorithm::Md5],
        nonce_lifetime: Duration::from_secs(300),
        policy: AuthPolicy::default(),
    };
    let a = Authenticator::new(cfg, Arc::new(SharedCredentials::new(creds)), b"test secret", 7, now, 1_700_000_000);
    let org = |auth: Option<&str>| {
        String::from_utf8_lossy(register("alice", auth).as_bytes()).replace("@example.com", "@EXAMPLE.org")
    };
    let org_msg = |auth: Option<&str>| Message::parse(Bytes::from(org(auth)), &Limits::default()).unwrap();
    let h = a.challenge(now, &org_msg(None), Challenge::Registrar, false);
    assert!(h[0].1.contains("realm=\"example.org\""), "{h:?}");
    assert_eq!(a.realm_for(&register("alice", None), Challenge::Registrar), REALM);
    let nonce = nonce_of(&h[0].1);
    let answer = |realm: &str, pw: &str| {
        client_answer(Algorithm::Md5, "alice", realm, pw, &nonce, "REGISTER", "sip:example.com", 1)
    };
    assert_eq!(
        a.verify(now, peer(), &org_msg(Some(&answer("example.org", "org-secret"))), Challenge::Registrar),
        Verdict::Accepted("alice".into())
    );
    // example.com's password, or an answer in example.com's realm, does not open example.org.
    assert_eq!(
        a.verify(now, peer(), &org_msg(Some(&answer("example.org", "secret-a"))), Challenge::Registrar),
        Verdict::Challenge { stale: false }
    );
    assert_eq!(
        a.verify(now, peer(), &org_msg(Some(&answer(REALM, "secret-a"))), Challenge::Registrar),
        Verdict::Challenge { stale: false }
    );
    assert!(a.knows_user("alice", "example.org") && a.knows_user("alice", "example.com"));
    assert!(!a.knows_user("bob", "example.org"));
}

#[test]
fn challenges_offer_every_algorithm_strongest_first() {
    let now = Instant::now();
    let a = authenticator(&Algorithm::ALL, AuthPolicy::default(), now);
    let h = a.challenge(now, &register("alice", None), Challenge::Proxy, false);
    assert_eq!(h.len(), 3);
    let algs: Vec<String> = h
        .iter()
        .map(|(name, v)| {
            assert_eq!(*name, "Proxy-Authenticate");
            assert!(v.contains("realm=\"example.com\"") && v.contains("qop=\"auth\"") && !v.contains("stale"), "{v}");
            AuthValue::parse(v.as_bytes()).unwrap().param("algorithm").unwrap().into_owned()
        })
        .collect();
    assert_eq!(algs, ["SHA-512-256", "SHA-256", "MD5"]);
    assert!(h.iter().all(|(_, v)| nonce_of(v) == nonce_of(&h[0].1)), "one nonce for all");
    assert_ne!(
        nonce_of(&a.challenge(now, &register("alice", None), Challenge::Proxy, false)[0].1),
        nonce_of(&h[0].1),
        "nonces are unique"
    );
    assert!(a.challenge(now, &register("alice", None), Challenge::Registrar, true)[0].1.ends_with(", stale=true"));
}

#[test]
fn each_algorithm_authenticates() {
    let now = Instant::now();
    let a = authenticator(&Algorithm::ALL, AuthPolicy::default(), now);
    for alg in Algorithm::ALL {
        assert_eq!(round(&a, now, alg, "alice", "secret-a", "alice"), Verdict::Accepted("alice".into()), "{alg:?}");
    }
    assert_eq!(a.stats().accepted, 3);
}

#[test]
fn shared_stats_are_the_live_counters() {
    let now = Instant::now();
    let a = authenticator(&Algorithm::ALL, AuthPolicy::default(), now);
    let live = a.shared_stats();
    assert_eq!(live.snapshot(), AuthStatsSnapshot::default());
    round(&a, now, Algorithm::Md5, "alice", "secret-a", "alice");
    round(&a, now, Algorithm::Md5, "alice", "guess", "alice");
    round(&a, now, Algorithm::Md5, "alice", "secret-a", "bob");
    let s = live.snapshot();
    assert_eq!(s, a.stats(), "one set of counters");
    assert_eq!((s.challenges, s.accepted), (3, 1), "{s:?}");
    let rejected: Vec<(&str, u64)> = s.rejections().into_iter().filter(|(_, n)| *n > 0).collect();
    assert_eq!(rejected, [("wrong_response", 1), ("identity_mismatch", 1)]);
}

#[test]
fn missing_algorithm_means_md5() {
    let now = Instant::now();
    let a = authenticator(&Algorithm::ALL, AuthPolicy::default(), now);
    let nonce = nonce_of(&a.challenge(now, &register("alice", None), Challenge::Registrar, false)[0].1);
    let answer = client_answer(Algorithm::Md5, "alice", REALM, "secret-a", &nonce, "REGISTER", "sip:example.com", 1)
        .replace(", algorithm=MD5", "");
    let v = a.verify(now, peer(), &register("alice", Some(&answer)), Challenge::Registrar);
    assert_eq!(v, Verdict::Accepted("alice".into()));
}

#[test]
fn unknown_user_and_wrong_password_look_the_same() {
    let now = Instant::now();
    let a = authenticator(&Algorithm::ALL, AuthPolicy::default(), now);
    let wrong = round(&a, now, Algorithm::Sha256, "alice", "guess", "alice");
    let unknown = round(&a, now, Algorithm::Sha256, "mallory", "guess", "mallory");
    assert_eq!(wrong, Verdict::Challenge { stale: false });
    assert_eq!(unknown, wrong);
    assert_eq!(a.stats().failed, 2);
}

#[test]
fn an_expired_nonce_is_stale_only_with_the_right_password() {
    let t0 = Instant::now();
    let a = authenticator(&Algorithm::ALL, AuthPolicy::default(), t0);
    let nonce = nonce_of(&a.challenge(t0, &register("alice", None), Challenge::Registrar, false)[0].1);
    let later = t0 + Duration::from_secs(301);
    let right = client_answer(Algorithm::Md5, "alice", REALM, "secret-a", &nonce, "REGISTER", "sip:example.com", 1);
    let v = a.verify(later, peer(), &register("alice", Some(&right)), Challenge::Registrar);
    assert_eq!(v, Verdict::Challenge { stale: true });
    let wrong = client_answer(Algorithm::Md5, "alice", REALM, "nope", &nonce, "REGISTER", "sip:example.com", 1);
    let v = a.verify(later, peer(), &register("alice", Some(&wrong)), Challenge::Registrar);
    assert_eq!(v, Verdict::Challenge { stale: false });
    // Within the lifetime it works.
    let v = a.verify(t0 + Duration::from_secs(299), peer(), &register("alice", Some(&right)), Challenge::Registrar);
    assert_eq!(v, Verdict::Accepted("alice".into()));
}

#[test]
fn a_replayed_nonce_count_is_refused() {
    let now = Instant::now();
    let a = authenticator(&Algorithm::ALL, AuthPolicy::default(), now);
    let nonce = nonce_of(&a.challenge(now, &register("alice", None), Challenge::Registrar, false)[0].1);
    let answer =
        |nc| client_answer(Algorithm::Sha256, "alice", REALM, "secret-a", &nonce, "REGISTER", "sip:example.com", nc);
    let check = |text: String| a.verify(now, peer(), &register("alice", Some(&text)), Challenge::Registrar);
    assert_eq!(check(answer(1)), Verdict::Accepted("alice".into()));
    assert_eq!(check(answer(1)), Verdict::Challenge { stale: true }, "same nc again");
    assert_eq!(check(answer(3)), Verdict::Accepted("alice".into()), "a higher nc reuses the nonce");
    assert_eq!(check(answer(2)), Verdict::Challenge { stale: true }, "a lower nc");
    assert_eq!(a.stats().replayed, 2);
}

#[test]
fn forged_or_foreign_nonces_are_refused() {
    let now = Instant::now();
    let a = authenticator(&Algorithm::ALL, AuthPolicy::default(), now);
    let nonce = nonce_of(&a.challenge(now, &register("alice", None), Challenge::Registrar, false)[0].1);
    // A bit flipped in the issue time (to extend the lifetime): the MAC no longer matches.
    let mut forged = nonce.clone().into_bytes();
    forged[15] = if forged[15] == b'0' { b'1' } else { b'0' };
    let forged = String::from_utf8(forged).unwrap();
    for n in [forged.as_str(), "abc", "", &"0".repeat(64)] {
        let answer = client_answer(Algorithm::Md5, "alice", REALM, "secret-a", n, "REGISTER", "sip:example.com", 1);
        let v = a.verify(now, peer(), &register("alice", Some(&answer)), Challenge::Registrar);
        assert_eq!(v, Verdict::Challenge { stale: false }, "{n:?}");
    }
    // A nonce of another server (another secret).
    let mut other_cfg = a.config().clone();
    other_cfg.realm = REALM.into();
    let other = Authenticator::new(other_cfg, Arc::new(SharedCredentials::default()), b"other", 1, now, 1_700_000_000);
    let theirs = nonce_of(&other.challenge(now, &register("alice", None), Challenge::Registrar, false)[0].1);
    let answer = client_answer(Algorithm::Md5, "alice", REALM, "secret-a", &theirs, "REGISTER", "sip:example.com", 1);
    assert_eq!(
        a.verify(now, peer(), &register("alice", Some(&answer)), Challenge::Registrar),
        Verdict::Challenge { stale: false }
    );
}

#[test]
fn credentials_for_another_realm_are_not_ours() {
    let now = Instant::now();
    let a = authenticator(&Algorithm::ALL, AuthPolicy::default(), now);
    let nonce = nonce_of(&a.challenge(now, &register("alice", None), Challenge::Registrar, false)[0].1);
    let answer =
        client_answer(Algorithm::Md5, "alice", "other.org", "secret-a", &nonce, "REGISTER", "sip:example.com", 1);
    let v = a.verify(now, peer(), &register("alice", Some(&answer)), Challenge::Registrar);
    assert_eq!(v, Verdict::Challenge { stale: false });
    // No credentials at all: a plain challenge, not counted as a failure.
    assert_eq!(
        a.verify(now, peer(), &register("alice", None), Challenge::Registrar),
        Verdict::Challenge { stale: false }
    );
    assert_eq!(a.stats().failed, 0);
}

#[test]
fn identity_must_match_the_user() {
    let now = Instant::now();
    let a = authenticator(&Algorithm::ALL, AuthPolicy::default(), now);
    assert_eq!(round(&a, now, Algorithm::Md5, "alice", "secret-a", "bob"), Verdict::Forbidden);
    assert_eq!(a.stats().identity_mismatch, 1);

    let mut policy = AuthPolicy::default();
    policy.aliases.insert("alice".into(), vec!["1001".into()]);
    let a = authenticator(&Algorithm::ALL, policy, now);
    assert_eq!(round(&a, now, Algorithm::Md5, "alice", "secret-a", "1001"), Verdict::Accepted("alice".into()));
    assert_eq!(round(&a, now, Algorithm::Md5, "alice", "secret-a", "1002"), Verdict::Forbidden);

    let policy = AuthPolicy { identity: IdentityRule::Any, ..AuthPolicy::default() };
    let a = authenticator(&Algorithm::ALL, policy, now);
    assert_eq!(round(&a, now, Algorithm::Md5, "alice", "secret-a", "bob"), Verdict::Accepted("alice".into()));
}

#[test]
fn malformed_answers_are_bad_requests() {
    let now = Instant::now();
    let a = authenticator(&Algorithm::ALL, AuthPolicy::default(), now);
    let nonce = nonce_of(&a.challenge(now, &register("alice", None), Challenge::Registrar, false)[0].1);
    let good = client_answer(Algorithm::Md5, "alice", REALM, "secret-a", &nonce, "REGISTER", "sip:example.com", 1);
    let cases = [
        good.replace(", response=", ", xresponse="),
        good.replace(", nc=00000001", ""),
        good.replace("nc=00000001", "nc=1"),
        good.replace("nc=00000001", "nc=0000000g"),
        good.replace(", cnonce=\"0a4f113b\"", ""),
        good.replace("username=\"alice\", ", ""),
        format!("Digest realm=\"{REALM}\", nonce=\"{}\"", "x".repeat(2000)),
    ];
    for text in cases {
        let v = a.verify(now, peer(), &register("alice", Some(&text)), Challenge::Registrar);
        assert!(matches!(v, Verdict::BadRequest(_)), "{text}: {v:?}");
    }
    // Syntax that does not even parse as credentials.
    let v = a.verify(now, peer(), &register("alice", Some("Digest realm=\"example.com\" nonce")), Challenge::Registrar);
    assert!(matches!(v, Verdict::BadRequest(_)), "{v:?}");
    assert!(a.stats().malformed >= 8);
}

#[test]
fn answers_without_qop_or_with_an_unoffered_algorithm_get_a_fresh_challenge() {
    let now = Instant::now();
    let a = authenticator(&[Algorithm::Md5], AuthPolicy::default(), now);
    let nonce = nonce_of(&a.challenge(now, &register("alice", None), Challenge::Registrar, false)[0].1);
    // RFC 2069 style: no qop, no nc, no cnonce.
    let ha1 = Algorithm::Md5.hex_hash(&[b"alice:example.com:secret-a"]);
    let ha2 = Algorithm::Md5.hex_hash(&[b"REGISTER:sip:example.com"]);
    let resp = Algorithm::Md5.hex_hash(&[ha1.as_bytes(), b":", nonce.as_bytes(), b":", ha2.as_bytes()]);
    let old = format!("Digest username=\"alice\", realm=\"example.com\", nonce=\"{nonce}\", uri=\"sip:example.com\", response=\"{resp}\"");
    assert_eq!(
        a.verify(now, peer(), &register("alice", Some(&old)), Challenge::Registrar),
        Verdict::Challenge { stale: false }
    );
    let sha = client_answer(Algorithm::Sha256, "alice", REALM, "secret-a", &nonce, "REGISTER", "sip:example.com", 1);
    assert_eq!(
        a.verify(now, peer(), &register("alice", Some(&sha)), Challenge::Registrar),
        Verdict::Challenge { stale: false }
    );
    let sess = client_answer(Algorithm::Md5, "alice", REALM, "secret-a", &nonce, "REGISTER", "sip:example.com", 1)
        .replace("algorithm=MD5", "algorithm=MD5-sess");
    assert_eq!(
        a.verify(now, peer(), &register("alice", Some(&sess)), Challenge::Registrar),
        Verdict::Challenge { stale: false }
    );
}

#[test]
fn the_nonce_count_table_is_bounded_and_never_forgets_into_a_replay() {
    let t = NonceCounts::new(SHARDS); // one nonce per shard
    let id = |i: u8| {
        let mut id = [0u8; 16];
        id[15] = i; // same shard for every multiple of SHARDS
        id[0] = i;
        id
    };
    assert_eq!(t.check(id(0), 100, 1, 0), NcCheck::Fresh);
    assert_eq!(t.check(id(0), 100, 1, 0), NcCheck::Replay);
    // A second nonce in the same shard evicts the first; the first is now used up.
    assert_eq!(t.check(id(64), 101, 1, 0), NcCheck::Fresh);
    assert_eq!(t.check(id(0), 100, 2, 0), NcCheck::Forgotten);
    assert!(t.len() <= SHARDS);
    // Expired entries go first and do not raise the floor.
    assert_eq!(t.check(id(128), 500, 1, 400), NcCheck::Fresh);
    assert_eq!(t.check(id(128), 500, 2, 400), NcCheck::Fresh);
    for i in 0..=255u8 {
        t.check(id(i), 1000 + u64::from(i), 1, 0);
    }
    assert!(t.len() <= SHARDS);
}

/// Collects what the authenticator reports to its [`FailureSink`], and locks the users in
/// `locked`.
#[derive(Default)]
struct Recorder {
    failed: std::sync::Mutex<Vec<(std::net::SocketAddr, Option<String>, Failure)>>,
    succeeded: std::sync::Mutex<Vec<String>>,
    asked: std::sync::Mutex<Vec<String>>,
    locked: std::sync::Mutex<Vec<String>>,
}

impl FailureSink for Recorder {
    fn auth_failed(&self, _now: Instant, from: &Peer, user: Option<&str>, why: Failure) {
        self.failed.lock().unwrap().push((from.addr, user.map(String::from), why));
    }

    fn locked_out(&self, _now: Instant, _from: &Peer, user: &str) -> bool {
        self.asked.lock().unwrap().push(user.into());
        self.locked.lock().unwrap().iter().any(|u| u == user)
    }

    fn auth_succeeded(&self, _now: Instant, _from: &Peer, user: &str) {
        self.succeeded.lock().unwrap().push(user.into());
    }
}

#[test]
fn the_failure_sink_hears_guesses_but_not_challenges_or_stale_nonces() {
    let t0 = Instant::now();
    let sink = Arc::new(Recorder::default());
    let a = authenticator(&Algorithm::ALL, AuthPolicy::default(), t0).with_failure_sink(sink.clone());
    let reported = || sink.failed.lock().unwrap().iter().map(|(_, u, w)| (u.clone(), *w)).collect::<Vec<_>>();
    let named = |u: &str, w: Failure| (Some(u.to_string()), w);
    // The first request without credentials only gets a challenge.
    assert_eq!(
        a.verify(t0, peer(), &register("alice", None), Challenge::Registrar),
        Verdict::Challenge { stale: false }
    );
    assert!(reported().is_empty());
    // A wrong password and an unknown user are guesses, reported with the name answered.
    round(&a, t0, Algorithm::Md5, "alice", "guess", "alice");
    round(&a, t0, Algorithm::Md5, "mallory", "guess", "mallory");
    assert_eq!(reported(), [named("alice", Failure::WrongResponse), named("mallory", Failure::WrongResponse)]);
    // A forged nonce too.
    let answer = client_answer(Algorithm::Md5, "alice", REALM, "secret-a", "abc", "REGISTER", "sip:example.com", 1);
    a.verify(t0, peer(), &register("alice", Some(&answer)), Challenge::Registrar);
    assert_eq!(reported().len(), 3);
    assert_eq!(reported()[2], named("alice", Failure::BadNonce));
    // The right password with an expired nonce is what any client meets: not reported.
    let nonce = nonce_of(&a.challenge(t0, &register("alice", None), Challenge::Registrar, false)[0].1);
    let right = client_answer(Algorithm::Md5, "alice", REALM, "secret-a", &nonce, "REGISTER", "sip:example.com", 1);
    let later = t0 + Duration::from_secs(301);
    assert_eq!(
        a.verify(later, peer(), &register("alice", Some(&right)), Challenge::Registrar),
        Verdict::Challenge { stale: true }
    );
    assert_eq!(reported().len(), 3);
    // Another user's identity with valid credentials is (403), with the user who tried.
    assert_eq!(round(&a, t0, Algorithm::Md5, "alice", "secret-a", "bob"), Verdict::Forbidden);
    assert_eq!(reported()[3], named("alice", Failure::IdentityMismatch));
    // Credentials that cannot be parsed name nobody.
    let broken = format!("Digest username=\"alice\", realm=\"{REALM}\", nonce=\"{nonce}\"");
    assert!(matches!(
        a.verify(t0, peer(), &register("alice", Some(&broken)), Challenge::Registrar),
        Verdict::BadRequest(_)
    ));
    assert_eq!(reported()[4], (None, Failure::Malformed));
    assert!(sink.failed.lock().unwrap().iter().all(|(addr, _, _)| *addr == peer().addr));
    assert!(sink.succeeded.lock().unwrap().is_empty(), "nothing authenticated yet");
    // A success is reported with its user (the account's back-off ends).
    assert_eq!(round(&a, t0, Algorithm::Sha256, "bob", "secret-b", "bob"), Verdict::Accepted("bob".into()));
    assert_eq!(*sink.succeeded.lock().unwrap(), ["bob"]);
}

/// While the sink says a user is locked out, its answers are challenged again without being
/// checked: a guess gains nothing, is not reported again (it was not a guess the server
/// judged), and even the right password waits for the lock to end.
#[test]
fn a_locked_out_user_is_challenged_unchecked() {
    let t0 = Instant::now();
    let sink = Arc::new(Recorder::default());
    sink.locked.lock().unwrap().push("alice".into());
    let a = authenticator(&Algorithm::ALL, AuthPolicy::default(), t0).with_failure_sink(sink.clone());
    for password in ["secret-a", "guess"] {
        assert_eq!(
            round(&a, t0, Algorithm::Md5, "alice", password, "alice"),
            Verdict::Challenge { stale: false },
            "{password}"
        );
    }
    // Unchecked: not even the identity (403) or the nonce (a forged one is a failure otherwise).
    assert_eq!(round(&a, t0, Algorithm::Md5, "alice", "secret-a", "bob"), Verdict::Challenge { stale: false });
    let forged = client_answer(Algorithm::Md5, "alice", REALM, "secret-a", "abc", "REGISTER", "sip:example.com", 1);
    a.verify(t0, peer(), &register("alice", Some(&forged)), Challenge::Registrar);
    assert!(sink.failed.lock().unwrap().is_empty() && sink.succeeded.lock().unwrap().is_empty());
    assert_eq!(a.stats().failed, 0);
    assert_eq!(sink.asked.lock().unwrap().len(), 4);
    // Other users are not affected; once unlocked, alice gets in.
    assert_eq!(round(&a, t0, Algorithm::Md5, "bob", "secret-b", "bob"), Verdict::Accepted("bob".into()));
    sink.locked.lock().unwrap().clear();
    assert_eq!(round(&a, t0, Algorithm::Md5, "alice", "secret-a", "alice"), Verdict::Accepted("alice".into()));
    assert_eq!(*sink.succeeded.lock().unwrap(), ["bob", "alice"]);
}
