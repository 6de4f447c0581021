//! Which of the worker loop's sources woke it, so that a turn polls only those.
//!
//! The loop waits on four sources (its inbox, its control channel, its timer and the
//! notification that a shard's deadline came earlier) and used to poll all four on every look:
//! twice per turn (once to find the work, once to register for the next), and over TCP a turn
//! per message, since a connection's messages arrive one by one. Re-polling a source that has
//! not woken the task only registers the same waker again: about 3k instructions per call
//! proxied over TCP (callgrind, issue 21), half of it the timer's `Sleep::poll`.
//!
//! Each source is polled with a waker of its own, which marks the source and then wakes the
//! task. A look polls the sources marked since the last look, and those the last look left
//! ready (a source is registered to wake the task only once it has answered `Pending`), and no
//! others: an unmarked source that answered `Pending` is still registered with this waker. The
//! mark is set before the task is woken and taken before the sources are polled, so a wake
//! that races a look either is seen by it or wakes the task again.

use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Wake, Waker};

/// A source of the worker loop's wake-ups.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Source {
    Inbox = 0,
    Ctl = 1,
    Timer = 2,
    /// A shard's deadline came earlier (module `shard_timers`).
    Woken = 3,
}

const ALL: u8 = 0b1111;

/// What the sources' wakers share with the loop.
struct Marks {
    /// One bit per [`Source`] woken since the loop last looked.
    woken: AtomicU8,
    /// The worker task's own waker.
    task: Mutex<Option<Waker>>,
}

/// The waker one source is polled with.
struct SourceWaker {
    marks: Arc<Marks>,
    bit: u8,
}

impl Wake for SourceWaker {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.marks.woken.fetch_or(self.bit, Ordering::AcqRel);
        if let Some(task) = self.marks.task.lock().expect("waker lock").as_ref() {
            task.wake_by_ref();
        }
    }
}

/// The loop's side: which sources to poll on this look.
pub(super) struct Wakes {
    marks: Arc<Marks>,
    wakers: [Waker; 4],
    /// The task waker last handed to the sources' wakers.
    task: Option<Waker>,
    /// Sources to poll: marked, or left ready by the last look (or never polled).
    due: u8,
}

impl Wakes {
    pub(super) fn new() -> Wakes {
        let marks = Arc::new(Marks { woken: AtomicU8::new(0), task: Mutex::new(None) });
        let waker = |bit: u8| Waker::from(Arc::new(SourceWaker { marks: marks.clone(), bit }));
        let wakers = [waker(1), waker(2), waker(4), waker(8)];
        Wakes { marks, wakers, task: None, due: ALL }
    }

    /// Starts a look from the task polled with `cx`: the sources' wakers wake that task from
    /// now on, and the marks set since the last look are taken.
    pub(super) fn begin(&mut self, cx: &Context<'_>) {
        if !self.task.as_ref().is_some_and(|t| t.will_wake(cx.waker())) {
            self.task = Some(cx.waker().clone());
            *self.marks.task.lock().expect("waker lock") = Some(cx.waker().clone());
        }
        self.due |= self.marks.woken.swap(0, Ordering::AcqRel);
    }

    /// Whether `s` is to be polled on this look.
    pub(super) fn due(&self, s: Source) -> bool {
        self.due & (1 << s as u8) != 0
    }

    /// The context to poll `s` with.
    pub(super) fn context(&self, s: Source) -> Context<'_> {
        Context::from_waker(&self.wakers[s as usize])
    }

    /// `s` answered `Pending`: it will wake the loop, and is not polled until it does.
    pub(super) fn pending(&mut self, s: Source) {
        self.due &= !(1 << s as u8);
    }

    /// `s` changed under the loop (the timer was reset): poll it on the next look.
    pub(super) fn touch(&mut self, s: Source) {
        self.due |= 1 << s as u8;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;

    struct Count(AtomicUsize);

    impl Wake for Count {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    /// A source that answered `Pending` is not polled again until its waker fires, which wakes
    /// the task and marks that source alone; one left ready is polled on every look.
    #[test]
    fn a_look_polls_the_sources_woken_since_the_last_and_those_left_ready() {
        let task = Arc::new(Count(AtomicUsize::new(0)));
        let task_waker = Waker::from(task.clone());
        let cx = Context::from_waker(&task_waker);
        let mut wakes = Wakes::new();
        wakes.begin(&cx);
        let all = [Source::Inbox, Source::Ctl, Source::Timer, Source::Woken];
        assert!(all.iter().all(|&s| wakes.due(s)), "everything is polled first");
        for s in all {
            wakes.pending(s);
        }
        wakes.begin(&cx);
        assert!(all.iter().all(|&s| !wakes.due(s)));
        // The timer fires: the task is woken and only the timer is due.
        wakes.context(Source::Timer).waker().wake_by_ref();
        assert_eq!(task.0.load(Ordering::SeqCst), 1);
        wakes.begin(&cx);
        assert_eq!(all.map(|s| wakes.due(s)), [false, false, true, false]);
        // Left ready (not `pending`): still due on the next look; a reset timer is due too.
        wakes.pending(Source::Timer);
        wakes.touch(Source::Timer);
        let inbox_waker = wakes.context(Source::Inbox).waker().clone();
        drop(inbox_waker); // a dropped clone wakes nothing
        wakes.context(Source::Inbox).waker().wake_by_ref();
        wakes.begin(&cx);
        assert_eq!(all.map(|s| wakes.due(s)), [true, false, true, false]);
        wakes.begin(&cx);
        assert_eq!(all.map(|s| wakes.due(s)), [true, false, true, false]);
        assert_eq!(task.0.load(Ordering::SeqCst), 2);
    }
}
