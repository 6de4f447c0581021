//! `--apply` and `--revert`: writes the recommended values, recording each old value in a state
//! file before moving on (so an interrupted apply can still be reverted), and puts them back.
//! A setting that cannot be written (not root, missing, read-only in a container, refused by the
//! kernel) is reported and skipped, never fatal.

use super::machine::{task_slice_ns, Machine};
use super::sched::thread_slices;
use super::setting::{read_value, Form, Setting, Target};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};

pub const DEFAULT_STATE: &str = "/var/lib/herald/tune-state.json";

/// One value changed, and how to put it back.
#[derive(Debug, Clone, PartialEq)]
enum Entry {
    File {
        name: String,
        path: PathBuf,
        old: String,
        mask: bool,
    },
    /// `default`: the thread had the default slice, so revert asks for the default (0) again
    /// rather than a custom slice that happens to equal it.
    TaskSlice {
        pid: i32,
        tid: i32,
        old: u64,
        default: bool,
    },
    Nofile {
        pid: i32,
        old: String,
    },
}

impl Entry {
    fn describe(&self) -> String {
        match self {
            Entry::File { name, .. } => name.clone(),
            Entry::TaskSlice { pid, tid, .. } => format!("slice of thread {tid} of {pid}"),
            Entry::Nofile { pid, .. } => format!("RLIMIT_NOFILE of {pid}"),
        }
    }

    fn to_json(&self) -> Value {
        match self {
            Entry::File { name, path, old, mask } => {
                json!({"kind": "file", "name": name, "path": path, "old": old, "mask": mask})
            }
            Entry::TaskSlice { pid, tid, old, default } => {
                json!({"kind": "task_slice", "pid": pid, "tid": tid, "old": old, "default": default})
            }
            Entry::Nofile { pid, old } => json!({"kind": "nofile", "pid": pid, "old": old}),
        }
    }

    fn from_json(v: &Value) -> Option<Entry> {
        let s = |k: &str| v.get(k).and_then(Value::as_str).map(str::to_string);
        let n = |k: &str| v.get(k).and_then(Value::as_i64);
        match v.get("kind")?.as_str()? {
            "file" => Some(Entry::File {
                name: s("name")?,
                path: PathBuf::from(s("path")?),
                old: s("old")?,
                mask: v.get("mask").and_then(Value::as_bool).unwrap_or(false),
            }),
            "task_slice" => Some(Entry::TaskSlice {
                pid: n("pid")? as i32,
                tid: n("tid")? as i32,
                old: v.get("old")?.as_u64()?,
                default: v.get("default")?.as_bool()?,
            }),
            "nofile" => Some(Entry::Nofile { pid: n("pid")? as i32, old: s("old")? }),
            _ => None,
        }
    }
}

fn save(state: &Path, entries: &[Entry]) -> Result<(), String> {
    if let Some(dir) = state.parent() {
        std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    }
    let doc = json!({"herald_tune_state": 1, "entries": entries.iter().map(Entry::to_json).collect::<Vec<_>>()});
    let tmp = state.with_extension("tmp");
    std::fs::write(&tmp, serde_json::to_string_pretty(&doc).unwrap_or_default())
        .map_err(|e| format!("{}: {e}", tmp.display()))?;
    std::fs::rename(&tmp, state).map_err(|e| format!("{}: {e}", state.display()))
}

/// What one apply or revert did: lines for the report, and how many settings failed.
pub struct Outcome {
    pub lines: Vec<String>,
    pub failed: usize,
    pub done: usize,
}

/// Writes every recommended value that differs from the current one. Refuses when `state`
/// exists: it holds the values from before an earlier apply, which a second apply would lose.
pub fn apply(settings: &[Setting], machine: &Machine, state: &Path) -> Result<Outcome, String> {
    if state.exists() {
        return Err(format!(
            "{} exists: the values from before an earlier --apply are kept there; run --revert first (or give another --state)",
            state.display()
        ));
    }
    let mut entries = Vec::new();
    let mut out = Outcome { lines: Vec::new(), failed: 0, done: 0 };
    save(state, &entries)?;
    for s in settings.iter().filter(|s| s.writable() && s.differs()) {
        let Some(new) = s.recommended.clone() else { continue };
        let result = match &s.target {
            Target::File(path) => apply_file(s, path, &new, &mut entries, state),
            Target::TaskSlice { pid } => apply_slices(*pid, &new, machine, &mut entries, state),
            Target::Nofile { pid } => apply_nofile(*pid, &new, &mut entries, state),
            Target::Advice => continue,
        };
        match result {
            Ok(note) => {
                out.done += 1;
                out.lines.push(format!(
                    "set     {}: {} -> {new}{note}",
                    s.name,
                    s.current.clone().unwrap_or_else(|_| "?".into())
                ));
            }
            Err(e) => {
                out.failed += 1;
                out.lines.push(format!("not set {}: {e}", s.name));
            }
        }
    }
    if entries.is_empty() {
        let _ = std::fs::remove_file(state);
    }
    Ok(out)
}

fn apply_file(s: &Setting, path: &Path, new: &str, entries: &mut Vec<Entry>, state: &Path) -> Result<String, String> {
    // Unreadable: say why in the setting's own words (e.g. how to mount debugfs).
    let old = read_value(path).map_err(|e| s.current.clone().err().unwrap_or(e))?;
    std::fs::write(path, format!("{new}\n")).map_err(|e| format!("{}: {e}", path.display()))?;
    entries.push(Entry::File { name: s.name.clone(), path: path.to_path_buf(), old, mask: s.form == Form::CpuMask });
    save(state, entries)?;
    match read_value(path) {
        Ok(back) if s.form.normal(&back) == s.form.normal(new) => Ok(String::new()),
        Ok(back) => Ok(format!(" (the kernel reads back {back})")),
        Err(e) => Ok(format!(" (cannot read it back: {e})")),
    }
}

