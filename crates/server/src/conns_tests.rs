//! Tests of module `conns`: the write queue, the registry and the connections a sender
//! remembers.

use super::*;

fn peer(port: u16) -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], port))
}

/// A TCP connection on the loopback: the peer's end (blocking) and ours (non-blocking, on the
/// runtime this is called in).
pub(crate) fn connected_pair() -> (std::net::TcpStream, TcpStream) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let peer = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
    let (ours, _) = listener.accept().unwrap();
    ours.set_nonblocking(true).unwrap();
    (peer, TcpStream::from_std(ours).unwrap())
}

#[test]
fn the_write_queue_hands_out_its_front_in_order_and_frees_what_was_written() {
    let conn = Conn::new(ConnId(1), Transport::Tcp, peer(5060));
    for b in [&b"aaaa"[..], b"bb", b"cccccc"] {
        conn.push(Bytes::copy_from_slice(b), 100, Instant::now()).unwrap();
    }
    let batch = conn.front(2);
    assert_eq!(batch.len(), 2, "no more than asked for");
    assert_eq!((&batch[0][..], &batch[1][..]), (&b"aaaa"[..], &b"bb"[..]));
    // The socket took the first item and half of the second.
    let mut written = 0;
    assert!(conn.advance(5, &mut written));
    assert_eq!(written, 1);
    let batch = conn.front(2);
    assert_eq!((&batch[0][1..], &batch[1][..]), (&b"b"[..], &b"cccccc"[..]));
    // The rest: nothing left, and the bytes count against the cap no more.
    assert!(!conn.advance(7, &mut written));
    assert_eq!(written, 0);
    assert!(conn.front(2).is_empty());
    assert_eq!(conn.push(Bytes::from(vec![0; 100]), 100, Instant::now()), Ok(()));
    assert_eq!(conn.push(Bytes::from_static(b"x"), 100, Instant::now()), Err(Refused::Full));
}

/// A plain TCP connection's pushes go straight to the socket while nothing is queued, in
/// order with what is queued, and not at all once it is closed.
#[test]
fn pushes_to_an_empty_queue_are_written_at_once() {
    use std::io::Read;
    let rt = tokio::runtime::Builder::new_current_thread().enable_io().build().unwrap();
    rt.block_on(async {
        let (mut peer, ours) = connected_pair();
        let socket = Arc::new(ours);
        socket.writable().await.unwrap();
        let conn = Conn::new(ConnId(1), Transport::Tcp, peer.local_addr().unwrap());
        // Before the socket is attached (an outgoing connection still connecting): queued.
        conn.push(Bytes::from_static(b"first "), 100, Instant::now()).unwrap();
        conn.attach(socket.clone());
        // Something is queued: this one waits behind it.
        conn.push(Bytes::from_static(b"second "), 100, Instant::now()).unwrap();
        let batch = conn.front(4);
        assert_eq!(batch.len(), 2);
        assert!(conn.take_wrote_at().is_none());
        // The task writes the queue; then the queue is empty and a push writes itself.
        let mut written = 0;
        for b in &batch[..2] {
            socket.try_write(b).unwrap();
        }
        assert!(!conn.advance(13, &mut written));
        conn.push(Bytes::from_static(b"third"), 100, Instant::now()).unwrap();
        assert!(conn.front(4).is_empty(), "written, not queued");
        assert!(conn.take_wrote_at().is_some());
        let mut got = vec![0u8; 18];
        peer.read_exact(&mut got).unwrap();
        assert_eq!(&got, b"first second third");
        conn.close();
        assert_eq!(
            conn.push(Bytes::from_static(b"late"), 100, Instant::now()),
            Err(Refused::Closed(Bytes::from_static(b"late")))
        );
        // Handed back whole for another connection.
        let late = Bytes::from(b"later".to_vec());
        assert_eq!(conn.push(late.clone(), 100, Instant::now()), Err(Refused::Closed(late)));
        assert_eq!(Arc::strong_count(&socket), 1, "a closed connection keeps no socket");
    });
}

struct Wakes(std::sync::atomic::AtomicUsize);

