//! Tests of module `task`: the loop's first look at read readiness after it waited (`try_io`
//! with an empty operation) sees what `poll_read_ready`, the look it stands in for, sees.

use std::future::poll_fn;
use std::io::{self, Write};
use std::task::Poll;
use tokio::io::Interest;
use tokio::net::TcpStream;

/// The two looks at `stream`'s read readiness: the peek, then `poll_read_ready`.
async fn looks(stream: &TcpStream) -> (bool, bool) {
    let peek = stream.try_io(Interest::READABLE, || Ok(())).is_ok();
    let polled = poll_fn(|cx| Poll::Ready(stream.poll_read_ready(cx).is_ready())).await;
    (peek, polled)
}

/// Through the states a connection's socket goes through: nothing arrived, bytes waiting, a
/// short read that forgot the readiness (as `Socket::forget_readable_if_drained`), a read that
/// filled its buffer and left bytes behind, and the peer gone.
#[test]
fn the_peek_at_read_readiness_sees_what_poll_read_ready_sees() {
    let rt = tokio::runtime::Builder::new_current_thread().enable_io().build().unwrap();
    rt.block_on(async {
        let (mut peer, ours) = crate::conns::tests::connected_pair();
        ours.writable().await.unwrap(); // the driver has turned and seen the socket
        assert_eq!(looks(&ours).await, (false, false), "nothing arrived");
        peer.write_all(b"abc").unwrap();
        ours.readable().await.unwrap();
        assert_eq!(looks(&ours).await, (true, true), "bytes waiting");
        let mut buf = [0u8; 16];
        assert_eq!(ours.try_read(&mut buf).unwrap(), 3);
        let _ = ours.try_io(Interest::READABLE, || Err::<(), _>(io::ErrorKind::WouldBlock.into()));
        assert_eq!(looks(&ours).await, (false, false), "drained and forgotten");
        peer.write_all(&[b'x'; 64]).unwrap();
        ours.readable().await.unwrap();
        assert_eq!(ours.try_read(&mut buf).unwrap(), 16);
        assert_eq!(looks(&ours).await, (true, true), "a full read leaves the rest waiting");
        while ours.try_read(&mut buf).is_ok_and(|n| n > 0) {}
        assert_eq!(looks(&ours).await, (false, false), "read to EAGAIN");
        drop(peer);
        ours.readable().await.unwrap();
        assert_eq!(looks(&ours).await, (true, true), "the peer closed");
    });
}
