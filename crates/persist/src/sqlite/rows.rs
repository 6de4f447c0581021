//! A binding as a row and back.

use herald_core::{Peer, Transport};
use herald_store::{Aor, Binding};
use rusqlite::Row;
use std::num::NonZeroU32;

/// One row read back: its AoR and the binding, `expires_at` holding the seconds it has left
/// at `now_unix` (0: expired), as `LocationStore::restore` takes it.
pub(crate) fn read(row: &Row<'_>, now_unix: u64) -> rusqlite::Result<(Aor, Binding<Peer>)> {
    let aor: Vec<u8> = row.get(0)?;
    let expires: i64 = row.get(2)?;
    let transport: String = row.get(9)?;
    let source: String = row.get(10)?;
    // A row this herald did not write (edited by hand) falls back to the contact URI's own
    // transport and address: delivery uses the contact when the source is unusable.
    let transport = Transport::parse(&transport).unwrap_or(Transport::Udp);
    let addr = source.parse().unwrap_or_else(|_| ([0, 0, 0, 0], 0).into());
    let left = u64::try_from(expires).unwrap_or(0).saturating_sub(now_unix);
    let text =
        |i: usize| -> rusqlite::Result<Option<Box<str>>> { Ok(row.get::<_, Option<String>>(i)?.map(Into::into)) };
    let binding = Binding {
        contact: row.get::<_, String>(1)?.into(),
        call_id: row.get::<_, String>(3)?.into(),
        path: text(5)?,
        instance: text(6)?,
        // A stream connection does not survive a restart: the engine reaches a binding whose
        // connection is gone by its contact URI (engine/delivery.rs).
        source: Peer { transport, addr, conn: None },
        expires_at: u32::try_from(left).unwrap_or(u32::MAX),
        cseq: row.get(4)?,
        reg_id: row.get::<_, Option<u32>>(7)?.and_then(NonZeroU32::new),
        q: row.get(8)?,
    };
    Ok((Aor::from_canonical(aor), binding))
}
