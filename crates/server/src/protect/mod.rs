//! Protection of the server against its own clients: flood and brute-force bans per source, and
//! overload control that sheds new work first.

mod flood;
mod overload;
mod window;

pub use flood::{FloodCounters, FloodGuard, FloodSettings, Prefix, Verdict};
pub use overload::{OverloadDetector, OverloadSettings};
