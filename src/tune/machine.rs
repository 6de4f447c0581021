//! What `herald tune` reads about the machine: cores and processors, the kernel and its
//! scheduler, whether the scheduler's debugfs knobs can be reached, the network devices' receive
//! queues and interrupts, and the CPU frequency governors. Everything from /proc and /sys.

use std::path::{Path, PathBuf};

pub const DEBUGFS: &str = "/sys/kernel/debug";
pub const SCHED_DEBUGFS: &str = "/sys/kernel/debug/sched";

pub struct Machine {
    /// Online CPUs (/sys/devices/system/cpu/online).
    pub cores: usize,
    /// Distinct `physical_package_id`s among them: processors (sockets).
    pub packages: usize,
    /// /proc/sys/kernel/osrelease, and its major.minor.
    pub kernel: String,
    pub version: (u32, u32),
    /// Whether the scheduler's knobs under debugfs can be read, and if not what to do.
    pub debugfs: Debugfs,
    /// The default slice of a fair task: base_slice_ns from debugfs, else the slice of this
    /// process's own thread (/proc/thread-self/sched `se.slice`), which is the default unless
    /// someone gave this shell a custom one.
    pub base_slice_ns: Option<u64>,
    pub page: u64,
    pub nics: Vec<Nic>,
    /// (cpu, governor) for every CPU with cpufreq.
    pub governors: Vec<(usize, PathBuf, String)>,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Debugfs {
    Readable,
    NotMounted,
    /// Mounted, but reading the knobs fails: kernel lockdown (integrity or confidentiality)
    /// refuses debugfs files with write permission, see kernel_lockdown(7).
    Refused(String),
}

impl Debugfs {
    pub fn explain(&self) -> String {
        match self {
            Debugfs::Readable => "debugfs mounted, scheduler knobs readable".into(),
            Debugfs::NotMounted => format!(
                "debugfs is not mounted, so the scheduler's knobs under {SCHED_DEBUGFS} cannot be read or set; as root: \
                 `mount -t debugfs none {DEBUGFS}` (then run herald tune again)"
            ),
            Debugfs::Refused(e) => format!(
                "debugfs is mounted but the kernel refuses its scheduler knobs ({e}); a kernel locked down \
                 (kernel_lockdown(7), /sys/kernel/security/lockdown) never allows them: use the per-task slice below instead"
            ),
        }
    }
}

/// A network device with a driver (not lo, veth, ifb): its receive queues and interrupts.
pub struct Nic {
    pub name: String,
    /// /sys/class/net/NAME/queues/rx-N/rps_cpus, sorted by N.
    pub rx_queues: Vec<PathBuf>,
    /// (irq, its name in /proc/interrupts) of the device's queues.
    pub irqs: Vec<(u32, String)>,
}

impl Machine {
    pub fn read() -> Machine {
        let cores = online_cpus();
        let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default().trim().to_string();
        let debugfs = debugfs_state();
        let base_slice_ns = match debugfs {
            Debugfs::Readable => read_u64(&Path::new(SCHED_DEBUGFS).join("base_slice_ns")),
            _ => None,
        }
        .or_else(|| task_slice_ns(Path::new("/proc/thread-self/sched")));
        Machine {
            cores: cores.len().max(1),
            packages: packages(&cores),
            version: kernel_version(&kernel),
            kernel,
            debugfs,
            base_slice_ns,
            page: herald_sys::page_size().unwrap_or(4096) as u64,
            nics: nics(),
            governors: governors(&cores),
        }
    }

    /// EEVDF replaced CFS's fair class in Linux 6.6: `sched_latency_ns`, `sched_min_granularity_ns`
    /// and `sched_wakeup_granularity_ns` are gone; a task's slice is `base_slice_ns` unless it
    /// asks for its own (6.12+).
    pub fn eevdf(&self) -> bool {
        self.version >= (6, 6)
    }

