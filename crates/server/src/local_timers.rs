//! Timers for the tasks of a current-thread runtime built without tokio's time driver: the
//! worker's own wake-up, a connection's idle, handshake and close timers, the connect timeout.
//!
//! Why: tokio's time driver locks its wheel, reads the clock twice and walks the wheel's levels
//! on every reactor turn, about 500 instructions a turn, ~3.3k per call proxied over TCP (6.5
//! turns a call, callgrind, issue 21), while a worker's timers change a few times a second. Here
//! a thread's timers are kept in a thread-local ordered set and one timerfd (herald-sys) that the
//! reactor waits on like any socket: a reactor turn costs nothing for timers, and the clock is
//! read only when the timerfd expires. Setting a timer is a set insertion, and a system call
//! only when it is the earliest.
//!
//! A thread's first [`Sleep`] polled starts the thread's driver: a task that owns the timerfd,
//! wakes the timers that are due when it expires and sets it to the next. Only current-thread
//! runtimes (whose tasks never change threads); the worker runtimes are built so. When the
//! driver ends (its runtime is dropped), the thread's timers are forgotten: a [`Sleep`] of an
//! earlier driver registers afresh when polled again.

use std::cell::RefCell;
use std::collections::BTreeSet;
use std::future::{poll_fn, Future};
use std::io;
use std::os::fd::OwnedFd;
use std::pin::{pin, Pin};
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};
use tokio::io::unix::AsyncFd;

thread_local! {
    static TIMERS: RefCell<Timers> = RefCell::new(Timers::default());
}

#[derive(Default)]
struct Timers {
    /// Which driver the slots belong to: bumped when one ends, which voids the older keys.
    epoch: u64,
    /// The running driver's timerfd (shared with its task), and what it is set to.
    fd: Option<Arc<AsyncFd<OwnedFd>>>,
    armed: Option<Instant>,
    slots: Vec<Slot>,
    free: Vec<u32>,
    /// The timers not yet fired, by deadline: exactly one entry per such slot.
    queue: BTreeSet<(Instant, u32)>,
}

struct Slot {
    at: Instant,
    fired: bool,
    waker: Option<Waker>,
}

#[derive(Clone, Copy)]
struct Key {
    epoch: u64,
    slot: u32,
}

impl Timers {
    fn slot(&mut self, key: Option<Key>) -> Option<&mut Slot> {
        let key = key.filter(|k| k.epoch == self.epoch)?;
        self.slots.get_mut(key.slot as usize)
    }

    /// Sets the timerfd for `at` if that is earlier than it is set for. A timer removed or
    /// moved later leaves it as it is: the driver then finds nothing due and sets it again.
    fn arm_for(&mut self, at: Instant) {
        let Some(fd) = &self.fd else { return };
        if self.armed.is_some_and(|a| a <= at) {
            return;
        }
        match herald_sys::set_timerfd(fd.get_ref(), Some(at)) {
            Ok(()) => self.armed = Some(at),
            Err(e) => tracing::error!(error = %e, "cannot set the worker's timerfd"),
        }
    }

    fn register(&mut self, at: Instant, waker: &Waker) -> Key {
        let slot = Slot { at, fired: false, waker: Some(waker.clone()) };
        let index = match self.free.pop() {
            Some(i) => {
                self.slots[i as usize] = slot;
                i
            }
            None => {
                self.slots.push(slot);
                (self.slots.len() - 1) as u32
            }
        };
        self.queue.insert((at, index));
        self.arm_for(at);
        Key { epoch: self.epoch, slot: index }
    }

    /// The timers due at `now`, marked fired; the timerfd set for the next.
    fn take_due(&mut self, now: Instant, wake: &mut Vec<Waker>) {
        self.armed = None;
        while let Some(&(at, slot)) = self.queue.first() {
            if at > now {
                self.arm_for(at);
                break;
            }
            self.queue.pop_first();
            let s = &mut self.slots[slot as usize];
            s.fired = true;
            wake.extend(s.waker.take());
        }
    }
}

/// A timer that fires at its deadline once polled (registration happens at the first poll,
/// on the polling thread). `Unpin`: it keeps no self-reference; the thread's set keeps its slot.
pub(crate) struct Sleep {
    at: Instant,
    key: Option<Key>,
}

impl Sleep {
    pub(crate) fn until(at: Instant) -> Sleep {
        Sleep { at, key: None }
    }

    pub(crate) fn deadline(&self) -> Instant {
        self.at
    }

    /// Whether it has fired since it was last set (as tokio's `Sleep::is_elapsed`).
    pub(crate) fn is_elapsed(&self) -> bool {
        self.key.is_some() && TIMERS.with(|t| t.borrow_mut().slot(self.key).is_some_and(|s| s.fired))
    }

    /// Sets it for `at` (not fired). A registered timer keeps its waker.
    pub(crate) fn reset(&mut self, at: Instant) {
        let old = self.at;
        self.at = at;
        if self.key.is_none() {
            return;
        }
        TIMERS.with(|t| {
            let t = &mut *t.borrow_mut();
            let Some(key) = self.key.filter(|k| k.epoch == t.epoch) else { return };
            let s = &mut t.slots[key.slot as usize];
            if !std::mem::replace(&mut s.fired, false) {
                t.queue.remove(&(old, key.slot));
            }
            s.at = at;
            t.queue.insert((at, key.slot));
            t.arm_for(at);
        });
    }

