//! The batch calls and socket options over real loopback sockets: what the kernel actually
//! returns, not a model of it.

use herald_sys::{
    enable_rx_metadata, enable_rx_timestamps, poll, realtime_ns, reuseport_tcp_listener, reuseport_udp, send_batch,
    wait_writable, RecvBatch, SendBatch, Wait, BATCH,
};
use std::io;
use std::io::IoSlice;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, UdpSocket};
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

const LO: IpAddr = IpAddr::V4(Ipv4Addr::LOCALHOST);

fn socket() -> UdpSocket {
    let s = UdpSocket::bind((LO, 0)).unwrap();
    s.set_nonblocking(true).unwrap();
    s
}

/// Receives until `want` datagrams came (or 5 s passed), calling `each` on every one.
fn receive(rx: &UdpSocket, batch: &mut RecvBatch, want: usize, mut each: impl FnMut(herald_sys::Datagram<'_>)) {
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut got = 0;
    while got < want {
        match batch.recv(rx, Wait::Never) {
            Ok(n) => {
                assert!(n <= BATCH);
                assert_eq!(batch.len(), n);
                got += n;
                batch.iter().for_each(&mut each);
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => std::thread::sleep(Duration::from_millis(1)),
            Err(e) => panic!("{e}"),
        }
        assert!(Instant::now() < deadline, "{got} of {want} datagrams");
    }
    assert_eq!(got, want);
}

#[test]
fn a_batch_round_trips_with_sources_timestamps_and_order() {
    let (tx, rx) = (socket(), socket());
    enable_rx_timestamps(&rx).unwrap();
    let to = rx.local_addr().unwrap();
    let queue: Vec<(Vec<u8>, SocketAddr)> = (0..40u8).map(|i| (vec![i; 100 + usize::from(i)], to)).collect();
    let before = realtime_ns();
    assert_eq!(send_batch(&tx, &queue, Wait::Never).0, 40);
    let mut batch = RecvBatch::new(2048);
    let mut seen = Vec::new();
    receive(&rx, &mut batch, 40, |d| {
        assert_eq!(d.source, Some(tx.local_addr().unwrap()));
        assert!(!d.truncated);
        assert_eq!(d.local, None, "IP_PKTINFO is off on a socket bound to one address");
        let stamp = d.kernel_ns.expect("SCM_TIMESTAMPNS");
        assert!(before <= stamp && stamp <= realtime_ns(), "{before} <= {stamp}");
        assert_eq!(d.drops, None, "SO_RXQ_OVFL is off");
        seen.push(d.payload.to_vec());
    });
    let sent: Vec<Vec<u8>> = queue.into_iter().map(|(b, _)| b).collect();
    assert_eq!(seen, sent, "every datagram whole and in order");
    // The last batch by index: what `iter` gives, and nothing past its end.
    let last: Vec<_> = batch.iter().collect();
    assert!(!last.is_empty());
    assert_eq!((0..last.len()).map(|i| batch.get(i).unwrap()).collect::<Vec<_>>(), last);
    assert_eq!(batch.get(last.len()), None);
    // Empty and non-blocking: WouldBlock, and the last batch is gone.
    assert_eq!(batch.recv(&rx, Wait::Never).unwrap_err().kind(), io::ErrorKind::WouldBlock);
    assert!(batch.is_empty());
}

/// One `SendBatch`'s headers serve call after call: each call sends its own payloads to its own
/// destinations, whatever the calls before it set in the headers - a longer batch before a
/// shorter one, addressed datagrams before a connected socket's (no name) and after it.
#[test]
fn a_send_batch_reused_sends_each_call_what_it_was_given() {
    let (tx, rx, other) = (socket(), socket(), socket());
    let (to, to_other) = (rx.local_addr().unwrap(), other.local_addr().unwrap());
    let mut headers = SendBatch::new();
    let mut batch = RecvBatch::new(64);
    let got = |rx: &UdpSocket, batch: &mut RecvBatch, want: usize| {
        let mut got = Vec::new();
        receive(rx, batch, want, |d| got.push(d.payload.to_vec()));
        got
    };
    let three = [(b"one".as_slice(), to), (b"two".as_slice(), to_other), (b"three".as_slice(), to)];
    assert_eq!(headers.send(&tx, &three, Wait::Never).0, 3);
    assert_eq!(got(&rx, &mut batch, 2), [b"one".to_vec(), b"three".to_vec()]);
    assert_eq!(got(&other, &mut batch, 1), [b"two".to_vec()]);

    tx.connect(to_other).unwrap();
    let connected: [&[u8]; 1] = [b"connected"];
    let (n, e) = headers.send(&tx, &connected, Wait::Never);
    assert_eq!((n, e.map(|e| e.kind())), (1, None));
    assert_eq!(got(&other, &mut batch, 1), [b"connected".to_vec()]);

    let unconnected = socket();
    assert_eq!(headers.send(&unconnected, &[(b"again".as_slice(), to)], Wait::Never).0, 1);
    assert_eq!(got(&rx, &mut batch, 1), [b"again".to_vec()]);
    assert_eq!(rx.recv(&mut [0; 16]).unwrap_err().kind(), io::ErrorKind::WouldBlock, "nothing more");
}

#[test]
fn a_datagram_longer_than_its_slot_is_cut_and_flagged() {
    let (tx, rx) = (socket(), socket());
    let to = rx.local_addr().unwrap();
    send_batch(&tx, &[(b"0123456789abcdef".as_slice(), to), (b"short".as_slice(), to)], Wait::Never);
    let mut batch = RecvBatch::new(10);
    assert_eq!(batch.slot(), 10);
    let mut got = Vec::new();
    receive(&rx, &mut batch, 2, |d| got.push((d.payload.to_vec(), d.truncated)));
    assert_eq!(got, [(b"0123456789".to_vec(), true), (b"short".to_vec(), false)]);
}

#[test]
fn a_wildcard_reuseport_socket_learns_each_datagrams_local_address() {
    let rx = reuseport_udp("0.0.0.0:0".parse().unwrap(), 1 << 20).unwrap();
    let port = rx.local_addr().unwrap().port();
    let tx = socket();
    send_batch(&tx, &[(b"x".as_slice(), SocketAddr::new(LO, port))], Wait::Never);
    let mut batch = RecvBatch::new(64);
    receive(&rx, &mut batch, 1, |d| {
        assert_eq!(d.local, Some(LO));
        assert_eq!(d.source, Some(tx.local_addr().unwrap()));
    });

    // The same over IPv6, where the machine has it.
    let Ok(rx6) = reuseport_udp("[::]:0".parse().unwrap(), 1 << 20) else { return };
    let Ok(tx6) = UdpSocket::bind((Ipv6Addr::LOCALHOST, 0)) else { return };
    let to = SocketAddr::new(Ipv6Addr::LOCALHOST.into(), rx6.local_addr().unwrap().port());
    if send_batch(&tx6, &[(b"x".as_slice(), to)], Wait::Never).0 == 1 {
        receive(&rx6, &mut batch, 1, |d| {
            assert_eq!(d.local, Some(IpAddr::V6(Ipv6Addr::LOCALHOST)));
            assert_eq!(d.source, Some(tx6.local_addr().unwrap()));
        });
    }
}

#[test]
fn reuseport_sockets_share_a_port_and_do_not_block() {
    let first = reuseport_udp("127.0.0.1:0".parse().unwrap(), 1 << 20).unwrap();
    let addr = first.local_addr().unwrap();
    let second = reuseport_udp(addr, 1 << 20).unwrap();
    assert_eq!(second.local_addr().unwrap(), addr);
    // Non-blocking: even a call that may wait returns at once on an empty queue.
    let mut batch = RecvBatch::new(64);
    assert_eq!(batch.recv(&second, Wait::IfBlocking).unwrap_err().kind(), io::ErrorKind::WouldBlock);
    // A port taken without SO_REUSEPORT is refused.
    let plain = socket();
    let e = reuseport_udp(plain.local_addr().unwrap(), 1 << 20).unwrap_err();
    assert_eq!(e.kind(), io::ErrorKind::AddrInUse);

    let listener = reuseport_tcp_listener("127.0.0.1:0".parse().unwrap(), 16).unwrap();
    let at = listener.local_addr().unwrap();
    let other = reuseport_tcp_listener(at, 16).unwrap();
    assert_eq!(other.local_addr().unwrap(), at);
    std::net::TcpStream::connect(at).unwrap();
    // One of the two listeners has the connection queued (the kernel picks by hash).
    let deadline = Instant::now() + Duration::from_secs(5);
    while listener.accept().is_err() && other.accept().is_err() {
        assert!(Instant::now() < deadline, "no connection accepted");
        std::thread::sleep(Duration::from_millis(1));
    }
}

#[test]
fn the_drop_count_arrives_with_the_first_datagram_queued_after_drops() {
    let (tx, rx) = (socket(), socket());
    socket2::SockRef::from(&rx).set_recv_buffer_size(4096).unwrap();
    enable_rx_metadata(&rx).unwrap();
    let to = rx.local_addr().unwrap();
    let flood: Vec<(Vec<u8>, SocketAddr)> = (0..200).map(|_| (vec![b'x'; 1000], to)).collect();
    assert_eq!(send_batch(&tx, &flood, Wait::Never).0, 200, "loopback sends succeed; the receiver drops");
    let mut batch = RecvBatch::new(2048);
    let mut queued = 0;
    while let Ok(n) = batch.recv(&rx, Wait::Never) {
        queued += n;
        assert!(batch.iter().all(|d| d.kernel_ns.is_some()));
    }
    assert!(queued < 200, "a 4 KiB buffer cannot hold 200 KB");
    send_batch(&tx, &[(b"after".as_slice(), to)], Wait::Never);
    let mut drops = None;
    receive(&rx, &mut batch, 1, |d| drops = d.drops);
    assert_eq!(drops, Some((200 - queued) as u32));
}

/// A batch re-arms only the headers its last call used (`RecvBatch::rearm`): every header the
/// kernel wrote back - with the control length of a timestamp alone - must get its whole control
/// buffer again before it is reused, or the drop count that later datagrams carry beside their
/// timestamp would be cut off (MSG_CTRUNC).
#[test]
fn headers_written_by_earlier_batches_get_their_whole_buffers_back() {
    let (tx, rx) = (socket(), socket());
    socket2::SockRef::from(&rx).set_recv_buffer_size(4096).unwrap();
    enable_rx_metadata(&rx).unwrap();
    let to = rx.local_addr().unwrap();
    let mut batch = RecvBatch::new(2048);
    // Batches of several sizes, timestamps only (no drops yet): the kernel shrinks each used
    // header's control length to one timestamp's.
    for n in [6, 1, 3, 8, 2] {
        let small: Vec<(Vec<u8>, SocketAddr)> = (0..n).map(|_| (vec![b's'; 10], to)).collect();
        send_batch(&tx, &small, Wait::Never);
        receive(&rx, &mut batch, n, |d| assert_eq!((d.kernel_ns.is_some(), d.drops), (true, None)));
    }
    let flood: Vec<(Vec<u8>, SocketAddr)> = (0..200).map(|_| (vec![b'x'; 1000], to)).collect();
    send_batch(&tx, &flood, Wait::Never);
    while batch.recv(&rx, Wait::Never).is_ok() {}
    // Queued after the drops: each carries a timestamp and the drop count.
    let after: Vec<(Vec<u8>, SocketAddr)> = (0..8).map(|_| (vec![b'a'; 10], to)).collect();
    send_batch(&tx, &after, Wait::Never);
    let mut seen = 0;
    receive(&rx, &mut batch, 8, |d| {
        assert!(d.kernel_ns.is_some() && d.drops.is_some_and(|n| n > 0), "{d:?}");
        assert_eq!(d.source, Some(tx.local_addr().unwrap()));
        seen += 1;
    });
    assert_eq!(seen, 8);
}

#[test]
fn a_connected_socket_sends_bare_payloads_and_a_payload_only_batch_reads_them() {
    let (tx, rx) = (socket(), socket());
    tx.connect(rx.local_addr().unwrap()).unwrap();
    let payload = b"to the connected peer".as_slice();
    assert_eq!(send_batch(&tx, &[payload; 5], Wait::IfBlocking).0, 5);
    let mut batch = RecvBatch::payload_only(64);
    // At most two of the five, then the rest.
    let deadline = Instant::now() + Duration::from_secs(5);
    while batch.recv_at_most(&rx, 2, Wait::Never).is_err() {
        assert!(Instant::now() < deadline);
    }
    assert_eq!(batch.len(), 2);
    receive(&rx, &mut batch, 3, |d| {
        assert_eq!(d.payload, payload);
        assert_eq!((d.source, d.local, d.kernel_ns, d.drops), (None, None, None, None));
    });
}

#[test]
fn a_send_that_fails_reports_how_many_went_and_the_error() {
    let tx = socket();
    // No destination and not connected: the first datagram fails (EDESTADDRREQ).
    let (sent, err) = send_batch(&tx, &[b"x".as_slice(); 3], Wait::Never);
    assert_eq!(sent, 0);
    assert_eq!(err.unwrap().raw_os_error(), Some(libc::EDESTADDRREQ));
    // An empty queue is sent at once.
    let none: [(&[u8], SocketAddr); 0] = [];
    assert!(matches!(send_batch(&tx, &none, Wait::Never), (0, None)));
}

#[test]
fn a_blocking_receive_waits_for_the_first_datagram_up_to_the_socket_timeout() {
    let rx = UdpSocket::bind((LO, 0)).unwrap();
    rx.set_read_timeout(Some(Duration::from_millis(30))).unwrap();
    let mut batch = RecvBatch::new(64);
    let start = Instant::now();
    assert_eq!(batch.recv(&rx, Wait::IfBlocking).unwrap_err().kind(), io::ErrorKind::WouldBlock);
    assert!(start.elapsed() >= Duration::from_millis(25));
    let to = rx.local_addr().unwrap();
    let sender = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(20));
        send_batch(&socket(), &[(b"late".as_slice(), to)], Wait::Never).0
    });
    rx.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    assert_eq!(batch.recv(&rx, Wait::IfBlocking).unwrap(), 1);
    assert_eq!(batch.iter().next().unwrap().payload, b"late");
    assert_eq!(sender.join().unwrap(), 1);
}

