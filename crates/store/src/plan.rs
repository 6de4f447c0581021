//! What one REGISTER does to the bindings of its address-of-record (RFC 3261 §10.3 steps 6-7),
//! decided before anything changes so that a failure leaves the store untouched, then carried
//! out in place.

use crate::{Binding, ContactUpdate, StoreError, Update};
use herald_sip::uri::Uri;

pub(crate) struct Plan {
    /// Per contact: the index of the existing (unexpired) binding it updates.
    target: Vec<Option<usize>>,
    /// Per contact: superseded by a later contact naming the same binding.
    skip: Vec<bool>,
    /// Unexpired bindings once the plan is carried out.
    after: usize,
}

impl Plan {
    pub fn make<S>(old: &[Binding<S>], now_s: u32, update: &Update<'_, S>, max: usize) -> Result<Plan, StoreError> {
        let contacts = update.contacts;
        let n = contacts.len();
        // A request can at most remove every binding and add `max` new ones; more contacts
        // than that cannot succeed, and would make the quadratic matching below expensive.
        if n > 2 * max {
            return Err(StoreError::TooManyBindings { max, retry_after: retry_after(old, now_s) });
        }
        let mut uris = UriMemo::new(old, contacts);
        let mut target = vec![None; n];
        for (i, c) in contacts.iter().enumerate() {
            let found = (0..old.len()).find(|&j| old[j].expires_at > now_s && matches_binding(&mut uris, i, j));
            if let Some(j) = found {
                // RFC 3261 §10.3 step 7: same Call-ID and a CSeq that is not higher fails the
                // whole request; a different Call-ID (the UA restarted) always may update.
                let b = &old[j];
                if *b.call_id == *update.call_id && update.cseq <= b.cseq {
                    return Err(StoreError::OutOfOrder {
                        contact: c.uri.into(),
                        stored_cseq: b.cseq,
                        request_cseq: update.cseq,
                    });
                }
            }
            target[i] = found;
        }
        // RFC 3261 does not forbid listing one contact twice; the last occurrence wins, as if
        // the contacts were applied one after the other.
        let mut skip = vec![false; n];
        for i in 0..n {
            skip[i] = (i + 1..n).any(|k| match (target[i], target[k]) {
                (Some(x), Some(y)) => x == y,
                (None, None) => same_contact(&mut uris, i, k),
                _ => false,
            });
        }
        let live = old.iter().filter(|b| b.expires_at > now_s).count();
        let mut after = live;
        for i in (0..n).filter(|&i| !skip[i]) {
            match (target[i], contacts[i].expires) {
                (Some(_), 0) => after -= 1,
                (None, e) if e > 0 => after += 1,
                _ => {}
            }
        }
        // An AoR already over a lowered limit may still refresh and shrink.
        if after > max && after > live {
            return Err(StoreError::TooManyBindings { max, retry_after: retry_after(old, now_s) });
        }
        Ok(Plan { target, skip, after })
    }

    /// Carries the plan out on `bindings` (oldest update first): untouched bindings keep their
    /// order, updated and added ones move to the end in request order (they are now the most
    /// recent), removed and expired ones go.
    pub fn execute<S: Clone>(self, bindings: &mut Vec<Binding<S>>, now_s: u32, update: &Update<'_, S>) {
        // The common case, a UA refreshing its one contact: no allocation at all.
        if let ([Some(j)], [c]) = (&self.target[..], update.contacts) {
            if c.expires > 0 {
                refresh(&mut bindings[*j], c, update, now_s);
                bindings[*j..].rotate_left(1);
                bindings.retain(|b| b.expires_at > now_s);
                return;
            }
        }
        let n = update.contacts.len();
        let mut owner = vec![usize::MAX; bindings.len()];
        for i in (0..n).filter(|&i| !self.skip[i]) {
            if let Some(j) = self.target[i] {
                owner[j] = i;
            }
        }
        let mut updated: Vec<Option<Binding<S>>> = (0..n).map(|_| None).collect();
        // Exact size: most AoRs hold one binding, and a Vec's default growth would reserve 4.
        let mut new = Vec::with_capacity(self.after);
        for (j, b) in std::mem::take(bindings).into_iter().enumerate() {
            if b.expires_at <= now_s {
                continue;
            }
            match owner[j] {
                usize::MAX => new.push(b),
                i => updated[i] = Some(b),
            }
        }
        for (i, c) in update.contacts.iter().enumerate() {
            if self.skip[i] || c.expires == 0 {
                continue;
            }
            new.push(match updated[i].take() {
                Some(mut b) => {
                    refresh(&mut b, c, update, now_s);
                    b
                }
                None => Binding {
                    contact: c.uri.into(),
                    call_id: update.call_id.into(),
                    path: update.path.map(Into::into),
                    instance: c.instance.map(Into::into),
                    source: update.source.clone(),
                    expires_at: now_s.saturating_add(c.expires),
                    cseq: update.cseq,
                    reg_id: c.reg_id,
                    q: c.q,
                },
            });
        }
        *bindings = new;
    }
}

