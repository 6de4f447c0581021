//! The report: a header with the machine and the workload, then each setting with its current
//! value, the recommended one and why; or all of it as JSON.

use super::inputs::Inputs;
use super::setting::Setting;
use serde_json::{json, Value};

pub fn text(i: &Inputs, settings: &[Setting]) -> String {
    let m = &i.machine;
    let w = &i.work;
    let mut out = format!(
        "herald tune: {} cores, {} processor(s), Linux {} ({} scheduler), {}\n",
        m.cores,
        m.packages,
        m.kernel,
        if m.eevdf() { "EEVDF" } else { "CFS" },
        m.debugfs.explain()
    );
    out += &format!(
        "workload: S = {:.2} µs per message ({}); λ = {:.0} messages/s ({}); {} workers, {} UDP sockets; target wait {} ms\n",
        w.service_us, w.source, w.messages_per_s, w.rate_source, w.workers, w.udp_sockets, w.target_wait_ms
    );
    for s in settings {
        out += &format!("\n{}", s.name);
        let place = s.target.describe();
        if !place.is_empty() {
            out += &format!("  [{place}]");
        }
        out += "\n";
        let current = match &s.current {
            Ok(v) => v.split_whitespace().collect::<Vec<_>>().join(" "),
            Err(e) => format!("unreadable: {e}"),
        };
        out += &format!("    current:     {current}\n");
        if let Some(r) = &s.recommended {
            let mark = match (s.differs(), s.writable()) {
                (true, true) => "   <- change (--apply)",
                (true, false) => "   <- change (by hand)",
                _ => "   (as is)",
            };
            out += &format!("    recommended: {r}{mark}\n");
        }
        if !s.why.is_empty() {
            out += &wrap(&format!("why: {}", s.why), 100, "    ");
        }
    }
    out
}

fn wrap(text: &str, width: usize, indent: &str) -> String {
    let mut out = String::new();
    let mut line = String::new();
    for word in text.split_whitespace() {
        if !line.is_empty() && indent.len() + line.chars().count() + 1 + word.chars().count() > width {
            out += &format!("{indent}{line}\n");
            line.clear();
        }
        if !line.is_empty() {
            line.push(' ');
        }
        line += word;
    }
    if !line.is_empty() {
        out += &format!("{indent}{line}\n");
    }
    out
}

pub fn json(i: &Inputs, settings: &[Setting]) -> Value {
    let m = &i.machine;
    let w = &i.work;
    json!({
        "machine": {
            "cores": m.cores,
            "packages": m.packages,
            "kernel": m.kernel,
            "scheduler": if m.eevdf() { "EEVDF" } else { "CFS" },
            "debugfs": m.debugfs.explain(),
            "base_slice_ns": m.base_slice_ns,
        },
        "workload": {
            "service_us": w.service_us,
            "service_source": w.source,
            "messages_per_s": w.messages_per_s,
            "rate_source": w.rate_source,
            "workers": w.workers,
            "udp_sockets": w.udp_sockets,
            "tcp_listeners": w.tcp_listeners,
            "message_bytes": w.message_bytes,
            "truesize": w.truesize,
            "target_wait_ms": w.target_wait_ms,
            "slice_ns": i.slice_ns(),
        },
        "settings": settings.iter().map(Setting::to_json).collect::<Vec<_>>(),
    })
}