fn apply_slices(
    pid: i32,
    new: &str,
    machine: &Machine,
    entries: &mut Vec<Entry>,
    state: &Path,
) -> Result<String, String> {
    let ns: u64 = new.parse().map_err(|_| format!("not a number: {new}"))?;
    let threads = thread_slices(pid)?;
    let (mut set, mut errors) = (0, Vec::new());
    for (tid, old) in threads {
        match herald_sys::set_task_slice_ns(tid, ns) {
            Ok(()) => {
                set += 1;
                entries.push(Entry::TaskSlice { pid, tid, old, default: machine.base_slice_ns == Some(old) });
                save(state, entries)?;
            }
            Err(e) => errors.push(format!("thread {tid}: {e}")),
        }
    }
    if set == 0 {
        return Err(errors.join("; "));
    }
    Ok(if errors.is_empty() {
        format!(" ({set} threads)")
    } else {
        format!(" ({set} threads; not: {})", errors.join("; "))
    })
}

fn parse_limit(v: &str) -> Option<(u64, u64)> {
    let p = |s: &str| if s == "unlimited" { Some(u64::MAX) } else { s.parse().ok() };
    let mut it = v.split_whitespace();
    Some((p(it.next()?)?, p(it.next()?)?))
}

fn apply_nofile(pid: i32, new: &str, entries: &mut Vec<Entry>, state: &Path) -> Result<String, String> {
    let (soft, hard) = parse_limit(new).ok_or(format!("not 'SOFT HARD': {new}"))?;
    let old = super::process::read_nofile(Some(pid))?;
    herald_sys::set_nofile_limit(pid, soft, hard).map_err(|e| match e.raw_os_error() {
        // prlimit(2): raising a hard limit needs CAP_SYS_RESOURCE, which root in a container may lack.
        Some(1) => format!("prlimit({pid}): {e} (raising the hard limit needs CAP_SYS_RESOURCE)"),
        _ => format!("prlimit({pid}): {e}"),
    })?;
    entries.push(Entry::Nofile { pid, old });
    save(state, entries)?;
    Ok(String::new())
}

/// Puts back every value the state file recorded, newest first; removes the file when all came
/// back exactly.
pub fn revert(state: &Path) -> Result<Outcome, String> {
    let text = std::fs::read_to_string(state)
        .map_err(|e| format!("{}: {e} (nothing applied, or reverted already)", state.display()))?;
    let doc: Value = serde_json::from_str(&text).map_err(|e| format!("{}: {e}", state.display()))?;
    let entries: Vec<Entry> = doc
        .get("entries")
        .and_then(Value::as_array)
        .ok_or(format!("{}: no entries", state.display()))?
        .iter()
        .map(|v| Entry::from_json(v).ok_or(format!("{}: unreadable entry {v}", state.display())))
        .collect::<Result<_, _>>()?;
    let mut out = Outcome { lines: Vec::new(), failed: 0, done: 0 };
    for e in entries.iter().rev() {
        // A thread or process that has exited took its setting with it: nothing to restore.
        let gone = match e {
            Entry::TaskSlice { pid, tid, .. } => !Path::new(&format!("/proc/{pid}/task/{tid}")).exists(),
            Entry::Nofile { pid, .. } => !Path::new(&format!("/proc/{pid}")).exists(),
            Entry::File { .. } => false,
        };
        if gone {
            out.lines.push(format!("gone     {}: exited since --apply, nothing to restore", e.describe()));
            continue;
        }
        let (what, result) = match e {
            Entry::File { name, path, old, mask } => (name.clone(), revert_file(path, old, *mask)),
            Entry::TaskSlice { pid, tid, old, default } => {
                let ask = if *default { 0 } else { *old };
                let r = herald_sys::set_task_slice_ns(*tid, ask).map_err(|e| e.to_string());
                (e.describe(), r.map(|_| old.to_string()).and_then(|v| check_slice(*pid, *tid, *old).map(|_| v)))
            }
            Entry::Nofile { pid, old } => {
                let r = parse_limit(old)
                    .ok_or(format!("not 'SOFT HARD': {old}"))
                    .and_then(|(s, h)| herald_sys::set_nofile_limit(*pid, s, h).map_err(|e| e.to_string()));
                (e.describe(), r.map(|_| old.clone()))
            }
        };
        match result {
            Ok(v) => {
                out.done += 1;
                out.lines.push(format!("restored {what}: {v}"));
            }
            Err(err) => {
                out.failed += 1;
                out.lines.push(format!("NOT restored {what}: {err}"));
            }
        }
    }
    if out.failed == 0 {
        std::fs::remove_file(state).map_err(|e| format!("{}: {e}", state.display()))?;
    }
    Ok(out)
}

/// The slice reads back as it was before --apply.
fn check_slice(pid: i32, tid: i32, old: u64) -> Result<(), String> {
    let now = task_slice_ns(Path::new(&format!("/proc/{pid}/task/{tid}/sched")));
    if now == Some(old) {
        Ok(())
    } else {
        Err(format!("asked for {old}, reads back {now:?}"))
    }
}

fn revert_file(path: &Path, old: &str, mask: bool) -> Result<String, String> {
    std::fs::write(path, format!("{old}\n")).map_err(|e| format!("{}: {e}", path.display()))?;
    let form = if mask { Form::CpuMask } else { Form::Words };
    let back = read_value(path)?;
    if form.normal(&back) != form.normal(old) {
        return Err(format!("wrote {old}, reads back {back}"));
    }
    Ok(old.to_string())
}