#[test]
fn poll_reports_readable_and_writable_sockets() {
    let (tx, rx) = (socket(), socket());
    assert!(wait_writable(&tx, Duration::from_millis(100)));
    let mut fds = [libc::pollfd { fd: rx.as_raw_fd(), events: libc::POLLIN, revents: 0 }];
    assert_eq!(poll(&mut fds, Duration::from_micros(500)).unwrap(), 0, "nothing to read yet");
    send_batch(&tx, &[(b"x".as_slice(), rx.local_addr().unwrap())], Wait::Never);
    assert_eq!(poll(&mut fds, Duration::from_secs(5)).unwrap(), 1);
    assert_ne!(fds[0].revents & libc::POLLIN, 0);
    // A negative fd is ignored; with nothing to watch, poll sleeps out its timeout.
    let mut ignored = [libc::pollfd { fd: -1, events: libc::POLLIN, revents: 0 }];
    let start = Instant::now();
    assert_eq!(poll(&mut ignored, Duration::from_millis(5)).unwrap(), 0);
    assert!(start.elapsed() >= Duration::from_millis(4));
}

/// A batch moves to the thread that reads with it (the server's receivers are spawned so).
#[test]
fn a_batch_can_move_to_another_thread() {
    let (tx, rx) = (socket(), socket());
    let to = rx.local_addr().unwrap();
    let mut batch = RecvBatch::new(64);
    send_batch(&tx, &[(b"a".as_slice(), to)], Wait::Never);
    receive(&rx, &mut batch, 1, |_| {});
    let reader = std::thread::spawn(move || {
        send_batch(&tx, &[(b"b".as_slice(), to)], Wait::Never);
        let mut got = Vec::new();
        receive(&rx, &mut batch, 1, |d| got.push(d.payload.to_vec()));
        got
    });
    assert_eq!(reader.join().unwrap(), [b"b".to_vec()]);
}

