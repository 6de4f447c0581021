//! The header scan's two builds (module `line_end`) compared: what the AVX2 one finds, the SSE2
//! one finds. Kept out of `line_end`, which `head` imports (no import cycles).

use super::line_end::Avx2;

/// What a scan found, comparable: the start line, the lines, their index and Via split,
/// the end of the header section and the Content-Length, or the error.
type Found = Result<(String, Vec<crate::message::HeaderField>, String, usize, Option<u32>), crate::error::ParseError>;

fn found(head: Result<crate::message::Head, crate::error::ParseError>) -> Found {
    head.map(|h| {
        let index = format!("{:?} {:?}", h.parsed.index, h.parsed.vias);
        (format!("{:?}", h.start), h.parsed.headers().to_vec(), index, h.head_end, h.content_length())
    })
}

/// The header scan built with AVX2 finds what the one built with SSE2 finds, line for line
/// and error for error: over the benchmark messages and the RFC 4475/5118 torture corpus,
/// each also with an octet that matters to the line grammar at every 3rd place, and cut
/// short at every 7th (with a small header line limit too, for the loop that tests each
/// line's length).
#[test]
fn both_widths_scan_alike() {
    use crate::limits::Limits;
    use crate::message::Head;
    let Some(avx2) = Avx2::detect() else { return };
    let (paths, _) = crate::test_corpus::message_files();
    let (mut scanned, mut refused) = (0usize, 0usize);
    for limits in [Limits::default(), Limits { max_header_line: 60, ..Limits::default() }] {
        for path in &paths {
            let original = std::fs::read(path).expect("message file");
            let mut variants = vec![original.clone()];
            for at in (0..original.len()).step_by(3) {
                for b in [b'\n', b'\r', b' ', b'\t', b':', b'x'] {
                    let mut v = original.clone();
                    v[at] = b;
                    variants.push(v);
                }
            }
            variants.extend((0..original.len()).step_by(7).map(|n| original[..n].to_vec()));
            for v in &variants {
                let sse2 = found(Head::scan_sse2(v, &limits));
                // SAFETY: `avx2` says this CPU has AVX2.
                let wide = found(unsafe { Head::scan_avx2(avx2, v, &limits) });
                assert_eq!(wide, sse2, "{} {:?}", path.display(), String::from_utf8_lossy(v));
                match sse2 {
                    Ok(_) => scanned += 1,
                    Err(_) => refused += 1,
                }
            }
        }
    }
    assert!(scanned > 1000 && refused > 1000, "{scanned} scanned, {refused} refused");
}