impl std::task::Wake for Wakes {
    fn wake(self: Arc<Self>) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

/// Read without the lock once registered, the state is never stale where it matters: a
/// push or close after a quiet read wakes the task, and the next read sees what it did.
#[test]
fn the_queue_state_read_without_the_lock_misses_no_push_or_close() {
    let wakes = Arc::new(Wakes(std::sync::atomic::AtomicUsize::new(0)));
    let waker = Waker::from(wakes.clone());
    let mut cx = Context::from_waker(&waker);
    let conn = Conn::new(ConnId(1), Transport::Tcp, peer(5060));
    let q = conn.poll_state(&mut cx);
    assert!(!q.pending && !q.closed);
    assert!(!conn.poll_state(&mut cx).pending, "quiet");
    conn.push(Bytes::from_static(b"x"), 100, Instant::now()).unwrap();
    assert_eq!(wakes.0.load(Ordering::SeqCst), 1, "the push woke the task");
    assert!(conn.poll_state(&mut cx).pending);
    let mut written = 0;
    assert!(!conn.advance(1, &mut written));
    assert!(!conn.poll_state(&mut cx).pending, "written: quiet again");
    // The lock path registered the waker again: the next push wakes it too. The queue is
    // written before the task looks again (a push between its look and its write): the look
    // after that must not read a quiet state, the waker being gone.
    conn.push(Bytes::from_static(b"y"), 100, Instant::now()).unwrap();
    assert_eq!(wakes.0.load(Ordering::SeqCst), 2);
    assert!(!conn.advance(1, &mut written));
    assert!(!conn.poll_state(&mut cx).pending);
    conn.close();
    assert_eq!(wakes.0.load(Ordering::SeqCst), 3, "registered again by the last look");
    assert!(conn.poll_state(&mut cx).closed);
    let full = Conn::new(ConnId(2), Transport::Tcp, peer(5061));
    full.poll_state(&mut cx);
    assert_eq!(full.push(Bytes::from(vec![0; 101]), 100, Instant::now()), Err(Refused::Full));
    let q = full.poll_state(&mut cx);
    assert!(q.overflow && q.closed);
}

/// What a send finds through [`RecentConns`] is what it finds in the registry: the same
/// connection while registered, and one that refuses as closed once removed (closed first,
/// as `stream::task::Guard` does), over a random run of sends, closes and removals.
#[test]
fn recent_connections_are_the_registrys() {
    let registry = Registry::new();
    let mut recent = RecentConns::default();
    let mut open: Vec<Arc<Conn>> = (0..12).map(|i| registry.open(Transport::Tcp, peer(20_000 + i))).collect();
    let ids: Vec<ConnId> = open.iter().map(|c| c.id).collect();
    let mut seed = 0x2545_f491_4f6c_dd1d_u64;
    for _ in 0..5_000 {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        let id = ids[(seed % ids.len() as u64) as usize];
        if seed & 0x1ff_0000 == 0 {
            // A connection ends: closed, then removed.
            if let Some(at) = open.iter().position(|c| c.id == id) {
                let c = open.swap_remove(at);
                c.close();
                registry.remove(&c);
            }
            continue;
        }
        let direct = registry.get(id);
        let sent_direct =
            direct.as_ref().is_some_and(|c| c.push(Bytes::from_static(b"x"), 1 << 20, Instant::now()).is_ok());
        let sent_recent = match recent.get(&registry, id) {
            Some(c) => match c.push(Bytes::from_static(b"x"), 1 << 20, Instant::now()) {
                Ok(()) => true,
                Err(_) => {
                    recent.forget(id);
                    false
                }
            },
            None => false,
        };
        assert_eq!(sent_direct, sent_recent, "{id:?}");
        if let (Some(d), Some(r)) = (direct, recent.get(&registry, id)) {
            assert!(Arc::ptr_eq(&d, r));
        }
    }
}

/// What a send finds by address through [`RecentConns`] is what the registry finds, over a
/// random run of lookups, opens (a newer connection to an address replaces the older one),
/// closes and removals, on a few addresses of both stream transports.
#[test]
fn the_connection_remembered_by_address_is_the_registrys() {
    let registry = Registry::new();
    let mut recent = RecentConns::default();
    let mut open: Vec<Arc<Conn>> = vec![];
    let mut seed = 0x9e37_79b9_7f4a_7c15_u64;
    let (mut hits, mut found) = (0, 0);
    for _ in 0..20_000 {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        let transport = if seed & 0x100 == 0 { Transport::Tcp } else { Transport::Tls };
        let addr = peer(30_000 + (seed >> 20) as u16 % 3);
        match seed % 16 {
            0 => open.push(registry.open(transport, addr)),
            1 if !open.is_empty() => {
                let c = open.swap_remove((seed >> 32) as usize % open.len());
                c.close();
                registry.remove(&c);
            }
            _ => {
                let epoch = registry.addr_epoch();
                let remembered = recent
                    .last_by_addr
                    .as_ref()
                    .is_some_and(|(c, at)| *at == epoch && c.peer == addr && c.transport == transport);
                let direct = registry.by_addr(transport, addr);
                let memo = recent.by_addr(&registry, transport, addr);
                assert_eq!(direct.is_some(), memo.is_some());
                if let (Some(d), Some(m)) = (&direct, memo) {
                    assert!(Arc::ptr_eq(d, m));
                    found += 1;
                    hits += usize::from(remembered);
                }
            }
        }
    }
    assert!(hits > 1_000 && hits < found, "both ways taken: {hits} of {found}");
}

#[test]
fn connections_are_found_by_id_and_by_peer_until_removed() {
    let registry = Registry::new();
    // Ids of one registry shard (equal modulo SHARDS) as well as neighbours.
    let conns: Vec<Arc<Conn>> = (0..300).map(|i| registry.open(Transport::Tcp, peer(10_000 + i))).collect();
    for c in &conns {
        assert!(registry.get(c.id).is_some_and(|found| Arc::ptr_eq(&found, c)));
        assert!(registry.by_addr(Transport::Tcp, c.peer).is_some_and(|found| Arc::ptr_eq(&found, c)));
        assert!(registry.by_addr(Transport::Tls, c.peer).is_none());
    }
    for c in conns.iter().step_by(2) {
        registry.remove(c);
    }
    for (i, c) in conns.iter().enumerate() {
        assert_eq!(registry.get(c.id).is_some(), i % 2 == 1);
        assert_eq!(registry.by_addr(Transport::Tcp, c.peer).is_some(), i % 2 == 1);
    }
    // A newer connection to the same peer is the one found by address, and stays found when
    // the older one goes.
    let older = &conns[1];
    let newer = registry.open(Transport::Tcp, older.peer);
    assert!(registry.by_addr(Transport::Tcp, older.peer).is_some_and(|found| Arc::ptr_eq(&found, &newer)));
    registry.remove(older);
    assert!(registry.by_addr(Transport::Tcp, older.peer).is_some_and(|found| Arc::ptr_eq(&found, &newer)));
    assert!(registry.get(older.id).is_none());
    registry.remove(&newer);
    assert!(registry.by_addr(Transport::Tcp, older.peer).is_none());
}
