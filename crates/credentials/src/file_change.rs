//! Waiting for a users file to change without looking on a period: inotify(7) on the file and on
//! its directory, so that an idle `herald serve` makes no system call for the file.
//!
//! The directory's watch sees an editor's atomic save (a rename into place), a file created or
//! deleted, and a Kubernetes-style swap of a symlinked directory; the file's own watch (through
//! a symlink, the target) sees an in-place write elsewhere. After each change the watches are
//! set up again, so that they follow the file's current inode. Where inotify cannot be used (no
//! such directory, no inotify instances left), the caller's fallback period applies.

use rustix::fs::inotify::{self, CreateFlags, WatchFlags};
use std::mem::MaybeUninit;
use std::os::fd::OwnedFd;
use std::path::Path;
use std::time::Duration;

/// After a change, how long to let a save of several steps finish before the file is read.
const SETTLE: Duration = Duration::from_millis(50);

/// The watches of one file (none yet, or none possible).
#[derive(Debug, Default)]
pub(crate) struct FileChange {
    inotify: Option<OwnedFd>,
}

impl FileChange {
    /// Blocks until `path` may have changed; `fallback` when it cannot be watched.
    pub(crate) fn wait(&mut self, path: &Path, fallback: Duration) {
        if self.inotify.is_none() {
            self.inotify = watch(path);
        }
        let Some(fd) = &self.inotify else {
            std::thread::sleep(fallback);
            return;
        };
        let mut buf = [MaybeUninit::uninit(); 1024];
        // Any event is a change (IN_IGNORED too: a watched file or directory went away).
        let changed = inotify::Reader::new(fd, &mut buf).next().is_ok();
        // Set up again at the next wait: the file may be another inode now.
        self.inotify = None;
        std::thread::sleep(if changed { SETTLE } else { fallback });
    }
}

fn watch(path: &Path) -> Option<OwnedFd> {
    let fd = inotify::init(CreateFlags::CLOEXEC).ok()?;
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let in_dir = WatchFlags::CLOSE_WRITE
        | WatchFlags::MOVED_TO
        | WatchFlags::MOVED_FROM
        | WatchFlags::CREATE
        | WatchFlags::DELETE
        | WatchFlags::ATTRIB
        | WatchFlags::DELETE_SELF
        | WatchFlags::MOVE_SELF;
    inotify::add_watch(&fd, dir, in_dir).ok()?;
    // The file may be missing (users can be added later): the directory's watch sees it come.
    let _ = inotify::add_watch(&fd, path, WatchFlags::CLOSE_WRITE | WatchFlags::ATTRIB | WatchFlags::DELETE_SELF);
    Some(fd)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    fn dir(name: &str) -> std::path::PathBuf {
        let d = std::env::temp_dir().join(format!("herald-file-change-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    /// Waits in a thread; returns how long the wait took once `change` ran 200 ms into it.
    fn wait_through(path: &Path, change: impl FnOnce() + Send + 'static) -> Duration {
        let mut watch = FileChange::default();
        let path = path.to_owned();
        let started = Instant::now();
        let waiter = std::thread::spawn(move || {
            watch.wait(&path, Duration::from_secs(30));
            started.elapsed()
        });
        std::thread::sleep(Duration::from_millis(200));
        change();
        waiter.join().unwrap()
    }

    #[test]
    fn an_edit_a_rename_into_place_and_a_new_file_end_the_wait() {
        let d = dir("edits");
        let users = d.join("users");
        std::fs::write(&users, "a").unwrap();
        let p = users.clone();
        assert!(wait_through(&users, move || std::fs::write(&p, "b").unwrap()) < Duration::from_secs(10));
        let (p, tmp) = (users.clone(), d.join("users.tmp"));
        std::fs::write(&tmp, "c").unwrap();
        assert!(wait_through(&users, move || std::fs::rename(&tmp, &p).unwrap()) < Duration::from_secs(10));
        std::fs::remove_file(&users).unwrap();
        let p = users.clone();
        assert!(wait_through(&users, move || std::fs::write(&p, "d").unwrap()) < Duration::from_secs(10));
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn a_file_that_cannot_be_watched_falls_back_to_the_period() {
        let mut watch = FileChange::default();
        let started = Instant::now();
        watch.wait(Path::new("/nonexistent-herald-dir/users"), Duration::from_millis(100));
        assert!(started.elapsed() >= Duration::from_millis(100));
        assert!(watch.inotify.is_none());
    }
}