    /// Per-task slices through sched_setattr(2) `sched_runtime`: Linux 6.12+.
    pub fn custom_slices(&self) -> bool {
        self.version >= (6, 12)
    }
}

pub fn read_u64(path: &Path) -> Option<u64> {
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}

/// `se.slice` of /proc/PID/task/TID/sched (EEVDF kernels print it), in ns.
pub fn task_slice_ns(sched: &Path) -> Option<u64> {
    let text = std::fs::read_to_string(sched).ok()?;
    text.lines()
        .find(|l| l.split(':').next().map(str::trim) == Some("se.slice"))?
        .split(':')
        .nth(1)?
        .trim()
        .parse()
        .ok()
}

pub fn kernel_version(release: &str) -> (u32, u32) {
    let mut parts = release.split(|c: char| !c.is_ascii_digit());
    let major = parts.next().and_then(|p| p.parse().ok()).unwrap_or(0);
    let minor = parts.next().and_then(|p| p.parse().ok()).unwrap_or(0);
    (major, minor)
}

/// Parses a CPU list ("0-3,8,10-11") as /sys writes it.
pub fn cpu_list(text: &str) -> Vec<usize> {
    let mut out = Vec::new();
    for part in text.trim().split(',').filter(|p| !p.is_empty()) {
        match part.split_once('-') {
            Some((a, b)) => {
                if let (Ok(a), Ok(b)) = (a.parse::<usize>(), b.parse::<usize>()) {
                    out.extend(a..=b);
                }
            }
            None => out.extend(part.parse::<usize>().ok()),
        }
    }
    out
}

fn online_cpus() -> Vec<usize> {
    let list = std::fs::read_to_string("/sys/devices/system/cpu/online").map(|t| cpu_list(&t)).unwrap_or_default();
    if list.is_empty() {
        (0..std::thread::available_parallelism().map_or(1, |n| n.get())).collect()
    } else {
        list
    }
}

fn packages(cores: &[usize]) -> usize {
    let mut ids: Vec<u64> = cores
        .iter()
        .filter_map(|c| read_u64(Path::new(&format!("/sys/devices/system/cpu/cpu{c}/topology/physical_package_id"))))
        .collect();
    ids.sort_unstable();
    ids.dedup();
    ids.len().max(1)
}

fn debugfs_state() -> Debugfs {
    let mounted = std::fs::read_to_string("/proc/self/mounts")
        .unwrap_or_default()
        .lines()
        .any(|l| l.split_whitespace().nth(1) == Some(DEBUGFS) && l.split_whitespace().nth(2) == Some("debugfs"));
    if !mounted {
        return Debugfs::NotMounted;
    }
    match std::fs::read_to_string(Path::new(SCHED_DEBUGFS).join("base_slice_ns")) {
        Ok(_) => Debugfs::Readable,
        Err(e) => {
            let lockdown = std::fs::read_to_string("/sys/kernel/security/lockdown").ok();
            let mode = lockdown.map(|l| format!(", lockdown: {}", l.trim())).unwrap_or_default();
            Debugfs::Refused(format!("{e}{mode}"))
        }
    }
}

fn nics() -> Vec<Nic> {
    let interrupts = std::fs::read_to_string("/proc/interrupts").unwrap_or_default();
    let mut out = Vec::new();
    let Ok(dir) = std::fs::read_dir("/sys/class/net") else { return out };
    let mut names: Vec<String> = dir.filter_map(|e| e.ok()?.file_name().into_string().ok()).collect();
    names.sort();
    for name in names {
        let base = Path::new("/sys/class/net").join(&name);
        // Only devices with a driver behind them: lo, veth, bridges, ifb have no `device`.
        let Ok(device) = std::fs::read_link(base.join("device")) else { continue };
        let device = device.file_name().and_then(|d| d.to_str()).unwrap_or("").to_string();
        let mut rx: Vec<(u32, PathBuf)> = std::fs::read_dir(base.join("queues"))
            .map(|d| {
                d.filter_map(|e| {
                    let n = e.ok()?.file_name().into_string().ok()?;
                    let i = n.strip_prefix("rx-")?.parse().ok()?;
                    Some((i, base.join("queues").join(&n).join("rps_cpus")))
                })
                .collect()
            })
            .unwrap_or_default();
        rx.sort();
        let irqs = nic_irqs(&interrupts, &name, &device);
        out.push(Nic { name, rx_queues: rx.into_iter().map(|(_, p)| p).collect(), irqs });
    }
    out
}

/// The device's receive-queue interrupts in /proc/interrupts: lines named after the interface
/// ("eth0-rx-0", "eth0-TxRx-1", "eth0") or, for virtio, after its device ("virtio2-input.0");
/// transmit-only ones ("-tx-", virtio "output") are left out.
pub fn nic_irqs(interrupts: &str, name: &str, device: &str) -> Vec<(u32, String)> {
    let mut out = Vec::new();
    for line in interrupts.lines() {
        let Some((irq, _)) = line.split_once(':') else { continue };
        let Ok(irq) = irq.trim().parse::<u32>() else { continue };
        let Some(label) = line.split_whitespace().last() else { continue };
        let lower = label.to_ascii_lowercase();
        let transmit_only = lower.contains("output") || (lower.contains("tx") && !lower.contains("rx"));
        let by_name = label == name || label.starts_with(&format!("{name}-"));
        let by_device = !device.is_empty() && label.starts_with(&format!("{device}-")) && lower.contains("input");
        if (by_name || by_device) && !transmit_only {
            out.push((irq, label.to_string()));
        }
    }
    out
}

fn governors(cores: &[usize]) -> Vec<(usize, PathBuf, String)> {
    cores
        .iter()
        .filter_map(|c| {
            let p = PathBuf::from(format!("/sys/devices/system/cpu/cpu{c}/cpufreq/scaling_governor"));
            let g = std::fs::read_to_string(&p).ok()?.trim().to_string();
            Some((*c, p, g))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_what_the_kernel_writes() {
        assert_eq!(cpu_list("0-3,8,10-11\n"), vec![0, 1, 2, 3, 8, 10, 11]);
        assert_eq!(cpu_list("0\n"), vec![0]);
        assert_eq!(kernel_version("6.18.44-fc-v657"), (6, 18));
        assert_eq!(kernel_version("5.15.0-91-generic"), (5, 15));
        let irqs = " 36:  0  4080117  PCI-MSIX-0000:00:02.0  1-edge  virtio1-req.0\n 40:  5  6  PCI-MSIX  2-edge  virtio2-input.0\n 41: 1 PCI-MSIX 3-edge virtio2-config\n 50: 1 2 IR-PCI-MSI 1-edge eth1-TxRx-0\n 51: 1 2 IR-PCI-MSI 1-edge eth1-tx-1\n 52: 0 0 PCI-MSIX 4-edge virtio2-output.0\n";
        assert_eq!(nic_irqs(irqs, "eth0", "virtio2"), vec![(40, "virtio2-input.0".to_string())]);
        assert_eq!(nic_irqs(irqs, "eth1", "0000:3b:00.0"), vec![(50, "eth1-TxRx-0".to_string())]);
    }
}