/// A contact matches a binding by `+sip.instance` and `reg-id` when it has both (RFC 5626 §6),
/// else by URI equivalence.
fn matches_binding<S>(uris: &mut UriMemo<'_, S>, i: usize, j: usize) -> bool {
    let (c, b) = (&uris.new[i], &uris.old[j]);
    match (c.instance, c.reg_id) {
        (Some(inst), Some(reg)) => b.instance.as_deref() == Some(inst) && b.reg_id == Some(reg),
        _ => uris.same(Side::New(i), Side::Old(j)),
    }
}

/// Whether two contacts of one request name the same binding.
fn same_contact<S>(uris: &mut UriMemo<'_, S>, i: usize, k: usize) -> bool {
    let (a, b) = (&uris.new[i], &uris.new[k]);
    match (a.instance, a.reg_id, b.instance, b.reg_id) {
        (Some(ia), Some(ra), Some(ib), Some(rb)) => ia == ib && ra == rb,
        _ => uris.same(Side::New(i), Side::New(k)),
    }
}

#[derive(Clone, Copy)]
enum Side {
    Old(usize),
    New(usize),
}

/// URI comparison per RFC 3261 §19.1.4 (RFC 3966 for tel). Identical text needs no parsing,
/// which is the common case of a refresh; otherwise each URI is parsed at most once.
struct UriMemo<'a, S> {
    old: &'a [Binding<S>],
    new: &'a [ContactUpdate<'a>],
    /// Filled on first use: old bindings first, then the request's contacts. `None` inside
    /// means "does not parse", compared byte for byte.
    parsed: Vec<Option<Option<Uri<'a>>>>,
}

impl<'a, S> UriMemo<'a, S> {
    fn new(old: &'a [Binding<S>], new: &'a [ContactUpdate<'a>]) -> Self {
        UriMemo { old, new, parsed: Vec::new() }
    }

    fn text(&self, side: Side) -> &'a str {
        match side {
            Side::Old(j) => &self.old[j].contact,
            Side::New(i) => self.new[i].uri,
        }
    }

    fn parsed(&mut self, side: Side) -> Option<Uri<'a>> {
        if self.parsed.is_empty() {
            self.parsed = vec![None; self.old.len() + self.new.len()];
        }
        let idx = match side {
            Side::Old(j) => j,
            Side::New(i) => self.old.len() + i,
        };
        let text = self.text(side);
        *self.parsed[idx].get_or_insert_with(|| Uri::parse(text.as_bytes()).ok())
    }

    fn same(&mut self, a: Side, b: Side) -> bool {
        if self.text(a) == self.text(b) {
            return true;
        }
        match (self.parsed(a), self.parsed(b)) {
            (Some(x), Some(y)) => x.equivalent(&y),
            _ => false,
        }
    }
}

/// Updates a binding in place, reallocating only the strings that changed.
fn refresh<S: Clone>(b: &mut Binding<S>, c: &ContactUpdate<'_>, update: &Update<'_, S>, now_s: u32) {
    if *b.contact != *c.uri {
        b.contact = c.uri.into();
    }
    if *b.call_id != *update.call_id {
        b.call_id = update.call_id.into();
    }
    if b.path.as_deref() != update.path {
        b.path = update.path.map(Into::into);
    }
    if b.instance.as_deref() != c.instance {
        b.instance = c.instance.map(Into::into);
    }
    b.source = update.source.clone();
    b.expires_at = now_s.saturating_add(c.expires);
    b.cseq = update.cseq;
    b.reg_id = c.reg_id;
    b.q = c.q;
}

/// Seconds until the earliest unexpired binding expires (at least 1).
fn retry_after<S>(old: &[Binding<S>], now_s: u32) -> u32 {
    old.iter().filter(|b| b.expires_at > now_s).map(|b| b.expires_at - now_s).min().unwrap_or(1).max(1)
}
