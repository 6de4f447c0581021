//! Stream messages handled by the connection task that read them, while the worker's loop has
//! nothing waiting: the loop's turn per message cost about 850 instructions (its task's wake-up
//! and poll, the inbox's channel, the loop's own work), a turn per message over TCP, where a
//! connection's messages arrive one at a time (callgrind, issue 21).
//!
//! The worker installs a [`Handler`] on its thread (an engine dispatcher of its own, as each UDP
//! receiver has); its connections' tasks run on that thread too, between the loop's turns, and
//! hand it a message (through [`with_here`]) when that keeps every guarantee of the inbox:
//!
//! * Order: the inbox is empty. The loop handles and sends all it takes from the inbox within
//!   one turn, without yielding, so nothing read before this message (on any connection of this
//!   worker, or handed over by a UDP receiver) is still to be handled.
//! * Overload (`dispatch::admission`): a new request (one that starts a transaction or a dialog,
//!   the only kind shedding refuses) goes through the inbox, whose depth is what says a worker
//!   is overloaded over TCP; while anything waits there, everything else waits behind it as
//!   before. With overload control off (`[overload] enabled = false`) nothing reads that depth,
//!   and a new request is handled here like the rest (its turn of the loop cost ~850
//!   instructions a call proxied over TCP, callgrind, issue 21); admission still judges it
//!   (draining, transaction and memory limits, source budgets) in the same dispatcher code.
//!
//! What the handler sends over UDP leaves when the task has handed it all of a read
//! ([`Handler::flush`]), before the task waits for anything.

use crate::runtime::InboxMessage;
use herald_core::{inbound, Peer};
use herald_sip::Message;
use std::cell::RefCell;
use std::marker::PhantomData;
use std::net::SocketAddr;
use std::time::Instant;
use tokio::sync::mpsc;

/// Handles the stream messages of one worker on its thread.
pub(crate) trait Handler {
    /// `now`: when the connection read `msg`.
    fn handle(&mut self, from: Peer, local: SocketAddr, msg: Message, now: Instant);

    /// Sends what the messages handled so far queued (UDP datagrams wait for a batch).
    fn flush(&mut self);
}

struct Installed {
    worker: usize,
    handler: Box<dyn Handler>,
}

thread_local! {
    static HANDLER: RefCell<Option<Installed>> = const { RefCell::new(None) };
}

/// The handler installed on this thread; removed when dropped. Held by the worker's loop for
/// its life (it never leaves its thread: the runtime is a current-thread one).
pub(crate) struct Installation {
    _not_a_value: PhantomData<()>,
}

impl Drop for Installation {
    fn drop(&mut self) {
        let _ = HANDLER.try_with(|h| h.borrow_mut().take());
    }
}

/// Installs worker `worker`'s handler on this thread.
pub(crate) fn install(worker: usize, handler: Box<dyn Handler>) -> Installation {
    HANDLER.with(|h| *h.borrow_mut() = Some(Installed { worker, handler }));
    Installation { _not_a_value: PhantomData }
}

/// Whether `msg`, read by a connection of the worker whose inbox is `inbox`, may skip it: the
/// inbox is empty (order) and `msg` is not a new request, unless overload control is off
/// (`overload`: `[overload] enabled`; see the module).
pub(crate) fn may_skip_inbox(inbox: &mpsc::Sender<InboxMessage>, msg: &Message, overload: bool) -> bool {
    inbox.capacity() == inbox.max_capacity() && !(overload && inbound::is_new_request(msg))
}

