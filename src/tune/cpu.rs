//! Where receive work runs and how fast the cores clock: RPS masks, NIC interrupt affinity and
//! the CPU frequency governor.

use super::inputs::Inputs;
use super::recommend;
use super::setting::{read_value, Form, Setting, Target};
use std::path::PathBuf;

pub fn settings(i: &Inputs) -> Vec<Setting> {
    let m = &i.machine;
    let mut out = Vec::new();
    for nic in &m.nics {
        let queues = nic.rx_queues.len();
        for (q, path) in nic.rx_queues.iter().enumerate() {
            let current = read_value(path);
            let (value, why) = if queues < m.cores {
                (
                    recommend::all_cores_mask(m.cores),
                    format!(
                        "{} has {queues} receive queue(s) for {} cores: without RPS all its protocol work (IP, UDP, the \
                         socket queue) runs on the CPU that takes the interrupt, which herald's worker then competes with. \
                         Documentation/networking/scaling.rst: for fewer queues than CPUs, spread with RPS over the CPUs \
                         (all {} here: one processor)",
                        nic.name, m.cores, m.cores
                    ),
                )
            } else {
                (
                    "0".to_string(),
                    format!(
                        "{} has {queues} receive queues for {} cores: the hardware spreads flows (RSS) already, and RPS would \
                         only add an inter-processor interrupt per packet (scaling.rst)",
                        nic.name, m.cores
                    ),
                )
            };
            let name = format!("rps_cpus {} rx-{q}", nic.name);
            out.push(Setting::new(name, Target::File(path.clone()), current).form(Form::CpuMask).recommend(value, why));
        }
        let spread = nic.irqs.len() > 1;
        for (k, (irq, label)) in nic.irqs.iter().enumerate() {
            let path = PathBuf::from(format!("/proc/irq/{irq}/smp_affinity_list"));
            let current = read_value(&path);
            let setting = Setting::new(format!("irq {irq} ({label}) affinity"), Target::File(path), current.clone());
            out.push(if spread {
                setting.recommend(
                    (k % m.cores).to_string(),
                    format!(
                        "{} receive-queue interrupts: one per CPU in turn (queue {k} → CPU {}), so receive work is spread and each \
                         queue's packets stay on one CPU's cache (Documentation/core-api/irq/irq-affinity.rst, scaling.rst \
                         'RSS IRQ configuration')",
                        nic.irqs.len(),
                        k % m.cores
                    ),
                )
            } else {
                let keep = current.unwrap_or_default();
                setting.recommend(keep, "a single receive-queue interrupt: keep it where it is and spread the protocol work with RPS (above)")
            });
        }
    }
    let rho = recommend::utilisation(i.work.messages_per_s, i.work.service_us, i.work.workers);
    let stretch = recommend::schedutil_stretch(rho);
    if m.governors.is_empty() {
        out.push(
            Setting::new("cpufreq scaling_governor", Target::Advice, Err("no /sys/devices/system/cpu/cpu*/cpufreq: no frequency driver (a virtual machine, or a fixed clock)".into()))
                .explain("nothing to set: the clock is the hypervisor's or the firmware's"),
        );
    }
    for (cpu, path, _) in &m.governors {
        let current = read_value(path);
        let value = if stretch > 1.05 { "performance".to_string() } else { current.clone().unwrap_or_default() };
        out.push(Setting::new(format!("cpu{cpu} scaling_governor"), Target::File(path.clone()), current).recommend(
            value,
            format!(
                "at λ = {:.0} messages/s, S = {:.1} µs, {} workers, a worker core is busy ρ = λ·S/c = {rho:.2}; schedutil clocks \
                 such a core at about 1.25·ρ of its top speed (Documentation/scheduler/schedutil.rst), so every message \
                 takes {stretch:.2}× longer than at full clock. 'performance' when that exceeds 1.05 (seed 003 ch. 8 names \
                 the clock as the next factor of service time)",
                i.work.messages_per_s, i.work.service_us, i.work.workers
            ),
        ));
    }
    out
}
