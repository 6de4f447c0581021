//! Headless Chromium (Debian package `chromium`) running one browser phone page, with a fresh
//! profile, fake microphone and camera, and its log (the page's console lines included) in
//! `<dir>/<name>-chromium.log`. Stopped on drop, with its whole process group.

use std::fs::File;
use std::os::raw::c_int;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

extern "C" {
    fn kill(pid: c_int, sig: c_int) -> c_int;
}
const SIGKILL: c_int = 9;
const SIGTERM: c_int = 15;

pub struct Chromium {
    child: Child,
    pub log: PathBuf,
}

impl Chromium {
    /// Opens `url` in a new headless Chromium. `trusted_spki`: base64 SHA-256 hashes of public
    /// keys whose certificates Chromium accepts although no root it knows signed them
    /// (`--ignore-certificate-errors-spki-list`, honoured only with a `--user-data-dir`, which
    /// each browser gets fresh under `dir`).
    pub fn open(dir: &Path, name: &str, url: &str, trusted_spki: &[String]) -> Chromium {
        let profile = dir.join(format!("{name}-profile"));
        let _ = std::fs::remove_dir_all(&profile);
        std::fs::create_dir_all(&profile).unwrap();
        let log = dir.join(format!("{name}-chromium.log"));
        let mut cmd = Command::new("chromium");
        cmd.arg("--headless=new")
            // Chromium refuses to run as root with its sandbox on (these tests run as root in
            // containers, where the user-namespace sandbox is not available either); the page
            // it loads is our own.
            .arg("--no-sandbox")
            .arg(format!("--user-data-dir={}", profile.display()))
            // getUserMedia without a device or a permission prompt: a synthetic microphone
            // (a beep) and camera, and every media permission granted.
            .args(["--use-fake-device-for-media-stream", "--use-fake-ui-for-media-stream"])
            // Its log, with the page's console.log lines, on stderr.
            .args(["--enable-logging=stderr", "--v=0"])
            .args(["--no-first-run", "--no-default-browser-check", "--disable-gpu", "--mute-audio"])
            // Nothing but the test's own traffic: no component updates, sync, or field trials.
            .args(["--disable-background-networking", "--disable-component-update", "--disable-sync"])
            .args(["--disable-extensions", "--disable-default-apps", "--password-store=basic"]);
        if !trusted_spki.is_empty() {
            cmd.arg(format!("--ignore-certificate-errors-spki-list={}", trusted_spki.join(",")));
        }
        cmd.arg(url)
            .stdin(Stdio::null())
            .stdout(File::create(dir.join(format!("{name}-chromium.out"))).unwrap())
            .stderr(File::create(&log).unwrap())
            // A process group of its own, so that drop ends the renderer and GPU processes too.
            .process_group(0);
        let child = cmd.spawn().unwrap_or_else(|e| panic!("cannot run chromium (Debian package chromium): {e}"));
        Chromium { child, log }
    }

    /// The last `lines` lines of its log, without the complaints of a browser that finds no
    /// desktop (D-Bus, power and screen-saver services) around it.
    pub fn log_tail(&self, lines: usize) -> String {
        let text = String::from_utf8_lossy(&std::fs::read(&self.log).unwrap_or_default()).into_owned();
        let noise = ["dbus", "DBus", "UPower", "Floss", "ScreenSaver"];
        let all: Vec<&str> = text.lines().filter(|l| !noise.iter().any(|n| l.contains(n))).collect();
        all[all.len().saturating_sub(lines)..].join("\n")
    }
}

impl Drop for Chromium {
    /// SIGTERM first: the browser then ends and reaps its renderer, GPU and utility processes
    /// itself. Whatever is left after 3 s is killed with the whole process group.
    fn drop(&mut self) {
        let pid = self.child.id() as c_int;
        // SAFETY: kill(2) on the process this Chromium is and on the process group it leads
        // (spawned with process_group(0), so the group id is its pid); no memory effects.
        unsafe {
            kill(pid, SIGTERM);
        }
        let deadline = Instant::now() + Duration::from_secs(3);
        while self.child.try_wait().ok().flatten().is_none() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        // SAFETY: as above.
        unsafe {
            kill(-pid, SIGKILL);
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The base64 SHA-256 of the SubjectPublicKeyInfo of the PEM certificate `cert`: what
/// `--ignore-certificate-errors-spki-list` takes (made with the `openssl` command).
pub fn spki_sha256(cert: &Path) -> String {
    let script = "openssl x509 -in \"$0\" -pubkey -noout | openssl pkey -pubin -outform der \
                  | openssl dgst -sha256 -binary | openssl base64 -A";
    let out = Command::new("sh").args(["-c", script]).arg(cert).stderr(Stdio::inherit()).output().unwrap();
    let hash = String::from_utf8(out.stdout).unwrap().trim().to_owned();
    assert!(out.status.success() && hash.len() == 44, "SPKI hash of {}: {hash:?}", cert.display());
    hash
}