    pub(crate) fn poll_elapsed(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        // `None`: no driver serves this thread yet (or its start failed): start one.
        let started = TIMERS.with(|t| {
            let t = &mut *t.borrow_mut();
            let driven = t.fd.is_some();
            if let Some(s) = t.slot(self.key) {
                if s.fired {
                    return Some(true);
                }
                if !s.waker.as_ref().is_some_and(|w| w.will_wake(cx.waker())) {
                    s.waker = Some(cx.waker().clone());
                }
                return driven.then_some(false);
            }
            self.key = Some(t.register(self.at, cx.waker()));
            driven.then_some(false)
        });
        match started {
            Some(true) => Poll::Ready(()),
            Some(false) => Poll::Pending,
            None => {
                if let Err(e) = start_driver() {
                    tracing::error!(error = %e, "cannot make a timerfd for the worker's timers");
                }
                Poll::Pending
            }
        }
    }
}

impl Future for Sleep {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        self.get_mut().poll_elapsed(cx)
    }
}

impl Drop for Sleep {
    fn drop(&mut self) {
        if self.key.is_none() {
            return;
        }
        // At thread exit the set may be gone already: nothing to release then.
        let _ = TIMERS.try_with(|t| {
            let t = &mut *t.borrow_mut();
            let Some(key) = self.key.filter(|k| k.epoch == t.epoch) else { return };
            let s = &mut t.slots[key.slot as usize];
            if !s.fired {
                t.queue.remove(&(s.at, key.slot));
            }
            s.waker = None;
            t.free.push(key.slot);
        });
    }
}

/// `f`'s output, or `Err(())` if `after` passes first.
pub(crate) async fn timeout<F: Future>(after: Duration, f: F) -> Result<F::Output, ()> {
    let mut f = pin!(f);
    let mut sleep = Sleep::until(Instant::now() + after);
    poll_fn(|cx| {
        if let Poll::Ready(out) = f.as_mut().poll(cx) {
            return Poll::Ready(Ok(out));
        }
        sleep.poll_elapsed(cx).map(Err)
    })
    .await
}

/// Sleeps for `d`.
pub(crate) async fn sleep(d: Duration) {
    Sleep::until(Instant::now() + d).await
}

/// Starts this thread's driver, unless one runs: what a worker does first, so that it fails
/// at once (as a runtime that cannot be built) rather than run without timers. Must be called
/// on a current-thread runtime (inside it).
pub(crate) fn start() -> io::Result<()> {
    if TIMERS.with(|t| t.borrow().fd.is_some()) {
        return Ok(());
    }
    start_driver()
}

/// Starts this thread's driver: a timerfd registered with the runtime's reactor, and the task
/// that serves it. On failure (no descriptor left) a [`Sleep`] polled later tries again.
fn start_driver() -> io::Result<()> {
    assert_eq!(
        tokio::runtime::Handle::current().runtime_flavor(),
        tokio::runtime::RuntimeFlavor::CurrentThread,
        "local timers serve current-thread runtimes only"
    );
    // `AsyncFd::new` is deprecated for the I/O safety of any `AsRawFd` type; an `OwnedFd` meets
    // the contract of its replacement, the unsafe `AsyncFd::register` (an open descriptor that
    // stays the same and open until the `AsyncFd` drops it), and this crate has no `unsafe`.
    #[allow(deprecated)]
    let fd = Arc::new(herald_sys::timerfd().and_then(AsyncFd::new)?);
    TIMERS.with(|t| {
        let t = &mut *t.borrow_mut();
        t.fd = Some(fd.clone());
        t.armed = None;
        if let Some(&(first, _)) = t.queue.first() {
            t.arm_for(first);
        }
    });
    tokio::spawn(drive(fd));
    Ok(())
}

/// Clears the thread's timers when the driver's task ends (its runtime dropped).
struct Ended;

impl Drop for Ended {
    fn drop(&mut self) {
        let _ = TIMERS.try_with(|t| {
            let t = &mut *t.borrow_mut();
            let epoch = t.epoch + 1;
            *t = Timers { epoch, ..Timers::default() };
        });
    }
}

async fn drive(fd: Arc<AsyncFd<OwnedFd>>) {
    let _ended = Ended;
    let mut wake = Vec::new();
    loop {
        let Ok(mut ready) = fd.readable().await else { return };
        let expired = herald_sys::read_timerfd(fd.get_ref()).unwrap_or(0);
        ready.clear_ready();
        if expired == 0 {
            continue;
        }
        let now = Instant::now();
        TIMERS.with(|t| t.borrow_mut().take_due(now, &mut wake));
        for w in wake.drain(..) {
            w.wake();
        }
    }
}

#[cfg(test)]
#[path = "local_timers_tests.rs"]
mod tests;
