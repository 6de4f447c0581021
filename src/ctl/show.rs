//! Human-readable output of `herald ctl`: one function per result, plain columns.

use serde_json::Value;
use std::fmt::Write;

fn s(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => "-".into(),
        other => other.to_string(),
    }
}

fn binding_line(out: &mut String, b: &Value) {
    let _ = write!(
        out,
        "{}  {}  expires {}s  from {}",
        s(&b["aor"]),
        s(&b["contact"]),
        s(&b["expires_in"]),
        s(&b["source"])
    );
    if !b["q"].is_null() {
        let _ = write!(out, "  q={}", s(&b["q"]));
    }
    if !b["instance"].is_null() {
        let _ = write!(out, "  instance={}", s(&b["instance"]));
    }
    out.push('\n');
}

/// A page of `registrations.list`.
pub fn bindings(v: &Value) -> String {
    let mut out = String::new();
    for b in v["registrations"].as_array().into_iter().flatten() {
        binding_line(&mut out, b);
    }
    out
}

pub fn aor(v: &Value) -> String {
    let mut out = String::new();
    for b in v["bindings"].as_array().into_iter().flatten() {
        binding_line(&mut out, b);
    }
    out
}

pub fn removed(v: &Value) -> String {
    format!("{}: {} binding(s) removed\n", s(&v["aor"]), s(&v["removed"]))
}

pub fn stats(v: &Value) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "workers {}  shards {}  transactions {}",
        s(&v["workers"]),
        s(&v["shards"]),
        s(&v["transactions"])
    );
    let _ = writeln!(out, "dialogs: not kept (transaction-stateful proxy)");
    let _ = writeln!(out, "overload: {} worker(s) shedding new requests", s(&v["overload"]["shedding_workers"]));
    let _ = writeln!(out, "tcp connections open {}", s(&v["tcp_open"]));
    if let Some(l) = v["location"].as_object() {
        let _ = writeln!(out, "location: {} binding(s) of {} AoR(s)", s(&l["bindings"]), s(&l["aors"]));
    }
    if v["messages"]["measured"] == Value::Bool(true) {
        let _ = writeln!(out, "messages received / sent, by type:");
        if let Some(received) = v["messages"]["received"].as_object() {
            for (t, n) in received {
                let _ = writeln!(out, "  {t:<9} {:>12} {:>12}", s(n), s(&v["messages"]["sent"][t]));
            }
        }
        let _ = writeln!(out, "socket drops {}", s(&v["messages"]["socket_drops"]));
    } else {
        let _ = writeln!(out, "messages by type: not measured ([metrics] listen is not set)");
    }
    if let Some(f) = v["flood"].as_object() {
        let _ = writeln!(
            out,
            "flood: {} banned source(s), {} locked user(s), {} dropped, {} rate-limited",
            s(&f["banned_sources"]),
            s(&f["locked_users"]),
            s(&f["dropped"]),
            s(&f["rate_limited"])
        );
    }
    if let Some(r) = v["registrar"].as_object() {
        let _ = writeln!(out, "registrar: {} accepted", s(&r["accepted"]));
    }
    if let Some(a) = v["auth"].as_object() {
        let _ = writeln!(out, "auth: {} challenges, {} accepted", s(&a["challenges"]), s(&a["accepted"]));
    }
    let _ = writeln!(out, "counters:");
    for (k, n) in v["counters"].as_object().into_iter().flatten() {
        if n.as_u64() != Some(0) {
            let _ = writeln!(out, "  {k:<32} {}", s(n));
        }
    }
    out
}

pub fn holds(v: &Value) -> String {
    let mut out = String::new();
    for h in v["holds"].as_array().into_iter().flatten() {
        let _ =
            write!(out, "{}  {}  {} ({} evidence)", s(&h["kind"]), s(&h["source"]), s(&h["reason"]), s(&h["evidence"]));
        if !h["user"].is_null() {
            let _ = write!(out, "  user {}", s(&h["user"]));
        }
        let _ = writeln!(out, "  count {}  {}s left", s(&h["count"]), s(&h["remaining_s"]));
    }
    let _ = writeln!(out, "{} in force", s(&v["total"]));
    out
}

pub fn unbanned(v: &Value) -> String {
    format!("{}: {} ban(s)/lock(s) lifted\n", s(&v["source"]), s(&v["lifted"]))
}

pub fn gateways(v: &Value) -> String {
    let mut out = String::new();
    for set in v["sets"].as_array().into_iter().flatten() {
        let _ = writeln!(out, "{} ({})", s(&set["name"]), s(&set["algorithm"]));
        for d in set["destinations"].as_array().into_iter().flatten() {
            let forced = if d["forced"].is_null() { String::new() } else { format!(" (forced {})", s(&d["forced"])) };
            let _ = writeln!(
                out,
                "  {}  {}{forced}  probes {}/{} ok  calls {} ({} failed, {} active)",
                s(&d["uri"]),
                s(&d["effective"]),
                s(&d["probes_ok"]),
                d["probes_ok"].as_u64().unwrap_or(0) + d["probes_failed"].as_u64().unwrap_or(0),
                s(&d["calls"]),
                s(&d["call_failures"]),
                s(&d["active_calls"])
            );
        }
    }
    out
}

pub fn gateway_state(v: &Value) -> String {
    format!("{} {}: {} (forced {})\n", s(&v["set"]), s(&v["destination"]), s(&v["effective"]), s(&v["forced"]))
}

pub fn reloaded(v: &Value) -> String {
    match v["changed"].as_array() {
        Some(c) if !c.is_empty() => {
            format!("reloaded: {} changed\n", c.iter().map(s).collect::<Vec<_>>().join(", "))
        }
        _ => "reloaded: nothing changed\n".into(),
    }
}

pub fn users(v: &Value) -> String {
    let mut out = String::new();
    for r in v["realms"].as_array().into_iter().flatten() {
        let _ = writeln!(out, "realm {}", s(&r["realm"]));
        for u in r["users"].as_array().into_iter().flatten() {
            let _ = writeln!(out, "  {}", s(u));
        }
    }
    out
}

pub fn user_added(v: &Value) -> String {
    let what = if v["replaced"] == Value::Bool(true) { "password changed" } else { "added" };
    format!("{}: {what} (realm {})\n", s(&v["user"]), s(&v["realm"]))
}

pub fn user_removed(v: &Value) -> String {
    format!("{}: removed (realm {})\n", s(&v["user"]), s(&v["realm"]))
}
