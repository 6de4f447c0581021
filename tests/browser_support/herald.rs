//! `herald serve` as browser phones meet it: the domain herald.test, digest authentication with
//! its defaults (REGISTER and local callers challenged, MD5) and users made with
//! `herald users add`, a UDP/TCP listener, a WebSocket listener (`ws`) and a secure one (`wss`,
//! with the `[tls]` certificate the test generates). Configured by file only, as an operator
//! would. SIGTERM on drop (SIGKILL if it does not stop).

use crate::common::{herald_users_add, log_excerpt, port_block, spawn_serve, udp_options_ok, wait_bound};
use crate::tls_support::Pki;
use std::net::{SocketAddr, UdpSocket};
use std::path::{Path, PathBuf};
use std::process::Child;
use std::time::{Duration, Instant};

/// The domain herald serves and its phones' AoRs are in (also the digest realm).
pub const DOMAIN: &str = "herald.test";

pub struct WsHerald {
    child: Child,
    /// The UDP and TCP listener.
    pub udp: SocketAddr,
    pub ws: SocketAddr,
    pub wss: SocketAddr,
    pub log: PathBuf,
    /// The certificate of the WSS listener.
    pub pki: Pki,
}

impl WsHerald {
    /// Starts herald in `dir` with the users `(name, password)` of [`DOMAIN`]; returns once it
    /// answers OPTIONS over UDP and its WebSocket ports listen. Ports: a block of
    /// [`crate::common::BLOCK`]: UDP/TCP at base, the probe at base+1, WS at base+6, WSS at base+7.
    pub fn start(dir: &Path, users: &[(&str, &str)]) -> WsHerald {
        let base = port_block();
        let at = |offset: u16| -> SocketAddr { format!("127.0.0.1:{}", base + offset).parse().unwrap() };
        let (udp, ws, wss) = (at(0), at(6), at(7));
        let pki = Pki::generate(dir, "wss");
        let config = dir.join("herald.toml");
        std::fs::write(
            &config,
            format!(
                "domains = [\"{DOMAIN}\"]\n\
                 [server]\nworkers = 2\ndrain_timeout_s = 1\n\
                 [[listen]]\naddress = \"{udp}\"\n\
                 [[listen]]\naddress = \"{ws}\"\ntransports = [\"ws\"]\n\
                 [[listen]]\naddress = \"{wss}\"\ntransports = [\"wss\"]\n\
                 [tls]\ncertificate = \"{}\"\nprivate_key = \"{}\"\n\
                 [auth]\nusers_file = \"{}\"\n",
                pki.cert.display(),
                pki.key.display(),
                dir.join("users.txt").display()
            ),
        )
        .unwrap();
        for (name, password) in users {
            herald_users_add(&format!("{name}@{DOMAIN}"), password, &["--config", config.to_str().unwrap()]);
        }
        let log = dir.join("herald.log");
        let child = spawn_serve(&config, &log);
        let mut h = WsHerald { child, udp, ws, wss, log, pki };
        // OPTIONS is not challenged: it tells when herald is up.
        let probe = UdpSocket::bind(at(1)).unwrap();
        let deadline = Instant::now() + Duration::from_secs(20);
        while let Err(e) = udp_options_ok(&probe, udp, "browser-probe", Duration::from_millis(500)) {
            h.assert_running();
            assert!(Instant::now() < deadline, "herald did not start ({e}):\n{}", log_excerpt(&h.log));
        }
        wait_bound(ws.port(), true);
        wait_bound(wss.port(), true);
        h
    }

    /// The listener of WebSocket transport `ws` ("ws" or "wss").
    pub fn ws_addr(&self, ws: &str) -> SocketAddr {
        match ws {
            "ws" => self.ws,
            "wss" => self.wss,
            other => panic!("no {other} listener"),
        }
    }

    /// Panics with herald's log if it has exited.
    pub fn assert_running(&mut self) {
        if let Some(status) = self.child.try_wait().unwrap() {
            panic!("herald exited ({status}); log:\n{}", log_excerpt(&self.log));
        }
    }
}

impl Drop for WsHerald {
    fn drop(&mut self) {
        crate::common::stop_child(&mut self.child);
    }
}
