//! TCP: responses on the same connection, framing across and within segments, RFC 5626
//! keep-alives, idle timeout, the connection limit, framing errors, outgoing connections.

mod common;

use common::*;
use herald_core::Transport;
use std::io::{Read, Write};
use std::net::TcpListener;
use std::time::{Duration, Instant};

#[test]
fn response_comes_back_on_the_same_connection() {
    let server = start("[server]\nworkers = 2\n");
    let mut addrs = vec![server.tcp4];
    addrs.extend(server.tcp6);
    for addr in addrs {
        let mut c = tcp_client(addr);
        // Several Call-IDs: some are owned by the other worker, which must answer through the
        // connection owner's write queue.
        for i in 0..8 {
            send_tcp(&mut c, &request("OPTIONS", &format!("tcp-{i}"), 1, "TCP", None, ""));
            let r = read_messages(&mut c, 1);
            assert_eq!(r.len(), 1, "{addr}: response {i}");
            assert_eq!(r[0].status(), Some(200));
            assert_eq!(r[0].call_id().unwrap(), format!("tcp-{i}"));
        }
    }
    let mut c = tcp_client(server.tcp4);
    send_tcp(&mut c, &request("MESSAGE", "tcp-peer", 1, "TCP", None, ""));
    let seen = server.next_seen();
    assert_eq!((seen.from.transport, seen.from.addr), (Transport::Tcp, c.local_addr().unwrap()));
    assert!(seen.from.conn.is_some());
    assert_eq!(seen.local, server.tcp4);
    server.stop().unwrap();
}

#[test]
fn two_messages_in_one_segment() {
    let server = start("[server]\nworkers = 1\n");
    let mut c = tcp_client(server.tcp4);
    let both = request("OPTIONS", "seg-1", 1, "TCP", None, "") + &request("OPTIONS", "seg-2", 1, "TCP", None, "");
    send_tcp(&mut c, &both);
    let r = read_messages(&mut c, 2);
    let ids: Vec<&str> = r.iter().map(|m| m.call_id().unwrap()).collect();
    assert_eq!(ids, ["seg-1", "seg-2"]);
    server.stop().unwrap();
}

/// A read of many requests meets a full inbox (one place, and new requests go through it while
/// overload control is on): the connection waits for room and goes on, and every request is
/// answered, in order.
#[test]
fn a_full_inbox_makes_the_connection_wait_and_keeps_its_order() {
    let server = start("[server]\nworkers = 1\n[limits]\ninbox_capacity = 1\n");
    let mut c = tcp_client(server.tcp4);
    let ids: Vec<String> = (0..30).map(|i| format!("full-{i}")).collect();
    let all: String = ids.iter().map(|id| request("OPTIONS", id, 1, "TCP", None, "")).collect();
    send_tcp(&mut c, &all);
    let r = read_messages(&mut c, ids.len());
    let got: Vec<&str> = r.iter().map(|m| m.call_id().unwrap()).collect();
    assert_eq!(got, ids);
    server.stop().unwrap();
}

#[test]
fn message_split_byte_by_byte() {
    let server = start("[server]\nworkers = 1\n");
    let mut c = tcp_client(server.tcp4);
    let text = request("OPTIONS", "split", 1, "TCP", None, "");
    for (i, b) in text.as_bytes().iter().enumerate() {
        c.write_all(&[*b]).unwrap();
        if i % 16 == 0 {
            std::thread::sleep(Duration::from_millis(1)); // separate segments and reads
        }
    }
    let r = read_messages(&mut c, 1);
    assert_eq!(r[0].call_id().unwrap(), "split");
    server.stop().unwrap();
}

#[test]
fn double_crlf_ping_gets_a_single_crlf_pong() {
    let server = start("[server]\nworkers = 1\n");
    let mut c = tcp_client(server.tcp4);
    c.write_all(b"\r\n\r\n").unwrap();
    let mut pong = [0u8; 8];
    let n = c.read(&mut pong).unwrap();
    assert_eq!(&pong[..n], b"\r\n");
    // A lone CRLF (a pong or keep-alive from the client) gets nothing; messages still work.
    c.write_all(b"\r\n").unwrap();
    send_tcp(&mut c, &request("OPTIONS", "after-ping", 1, "TCP", None, ""));
    let r = read_messages(&mut c, 1);
    assert_eq!(r[0].call_id().unwrap(), "after-ping");
    assert_eq!(server.stats.snapshot().tcp_pings, 1);
    server.stop().unwrap();
}

#[test]
fn idle_connections_are_closed() {
    let server = start("[server]\nworkers = 1\n[limits]\ntcp_idle_timeout_s = 1\n");
    let mut c = tcp_client(server.tcp4);
    c.write_all(b"\r\n\r\n").unwrap();
    let mut pong = [0u8; 2];
    c.read_exact(&mut pong).unwrap();
    let t0 = Instant::now();
    assert!(closed_within(&mut c, Duration::from_secs(4)), "idle connection stays open");
    let took = t0.elapsed();
    assert!(took >= Duration::from_millis(900), "closed too early: {took:?}");
    assert_eq!(server.stats.snapshot().tcp_idle_closed, 1);
    // An active connection is not closed: traffic resets the timer.
    let mut c = tcp_client(server.tcp4);
    for i in 0..4 {
        std::thread::sleep(Duration::from_millis(400));
        send_tcp(&mut c, &request("OPTIONS", &format!("busy-{i}"), 1, "TCP", None, ""));
        assert_eq!(read_messages(&mut c, 1).len(), 1, "busy connection closed at {i}");
    }
    server.stop().unwrap();
}