/// Runs `f` with worker `worker`'s handler if it is installed on this thread (and not in use
/// already), with `None` otherwise (the caller queues its messages on the inbox). A connection
/// task hands it the messages of one read and then flushes it, within one call.
pub(crate) fn with_here<R>(worker: usize, f: impl FnOnce(Option<&mut dyn Handler>) -> R) -> R {
    HANDLER.with(|h| match h.try_borrow_mut() {
        Ok(mut h) => match h.as_mut() {
            Some(installed) if installed.worker == worker => f(Some(&mut *installed.handler)),
            _ => f(None),
        },
        Err(_) => f(None),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use herald_core::Transport;
    use herald_sip::Limits;
    use std::sync::{Arc, Mutex};

    struct Record(Arc<Mutex<Vec<String>>>);

    impl Handler for Record {
        fn handle(&mut self, _from: Peer, _local: SocketAddr, msg: Message, _now: Instant) {
            self.0.lock().unwrap().push(String::from_utf8_lossy(msg.as_bytes()).into_owned());
        }

        fn flush(&mut self) {
            self.0.lock().unwrap().push("flush".into());
        }
    }

    fn parsed(text: &'static str) -> Message {
        let mut msg = Message::parse(bytes::Bytes::from_static(text.as_bytes()), &Limits::default()).unwrap();
        msg.check().unwrap();
        msg
    }

    fn message() -> Message {
        request("OPTIONS", "")
    }

    fn request(method: &str, to_tag: &str) -> Message {
        let text = format!(
            "{method} sip:b@h SIP/2.0\r\nVia: SIP/2.0/TCP h;branch=z9hG4bK1\r\nMax-Forwards: 70\r\n\
             From: <sip:a@h>;tag=f\r\nTo: <sip:b@h>{to_tag}\r\nCall-ID: c\r\nCSeq: 1 {method}\r\nl: 0\r\n\r\n"
        );
        parsed(Box::leak(text.into_boxed_str()))
    }

    /// Responses, ACK, CANCEL and in-dialog requests skip an empty inbox; a new request never
    /// does while overload control is on (what is queued there tells it a worker is behind),
    /// and does when it is off; nothing does while anything waits there (order).
    #[test]
    fn only_what_overload_control_never_refuses_skips_the_inbox_and_only_while_it_is_empty() {
        let (tx, mut rx) = mpsc::channel::<InboxMessage>(4);
        let response = parsed(
            "SIP/2.0 200 OK\r\nVia: SIP/2.0/TCP h;branch=z9hG4bK1\r\nFrom: <sip:a@h>;tag=f\r\n\
             To: <sip:b@h>;tag=t\r\nCall-ID: c\r\nCSeq: 1 INVITE\r\nl: 0\r\n\r\n",
        );
        let skips = [response, request("ACK", ""), request("CANCEL", ""), request("BYE", ";tag=t")];
        let new = [request("INVITE", ""), request("REGISTER", ""), request("OPTIONS", "")];
        assert!(skips.iter().all(|m| may_skip_inbox(&tx, m, true)));
        assert!(new.iter().all(|m| !may_skip_inbox(&tx, m, true)));
        assert!(skips.iter().chain(&new).all(|m| may_skip_inbox(&tx, m, false)), "overload control off");
        let from = Peer { transport: Transport::Tcp, addr: "127.0.0.1:5060".parse().unwrap(), conn: None };
        let queued = InboxMessage { from, local: from.addr, msg: request("INVITE", "") };
        tx.try_send(queued).unwrap();
        for overload in [true, false] {
            assert!(skips.iter().chain(&new).all(|m| !may_skip_inbox(&tx, m, overload)), "behind a queued message");
        }
        assert!(rx.try_recv().is_ok());
        assert!(skips.iter().all(|m| may_skip_inbox(&tx, m, true)), "the inbox is empty again");
    }

    /// Only the installing worker's messages, only on its thread, only while installed.
    #[test]
    fn messages_reach_the_handler_of_their_worker_on_its_thread_while_it_is_installed() {
        let from = Peer { transport: Transport::Tcp, addr: "127.0.0.1:5060".parse().unwrap(), conn: None };
        let local: SocketAddr = "127.0.0.1:5070".parse().unwrap();
        let seen = Arc::new(Mutex::new(vec![]));
        let handle_here = |worker: usize, msg: Message| {
            with_here(worker, |here| match here {
                Some(h) => {
                    h.handle(from, local, msg, Instant::now());
                    h.flush();
                    true
                }
                None => false,
            })
        };
        assert!(!handle_here(0, message()), "nothing installed");
        let installation = install(0, Box::new(Record(seen.clone())));
        assert!(!handle_here(1, message()), "another worker's");
        std::thread::scope(|s| {
            s.spawn(|| assert!(!handle_here(0, message()), "another thread"));
        });
        assert!(with_here(0, |outer| outer.is_some() && !handle_here(0, message())), "in use already");
        assert!(handle_here(0, message()));
        assert_eq!(seen.lock().unwrap().len(), 2);
        assert_eq!(seen.lock().unwrap()[1], "flush");
        drop(installation);
        assert!(!handle_here(0, message()), "removed");
    }
}
