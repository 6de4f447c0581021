//! Scheduler settings (seed 003 ch. 6-7, brought to EEVDF): the default slice, migration cost,
//! tunable scaling, the CFS knobs of kernels before 6.6, and the per-task slice of a running
//! herald's threads.

use super::inputs::Inputs;
use super::machine::{task_slice_ns, Debugfs, SCHED_DEBUGFS};
use super::recommend;
use super::setting::{read_value, Setting, Target};
use std::path::{Path, PathBuf};

pub fn settings(i: &Inputs) -> Vec<Setting> {
    let m = &i.machine;
    let mut out = Vec::new();
    let slice = i.slice_ns();
    if m.eevdf() {
        out.push(
            Setting::new("sched_latency_ns, sched_min_granularity_ns, sched_wakeup_granularity_ns", Target::Advice, Ok(format!("gone (EEVDF, Linux {})", m.kernel)))
                .explain(
                    "Seed 003 tuned these three CFS knobs (ch. 6 §6.3.2: latency 800 µs, min_granularity = the service time, \
                     wakeup_granularity 0). Linux 6.6 replaced CFS with EEVDF (Documentation/scheduler/sched-eevdf.rst): there is \
                     no period any more; min_granularity's role, how long a task runs before another may take the CPU, is the \
                     slice (base_slice_ns, or a task's own through sched_setattr); and a waking task preempts when its virtual \
                     deadline, one slice away, is earliest, so a short slice does what wakeup_granularity 0 did.",
                ),
        );
    }
    let knob = |name: &str, old_proc: &str| -> (PathBuf, Result<String, String>) {
        let debugfs = Path::new(SCHED_DEBUGFS).join(name);
        let proc_path = PathBuf::from(format!("/proc/sys/kernel/{old_proc}"));
        if m.version < (5, 13) && proc_path.exists() {
            let v = read_value(&proc_path);
            return (proc_path, v);
        }
        let v = match &m.debugfs {
            Debugfs::Readable => read_value(&debugfs),
            other => Err(other.explain()),
        };
        (debugfs, v)
    };
    let (name, why_slice) = if m.eevdf() {
        ("base_slice_ns", "the default slice of every fair task")
    } else {
        ("min_granularity_ns", "how long a task runs before it may be preempted")
    };
    let (path, current) = knob(name, &format!("sched_{name}"));
    out.push(Setting::new(format!("sched {name}"), Target::File(path), current).recommend(
        slice.to_string(),
        format!(
            "{why_slice}. Seed 003 ch. 6 §6.3.2 (finding 2) set it to the measured mean service time so that a thread \
             finishes its work before it can be preempted; a herald worker's unit of work is one batch: {}. Machine-wide: \
             prefer the per-task slice below, which touches only herald.",
            i.slice_arithmetic()
        ),
    ));
    if !m.eevdf() {
        let (path, current) = knob("latency_ns", "sched_latency_ns");
        out.push(Setting::new("sched latency_ns", Target::File(path), current).recommend(
            recommend::latency_ns(m.cores).to_string(),
            format!(
                "seed 003 ch. 7 §7.4.2: 800 µs × cores gave the lowest drop rate on 2-, 4- and 6-core servers: 800,000 × {} cores",
                m.cores
            ),
        ));
        let (path, current) = knob("wakeup_granularity_ns", "sched_wakeup_granularity_ns");
        out.push(Setting::new("sched wakeup_granularity_ns", Target::File(path), current).recommend(
            "0",
            "seed 003 ch. 6 §6.3.2 (finding 3): with the slice covering a message's service time, a waking thread should \
             preempt at once; 0 gave the best results for every thread count",
        ));
    }
    let (path, current) = knob("migration_cost_ns", "sched_migration_cost_ns");
    out.push(Setting::new("sched migration_cost_ns", Target::File(path), current).recommend(
        recommend::migration_cost_ns(m.packages).to_string(),
        format!(
            "{} processor package(s) here (/sys/devices/system/cpu/cpu*/topology/physical_package_id). Seed 003 ch. 7 §7.5.1: \
             0 where all cores share one processor (a migration costs little cache, and an idle core should pull a \
             backed-up worker at once), 500 µs across processors; the 5 ms of the generic 'server' advice kept threads on an \
             overloaded core and raised drops",
            m.packages
        ),
    ));
    let (path, current) = knob("tunable_scaling", "sched_tunable_scaling");
    out.push(Setting::new("sched tunable_scaling", Target::File(path), current).recommend(
        "0",
        "seed 003 ch. 7 §7.4.2: no common scaling factor fits, so set the values themselves and scale none (0); with 1 \
         (log, the default) the kernel multiplies the slice by 1 + log2(cores) when CPUs come and go",
    ));
    out.push(task_slice(i, slice));
    out
}

/// The slice of every thread of a running herald: the EEVDF way to do seed 003's tuning for
/// herald alone.
fn task_slice(i: &Inputs, slice: u64) -> Setting {
    let m = &i.machine;
    let name = "sched slice of herald's threads";
    if !m.custom_slices() {
        return Setting::new(name, Target::Advice, Ok(format!("not supported (Linux {} < 6.12)", m.kernel)))
            .explain("sched_setattr(2) takes a fair task's slice (sched_runtime) from Linux 6.12 on");
    }
    let default = m.base_slice_ns.map_or("the default slice".into(), |b| format!("{b} ns (the default slice)"));
    let why = format!(
        "{}. Linux 6.12+ lets a task ask for its own slice (sched_setattr(2) sched_runtime, SCHED_OTHER): herald's workers \
         get seed 003's tuning without changing any other task's, and with a slice shorter than the default {default} a \
         waking worker's deadline comes first, so it preempts the running task instead of waiting for its slice to end",
        i.slice_arithmetic()
    );
    let Some(pid) = i.pid else {
        return Setting::new(name, Target::Advice, Err("no --pid given".into()))
            .recommend(slice.to_string(), format!("{why}. Give --pid of a running herald to read and set it."));
    };
    let current = thread_slices(pid).and_then(|s| {
        let mut v: Vec<u64> = s.iter().map(|(_, ns)| *ns).collect();
        v.sort_unstable();
        v.dedup();
        if v.len() == 1 {
            Ok(v[0].to_string())
        } else {
            Err(format!("mixed: {}", v.iter().map(|n| n.to_string()).collect::<Vec<_>>().join(", ")))
        }
    });
    Setting::new(name, Target::TaskSlice { pid }, current).recommend(slice.to_string(), why)
}

/// (tid, se.slice) of every thread of `pid`.
pub fn thread_slices(pid: i32) -> Result<Vec<(i32, u64)>, String> {
    let dir = PathBuf::from(format!("/proc/{pid}/task"));
    let entries = std::fs::read_dir(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let mut out = Vec::new();
    for e in entries.flatten() {
        let Some(tid) = e.file_name().to_str().and_then(|t| t.parse::<i32>().ok()) else { continue };
        if let Some(ns) = task_slice_ns(&e.path().join("sched")) {
            out.push((tid, ns));
        }
    }
    out.sort_unstable();
    if out.is_empty() {
        return Err(format!("{}: no thread shows se.slice", dir.display()));
    }
    Ok(out)
}