#[test]
fn connections_over_the_limit_are_closed_at_once() {
    let server = start("[server]\nworkers = 2\n[limits]\nmax_tcp_connections = 2\n");
    let mut kept = Vec::new();
    for _ in 0..2 {
        let mut c = tcp_client(server.tcp4);
        c.write_all(b"\r\n\r\n").unwrap();
        let mut pong = [0u8; 2];
        c.read_exact(&mut pong).unwrap();
        kept.push(c);
    }
    let mut third = tcp_client(server.tcp4);
    assert!(closed_within(&mut third, Duration::from_secs(2)), "third connection kept");
    assert_eq!(server.stats.snapshot().tcp_rejected, 1);
    assert_eq!(server.stats.snapshot().tcp_open, 2);
    // Closing one frees a place.
    drop(kept.pop());
    let deadline = Instant::now() + Duration::from_secs(2);
    while server.stats.snapshot().tcp_open > 1 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    let mut again = tcp_client(server.tcp4);
    send_tcp(&mut again, &request("OPTIONS", "again", 1, "TCP", None, ""));
    assert_eq!(read_messages(&mut again, 1).len(), 1);
    server.stop().unwrap();
}

#[test]
fn framing_error_gets_400_then_close() {
    let server = start("[server]\nworkers = 1\n");
    let mut c = tcp_client(server.tcp4);
    // No Content-Length on a stream: RFC 3261 §18.3 makes it mandatory; the framing is lost.
    let text = request("OPTIONS", "no-cl", 1, "TCP", None, "").replace("Content-Length: 0\r\n", "");
    send_tcp(&mut c, &text);
    let r = read_messages(&mut c, 1);
    assert_eq!(r.len(), 1);
    assert_eq!((r[0].status(), r[0].reason()), (Some(400), Some(&b"Missing Content-Length"[..])));
    assert_eq!(r[0].call_id().unwrap(), "no-cl");
    assert!(closed_within(&mut c, Duration::from_secs(2)));
    // Two Content-Length values: same.
    let mut c = tcp_client(server.tcp4);
    let text = request("OPTIONS", "two-cl", 1, "TCP", None, "l: 0\r\n");
    send_tcp(&mut c, &text);
    let r = read_messages(&mut c, 1);
    assert_eq!(r[0].status(), Some(400));
    assert!(closed_within(&mut c, Duration::from_secs(2)));
    // A bad header value does not lose the framing: 400, and the connection stays usable.
    let mut c = tcp_client(server.tcp4);
    send_tcp(&mut c, &request("MESSAGE", "bad-mf", 1, "TCP", None, "").replace("Max-Forwards: 70", "Max-Forwards: x"));
    assert_eq!(read_messages(&mut c, 1)[0].status(), Some(400));
    send_tcp(&mut c, &request("OPTIONS", "still-open", 1, "TCP", None, ""));
    assert_eq!(read_messages(&mut c, 1)[0].call_id().unwrap(), "still-open");
    let s = server.stats.snapshot();
    assert_eq!((s.tcp_framing_errors, s.malformed_answered), (2, 3), "{s:?}");
    server.stop().unwrap();
}

#[test]
fn outgoing_connection_is_opened_once_and_reused() {
    let server = start("[server]\nworkers = 2\n");
    let peer = TcpListener::bind("127.0.0.1:0").unwrap();
    let peer_addr = peer.local_addr().unwrap();
    let c = udp_client(server.udp4);
    let hdr = format!("X-Forward-To: tcp:{peer_addr}\r\n");
    c.send(request("FORWARD", "fwd-1", 1, "UDP", None, &hdr).as_bytes()).unwrap();
    let (mut conn, _) = peer.accept().unwrap();
    conn.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let got = read_messages(&mut conn, 1);
    assert_eq!(got[0].call_id().unwrap(), "fwd-1");
    c.send(request("FORWARD", "fwd-2", 1, "UDP", None, &hdr).as_bytes()).unwrap();
    let got = read_messages(&mut conn, 1);
    assert_eq!(got[0].call_id().unwrap(), "fwd-2", "second message reuses the connection");
    peer.set_nonblocking(true).unwrap();
    assert!(peer.accept().is_err(), "no second connection");
    // A message arriving on the outgoing connection reaches a handler with that connection.
    let _ = (server.next_seen(), server.next_seen());
    conn.write_all(request("MESSAGE", "back", 1, "TCP", None, "").as_bytes()).unwrap();
    let seen = server.next_seen();
    assert_eq!((seen.call_id.as_str(), seen.from.addr), ("back", peer_addr));
    assert!(seen.from.conn.is_some());
    server.stop().unwrap();
}
