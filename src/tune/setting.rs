//! One line of `herald tune`'s report: a setting, where it lives, what it is, what it should be
//! and why.

use serde_json::{json, Value};
use std::path::PathBuf;

/// Where a setting is read and written.
#[derive(Debug, Clone, PartialEq)]
pub enum Target {
    /// A file under /proc/sys, /sys or debugfs holding the value as text.
    File(PathBuf),
    /// The EEVDF slice of every thread of process `pid` (sched_setattr(2) `sched_runtime`).
    TaskSlice { pid: i32 },
    /// RLIMIT_NOFILE of process `pid` (prlimit(2)), as "SOFT HARD".
    Nofile { pid: i32 },
    /// Nothing `herald tune` writes: a fact about the machine, or advice for the configuration.
    Advice,
}

impl Target {
    pub fn describe(&self) -> String {
        match self {
            Target::File(p) => p.display().to_string(),
            Target::TaskSlice { pid } => format!("sched_setattr(2) on /proc/{pid}/task/*"),
            Target::Nofile { pid } => format!("prlimit(2) on pid {pid}"),
            Target::Advice => String::new(),
        }
    }
}

/// How two values of a setting compare: as words (sysctls with several numbers are written with
/// tabs and read back with any whitespace) or as CPU masks (`rps_cpus` reads "00000003" for "3").
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Form {
    Words,
    CpuMask,
}

impl Form {
    pub fn normal(self, v: &str) -> String {
        match self {
            Form::Words => v.split_whitespace().collect::<Vec<_>>().join(" "),
            Form::CpuMask => {
                let hex: String = v.trim().chars().filter(|c| *c != ',').collect();
                let t = hex.trim_start_matches('0');
                if t.is_empty() {
                    "0".into()
                } else {
                    t.to_ascii_lowercase()
                }
            }
        }
    }
}

#[derive(Debug, Clone)]
pub struct Setting {
    /// What it is called in the report: the sysctl name, or a short description.
    pub name: String,
    pub target: Target,
    pub form: Form,
    /// The value now, or why it could not be read.
    pub current: Result<String, String>,
    /// What it should be; `None` for facts and advice that have no value to set.
    pub recommended: Option<String>,
    /// The reasoning: the arithmetic from the machine and the workload, and the source.
    pub why: String,
}

impl Setting {
    pub fn new(name: impl Into<String>, target: Target, current: Result<String, String>) -> Setting {
        Setting { name: name.into(), target, form: Form::Words, current, recommended: None, why: String::new() }
    }

    pub fn recommend(mut self, value: impl Into<String>, why: impl Into<String>) -> Setting {
        self.recommended = Some(value.into());
        self.why = why.into();
        self
    }

    pub fn explain(mut self, why: impl Into<String>) -> Setting {
        self.why = why.into();
        self
    }

    pub fn form(mut self, form: Form) -> Setting {
        self.form = form;
        self
    }

    /// True when the recommended value differs from the current one (an unreadable setting
    /// counts as different: applying it is the only way to learn whether it can be set).
    pub fn differs(&self) -> bool {
        match (&self.current, &self.recommended) {
            (_, None) => false,
            (Err(_), Some(_)) => true,
            (Ok(c), Some(r)) => self.form.normal(c) != self.form.normal(r),
        }
    }

    pub fn writable(&self) -> bool {
        !matches!(self.target, Target::Advice)
    }

    pub fn to_json(&self) -> Value {
        json!({
            "name": self.name,
            "where": self.target.describe(),
            "current": self.current.as_ref().ok(),
            "unreadable": self.current.as_ref().err(),
            "recommended": self.recommended,
            "change": self.writable() && self.differs(),
            "why": self.why,
        })
    }
}

/// The value of one /proc or /sys file, trimmed; the error says why not.
pub fn read_value(path: &std::path::Path) -> Result<String, String> {
    match std::fs::read_to_string(path) {
        Ok(s) => Ok(s.trim().to_string()),
        Err(e) => Err(format!("{}: {e}", path.display())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_compare_as_the_kernel_reads_them_back() {
        assert_eq!(Form::Words.normal("575802\t767736 1151604\n"), "575802 767736 1151604");
        assert_eq!(Form::CpuMask.normal("00000003"), "3");
        assert_eq!(Form::CpuMask.normal("00000000,00000000"), "0");
        assert_eq!(Form::CpuMask.normal("1,00000000"), "100000000");
        let s = Setting::new("x", Target::Advice, Ok("1\t2".into())).recommend("1 2", "");
        assert!(!s.differs());
        let s = Setting::new("x", Target::Advice, Err("no".into())).recommend("1", "");
        assert!(s.differs() && !s.writable());
    }
}
