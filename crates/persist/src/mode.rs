//! When changes reach the durable copy (Kamailio usrloc's `db_mode` 0, 2 and 1).

use std::fmt;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Mode {
    /// No copy: a restart forgets every registration.
    Memory,
    /// Changes are written every interval, off the REGISTER's path; a crash loses at most the
    /// changes of the last interval.
    WriteBack,
    /// A REGISTER is answered only once its change is committed (group commit: one transaction
    /// and one fsync for every change waiting); a crash loses nothing that was answered 200.
    WriteThrough,
}

impl Mode {
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Memory => "memory",
            Mode::WriteBack => "write-back",
            Mode::WriteThrough => "write-through",
        }
    }
}

impl fmt::Display for Mode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}
