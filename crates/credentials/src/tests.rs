use super::file::{format, load, parse, save};
use super::response::session_ha1;
use super::*;
use std::path::PathBuf;

fn table(realm: &str, users: &[(&str, &str)]) -> Credentials {
    let mut c = Credentials::new(realm);
    for (u, p) in users {
        c.insert(u, UserHa1::from_password(u, realm, p));
    }
    c
}

/// A fresh directory under the system temp dir, removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new(tag: &str) -> TempDir {
        use std::sync::atomic::{AtomicU32, Ordering};
        static N: AtomicU32 = AtomicU32::new(0);
        let p = std::env::temp_dir().join(format!(
            "herald-cred-{tag}-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&p).unwrap();
        TempDir(p)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[test]
fn ha1_matches_rfc_7616_example() {
    // RFC 7616 §3.9.1: Mufasa / http-auth@example.org / Circle of Life (SHA-256 HA1); RFC 2617
    // §3.5: Mufasa / testrealm@host.com / Circle Of Life (MD5 HA1).
    let h = UserHa1::from_password("Mufasa", "http-auth@example.org", "Circle of Life");
    assert_eq!(to_hex(&h.sha256), "7987c64c30e25f1b74be53f966b49b90f2808aa92faf9a00262392d7b4794232");
    assert_eq!(
        Algorithm::Md5.hex_hash(&[b"Mufasa:testrealm@host.com:Circle Of Life"]),
        "939e7578ed9e3c518a452acee763bce9"
    );
}

#[test]
fn algorithm_names_round_trip() {
    for a in Algorithm::ALL {
        assert_eq!(Algorithm::from_name(a.name()), Some(a));
        assert_eq!(Algorithm::from_name(&a.name().to_lowercase()), Some(a));
        assert_eq!(a.hash(&[b"x"]).len(), a.output_len());
    }
    assert_eq!(Algorithm::from_name("MD5-sess"), None);
    assert_eq!(Algorithm::ALL[0], Algorithm::Sha512_256, "strongest first (RFC 8760 §2.4)");
}

#[test]
fn file_round_trips() {
    let c = table("example.com", &[("bob", "pw2"), ("alice", "pw1")]);
    let text = format(&c);
    assert!(!text.contains("pw1") && !text.contains("pw2"), "no password in the file");
    let back = parse(&text, "users").unwrap();
    assert_eq!(back, c);
    assert_eq!(back.users(), ["alice", "bob"]);
}

#[test]
fn several_realms_round_trip_and_keep_their_users_apart() {
    let mut c = table("example.com", &[("alice", "pw1")]);
    c.insert_in("example.org", "alice", UserHa1::from_password("alice", "example.org", "pw2"));
    c.insert_in("example.org", "bob", UserHa1::from_password("bob", "example.org", "pw3"));
    let text = format(&c);
    assert!(text.contains("realm example.com\n") && text.contains("realm example.org\n"), "{text}");
    let back = parse(&text, "users").unwrap();
    assert_eq!(back, c);
    assert_eq!(back.realm(), "example.com", "the first realm is the default");
    assert_eq!(back.realms().collect::<Vec<_>>(), ["example.com", "example.org"]);
    assert_eq!(back.users_in("example.org"), ["alice", "bob"]);
    assert_eq!(back.realms_of("alice"), ["example.com", "example.org"]);
    assert_ne!(back.get_in("example.com", "alice"), back.get_in("example.org", "alice"), "two accounts");
    assert!(back.get_in("example.com", "bob").is_none());
    assert_eq!(back.len(), 3);
    let mut c = back;
    assert!(c.remove_in("example.org", "alice"));
    assert!(c.get_in("example.com", "alice").is_some(), "the other realm's alice stays");
    let e = parse("realm a\nrealm b\nrealm a\n", "users").unwrap_err();
    assert_eq!((e.line, e.message.as_str()), (3, "realm 'a' appears twice"));
}

#[test]
fn parse_errors_name_the_line() {
    let good = format(&table("example.com", &[("alice", "pw")]));
    let alice = good.lines().find(|l| l.starts_with("alice")).unwrap().to_owned();
    let cases: Vec<(String, usize, &str)> = vec![
        (format!("# c\n{alice}\n"), 2, "before the 'realm"),
        ("realm a b\n".into(), 1, "expected 'realm NAME'"),
        ("realm a\n\nalice 00 11\n".into(), 3, "found 3 fields"),
        (format!("realm a\n{}\n", alice.replacen(' ', "x ", 1).replace("alicex", "alice\"")), 2, "must not contain"),
        (format!("realm a\n{}\n", alice.replace(' ', " z").replacen("alice z", "alice ", 1)), 2, "hex digits"),
        (format!("realm a\n{alice}\n{alice}\n"), 3, "appears twice"),
        ("".into(), 0, "no 'realm NAME' line"),
    ];
    for (text, line, needle) in cases {
        let e = parse(&text, "users.txt").unwrap_err();
        assert_eq!(e.line, line, "{text:?}: {e}");
        assert!(e.message.contains(needle), "{text:?}: {e}");
        if line > 0 {
            assert!(e.to_string().starts_with(&format!("users.txt:{line}: ")), "{e}");
        }
    }
}

#[test]
fn names_with_quotes_or_spaces_are_refused() {
    assert!(invalid_user_name("alice").is_none());
    assert!(invalid_user_name("+4930123").is_none());
    for bad in ["", "a b", "a\"b", "a\\b", "a\tb", "#x", &"x".repeat(129)] {
        assert!(invalid_user_name(bad).is_some(), "{bad:?}");
    }
    assert!(invalid_realm("example.com").is_none());
    assert!(invalid_realm("ex ample").is_some());
}

#[test]
fn save_is_private_and_atomic() {
    use std::os::unix::fs::PermissionsExt;
    let dir = TempDir::new("save");
    let path = dir.0.join("users");
    let c = table("example.com", &[("alice", "pw")]);
    save(&path, &c).unwrap();
    assert_eq!(std::fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o600);
    assert_eq!(load(&path).unwrap(), c);
    let leftovers: Vec<_> = std::fs::read_dir(&dir.0).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(leftovers.len(), 1, "no temporary file left: {leftovers:?}");
}

#[test]
fn watcher_reloads_and_keeps_the_old_table_on_a_broken_file() {
    let dir = TempDir::new("watch");
    let path = dir.0.join("users");
    // Missing at start: an empty table for the realm.
    let (mut w, shared) = FileWatcher::open(&path, "example.com").unwrap();
    assert!(shared.current().is_empty());
    assert_eq!(w.poll(), Reload::Unchanged);

    save(&path, &table("example.com", &[("alice", "pw")])).unwrap();
    assert_eq!(w.poll(), Reload::Loaded(1));
    assert!(shared.current().get("alice").is_some());
    assert_eq!(w.poll(), Reload::Unchanged);

    save(&path, &table("example.com", &[("alice", "pw"), ("bob", "pw")])).unwrap();
    assert_eq!(w.poll(), Reload::Loaded(2));
    let before = shared.current();

    // An in-place edit that breaks the file: reported with its line, old table kept.
    let mut text = std::fs::read_to_string(&path).unwrap();
    text.push_str("carol nothex\n");
    std::fs::write(&path, text).unwrap();
    match w.poll() {
        Reload::Failed(e) => assert!(e.to_string().contains(":7: "), "{e}"),
        other => panic!("{other:?}"),
    }
    assert_eq!(*shared.current(), *before);
    assert_eq!(w.poll(), Reload::Unchanged, "a broken version is reported once");

    // Removed: the old table stays in use.
    std::fs::remove_file(&path).unwrap();
    assert_eq!(w.poll(), Reload::Missing);
    assert_eq!(w.poll(), Reload::Unchanged);
    assert_eq!(shared.current().len(), 2);

    // Another realm is loaded too (herald serve warns when a realm it challenges with has no
    // users): the file is the operator's, not refused for its realms.
    save(&path, &table("other.org", &[("mallory", "pw")])).unwrap();
    assert_eq!(w.poll(), Reload::Loaded(1));
    assert!(shared.current().get_in("other.org", "mallory").is_some());

    // Fixed: loaded again.
    save(&path, &table("example.com", &[("dave", "pw")])).unwrap();
    assert_eq!(w.poll(), Reload::Loaded(1));
    assert!(shared.current().get("dave").is_some());
}

#[test]
fn open_refuses_a_broken_file() {
    let dir = TempDir::new("open");
    let path = dir.0.join("users");
    std::fs::write(&path, "realm example.com\nalice zz\n").unwrap();
    let e = FileWatcher::open(&path, "example.com").unwrap_err();
    assert_eq!(e.line, 2);
}

#[test]
fn request_digest_matches_the_rfc_examples() {
    // RFC 2617 §3.5: Mufasa / testrealm@host.com / "Circle Of Life", MD5, qop=auth.
    let ha1 = to_hex(&Algorithm::Md5.ha1("Mufasa", "testrealm@host.com", "Circle Of Life"));
    assert_eq!(ha1, "939e7578ed9e3c518a452acee763bce9");
    let qop = Qop { qop: "auth", nc: "00000001", cnonce: "0a4f113b" };
    let r =
        request_digest(Algorithm::Md5, &ha1, "dcd98b7102dd2f0e8b11d0f600bfb0c093", "GET", "/dir/index.html", Some(qop));
    assert_eq!(to_hex(&r), "6629fae49393a05397450978507c4ef1");

    // RFC 7616 §3.9.1: the same exchange with SHA-256 (password "Circle of Life").
    let ha1 = UserHa1::from_password("Mufasa", "http-auth@example.org", "Circle of Life");
    let qop = Qop { qop: "auth", nc: "00000001", cnonce: "f2/wE4q74E6zIJEtWaHKaf5wv/H5QzzpXusqGemxURZJ" };
    let nonce = "7ypf/xlj9XXwfDPEoM4URrv/xwf94BcCAzFZH4GiTo0v";
    let r = request_digest(Algorithm::Sha256, &to_hex(&ha1.sha256), nonce, "GET", "/dir/index.html", Some(qop));
    assert_eq!(to_hex(&r), "753927fa0e85d155564e2e272a28d1802ca10daf4496794697cf8db5856cb6c1");
    assert_eq!(r.len(), Algorithm::Sha256.output_len());
}

#[test]
fn request_digest_without_qop_and_session_ha1_hash_what_the_rfcs_say() {
    // RFC 2617 §3.2.2.1 without qop: H(HA1:nonce:HA2).
    let alg = Algorithm::Sha512_256;
    let ha2 = alg.hex_hash(&[b"REGISTER:sip:r"]);
    let expected = alg.hash(&[format!("h:n:{ha2}").as_bytes()]);
    assert_eq!(request_digest(alg, "h", "n", "REGISTER", "sip:r", None), expected);
    // RFC 7616 §3.4.2 -sess: H(HA1:nonce:cnonce) in hex.
    assert_eq!(session_ha1(Algorithm::Md5, "h", "n", "c"), Algorithm::Md5.hex_hash(&[b"h:n:c"]));
}

#[test]
fn a_client_answer_carries_the_rfc_response_and_every_parameter() {
    // RFC 7616 §3.9.1, SHA-256.
    let answer = Answer {
        algorithm: Algorithm::Sha256,
        sess: false,
        user: "Mufasa",
        realm: "http-auth@example.org",
        nonce: "7ypf/xlj9XXwfDPEoM4URrv/xwf94BcCAzFZH4GiTo0v",
        uri: "/dir/index.html",
        nc: Some(1),
        cnonce: "f2/wE4q74E6zIJEtWaHKaf5wv/H5QzzpXusqGemxURZJ",
        opaque: Some("FQhe/qaU925kfnzjCev0ciny7QMkPqMAFRtzCUYo5tdS"),
    };
    assert_eq!(
        answer.header_value("GET", "Circle of Life"),
        "Digest username=\"Mufasa\", realm=\"http-auth@example.org\", \
         nonce=\"7ypf/xlj9XXwfDPEoM4URrv/xwf94BcCAzFZH4GiTo0v\", uri=\"/dir/index.html\", \
         response=\"753927fa0e85d155564e2e272a28d1802ca10daf4496794697cf8db5856cb6c1\", algorithm=SHA-256, \
         qop=auth, nc=00000001, cnonce=\"f2/wE4q74E6zIJEtWaHKaf5wv/H5QzzpXusqGemxURZJ\", \
         opaque=\"FQhe/qaU925kfnzjCev0ciny7QMkPqMAFRtzCUYo5tdS\""
    );

    // -sess: HA1 = H(H(user:realm:password):nonce:cnonce); without qop no nc or cnonce is sent.
    let sess = Answer { algorithm: Algorithm::Md5, sess: true, nc: None, opaque: None, ..answer };
    let ha1 = Algorithm::Md5.hex_hash(&[
        to_hex(&Algorithm::Md5.ha1("Mufasa", "http-auth@example.org", "pw")).as_bytes(),
        b":7ypf/xlj9XXwfDPEoM4URrv/xwf94BcCAzFZH4GiTo0v:f2/wE4q74E6zIJEtWaHKaf5wv/H5QzzpXusqGemxURZJ",
    ]);
    let response = to_hex(&request_digest(Algorithm::Md5, &ha1, sess.nonce, "GET", sess.uri, None));
    let value = sess.header_value("GET", "pw");
    assert!(value.ends_with(&format!("response=\"{response}\", algorithm=MD5-sess")), "{value}");
}
