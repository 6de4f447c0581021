//! Stream framing: arbitrary bytes arrive in chunks (sizes derived from the first input byte);
//! every frame must be exactly the next bytes of the stream, memory stays bounded, and parsing a
//! cut message never panics.
#![no_main]

use bytes::BytesMut;
use herald_sip::framing::{next_frame, Frame};
use herald_sip::{Framing, Limits, Message};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&seed, stream)) = data.split_first() else {
        return;
    };
    // Odd seeds use small limits so that the size checks are reachable with short inputs.
    let limits = if seed & 1 == 1 {
        Limits { max_message_size: 1024, max_header_line: 512, max_headers: 16, ..Limits::default() }
    } else {
        Limits::default()
    };
    // Chunk sizes cycle through a small sequence derived from the seed: 1..=64 bytes, or up to
    // 8 KiB for the upper half of seeds.
    let scale = if seed >= 128 { 128 } else { 1 };
    let mut next_chunk = {
        let mut x = u32::from(seed) | 1;
        move || {
            x = x.wrapping_mul(1_103_515_245).wrapping_add(12_345);
            (((x >> 16) % 64) as usize + 1) * scale
        }
    };

    let mut buf = BytesMut::new();
    let (mut fed, mut consumed) = (0usize, 0usize);
    'outer: while fed < stream.len() {
        let chunk = next_chunk();
        let end = (fed + chunk).min(stream.len());
        buf.extend_from_slice(&stream[fed..end]);
        fed = end;
        assert!(
            buf.len() <= limits.max_message_size + chunk,
            "buffer holds {} bytes, limit {} + chunk {chunk}",
            buf.len(),
            limits.max_message_size
        );
        loop {
            let before = buf.len();
            match next_frame(&mut buf, &limits) {
                Ok(None) => {
                    assert_eq!(buf.len(), before, "Ok(None) consumed bytes");
                    break;
                }
                Err(_) => break 'outer,
                Ok(Some(frame)) => {
                    let taken: &[u8] = match &frame {
                        Frame::Ping => b"\r\n\r\n",
                        Frame::KeepAlive => b"\r\n",
                        Frame::Message(m) => m,
                    };
                    assert!(!taken.is_empty(), "empty frame");
                    assert_eq!(before - buf.len(), taken.len(), "frame length differs from bytes consumed");
                    assert_eq!(
                        &stream[consumed..consumed + taken.len()],
                        taken,
                        "frame is not the next bytes of the stream"
                    );
                    consumed += taken.len();
                    if let Frame::Message(m) = frame {
                        assert!(m.len() <= limits.max_message_size, "frame over max_message_size");
                        if let Ok(msg) = Message::parse_as(m.clone(), &limits, Framing::Stream) {
                            // Leading CR/LF octets may be skipped (RFC 3261 §7.5), nothing else:
                            // the framer and the parser must agree on where the message ends.
                            assert!(m.ends_with(msg.as_bytes()), "parser and framer disagree on the end");
                            assert_eq!(msg.trailing_octets(), 0, "parser ignored octets of a framed message");
                            let _ = msg.validate_all();
                        }
                    }
                }
            }
            assert_eq!(consumed + buf.len(), fed, "bytes lost or duplicated");
        }
    }
});