/// A stream's raw recv, send and writev: the bytes arrive whole and in order, an empty
/// non-blocking socket is `WouldBlock`, a closed peer reads as 0, and writing to a peer that
/// is gone is an error, not a SIGPIPE.
#[test]
fn stream_calls_move_bytes_in_order_and_report_the_end() {
    let listener = std::net::TcpListener::bind((LO, 0)).unwrap();
    let a = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
    let (b, _) = listener.accept().unwrap();
    b.set_nonblocking(true).unwrap();
    let mut buf = [0u8; 64];
    assert_eq!(herald_sys::recv(&b, &mut buf).unwrap_err().kind(), io::ErrorKind::WouldBlock);
    assert_eq!(herald_sys::send(&a, b"INVITE ").unwrap(), 7);
    let parts = [IoSlice::new(b"sip:"), IoSlice::new(b""), IoSlice::new(b"b@h")];
    assert_eq!(herald_sys::writev(&a, &parts).unwrap(), 7);
    let mut got = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(5);
    while got.len() < 14 {
        match herald_sys::recv(&b, &mut buf) {
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => std::thread::sleep(Duration::from_millis(1)),
            Err(e) => panic!("{e}"),
        }
        assert!(Instant::now() < deadline, "{got:?}");
    }
    assert_eq!(got, b"INVITE sip:b@h");
    drop(a);
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        match herald_sys::recv(&b, &mut buf) {
            Ok(0) => break,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => std::thread::sleep(Duration::from_millis(1)),
            other => panic!("{other:?}"),
        }
        assert!(Instant::now() < deadline, "no end of stream");
    }
    // The peer is gone: the first write may still be taken, a later one fails (RST, then EPIPE).
    let mut failed = None;
    for _ in 0..100 {
        match herald_sys::send(&b, b"x") {
            Ok(_) => std::thread::sleep(Duration::from_millis(1)),
            Err(e) => {
                failed = Some(e.kind());
                break;
            }
        }
    }
    assert!(matches!(failed, Some(io::ErrorKind::BrokenPipe | io::ErrorKind::ConnectionReset)), "{failed:?}");
}
