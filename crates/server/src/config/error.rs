//! A configuration error: the file, line and key it is about, and what is wrong.

use std::fmt;

/// A configuration error: where it is and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    /// The file as given (`<built-in>` for [`DEFAULT_CONFIG`]).
    pub file: String,
    /// 1-based line; 0 when the file could not be read at all.
    pub line: usize,
    /// Dotted key path, array elements as `listen[1]`; empty when the file could not be read.
    pub key: String,
    pub message: String,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.line == 0 {
            write!(f, "{}: {}", self.file, self.message)
        } else {
            write!(f, "{}:{}: key '{}': {}", self.file, self.line, self.key, self.message)
        }
    }
}

impl std::error::Error for ConfigError {}
