/// A byte range of a message's buffer. `u32` halves the index size; messages are bounded by
/// [`crate::Limits::max_message_size`], far below 4 GiB.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
pub struct Span {
    pub start: u32,
    pub end: u32,
}

impl Span {
    pub fn new(start: usize, end: usize) -> Span {
        debug_assert!(start <= end && end <= u32::MAX as usize);
        Span { start: start as u32, end: end as u32 }
    }

    pub fn range(self) -> std::ops::Range<usize> {
        self.start as usize..self.end as usize
    }

    pub fn len(self) -> usize {
        (self.end - self.start) as usize
    }

    pub fn is_empty(self) -> bool {
        self.start == self.end
    }

    /// A sub-span given by offsets relative to this span's start.
    pub fn sub(self, from: usize, to: usize) -> Span {
        Span::new(self.start as usize + from, self.start as usize + to)
    }
}
