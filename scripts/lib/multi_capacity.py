#!/usr/bin/env python3
"""Capacity search with a load generator spread over several cores (scripts/bench-scaling.sh).

One `herald bench` process is one thread, and a proxy with many cores outruns it. This runs
GENERATORS `herald bench calls` processes side by side, each pinned to its own CPU (taskset) and
each with its own users (a credentials file per process, so that no two register the same
address-of-record), each offering RATE/GENERATORS calls/s; a step's result is their sum. The users' domain is the
proxy's HOST:PORT (Kamailio's `uri == myself` needs the port; herald serves its address).

The search is `herald bench capacity`'s (crates/bench/src/capacity): step the offered rate up by
FACTOR until a step fails, then bisect to PRECISION; a step passes when no generator was cut
short, something was attempted, failed/attempted <= MAX_FAILURE (0.01%, seeds 000/002), and the
achieved rate is at least (1 - 0.05 - 3/sqrt(rate * seconds)) of the offered one. A confirm pass
then runs the full CONFIRM_S window at the search's result and steps down by CONFIRM_FACTOR
(10%) until one passes (at most CONFIRM_STEPS): that rate is the capacity. Short steps
overestimate herald: a transaction lingers 32 s after its call (RFC 3261 Timer J, RFC 6026), so
only a window longer than that meets the steady state's table (on one core here: 14,752 calls/s
passed 8 s steps, and 60 s windows failed down to 12,700).

One condition more than `herald bench capacity`: the SRD's 99th percentile stays under
MAX_SRD_P99_MS (default 500 ms, RFC 3261's T1). herald bench fails a call only when its
transaction times out (32 s) and waits that long for the calls in flight after the window, so a
server past its capacity that queues instead of refusing - Kamailio with this configuration,
herald without `[overload]` - finishes its backlog late and passes a short window: seen here,
herald "passing" 20,000 calls/s on one core in 5 s steps with an SRD p99 of 5 s. A caller whose
INVITE is not answered within T1 retransmits it, so past T1 the server is not keeping up (SPEC
SIP, seed 002, fails such runs on retransmissions too).

Prints one JSON object: {"search": rate, "capacity": rate, "cut_short": bool, "steps": [...]}; cut_short
is true when --deadline-s stopped the search before it reached PRECISION.
"""

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time

RATE_TOLERANCE = 0.05


def step(args, rate, seconds, tmp, index):
    """Offers `rate` calls/s for `seconds` from every generator at once; returns the summed step."""
    procs = []
    share = rate / args.generators
    for g in range(args.generators):
        out = os.path.join(tmp, f"step{index}.gen{g}.json")
        pin = ["taskset", "-c", args.cpus[g % len(args.cpus)]] if args.cpus else []
        cmd = pin + [args.herald, "bench", "calls", "--proxy", args.proxy, "--domain", args.proxy,
                     "--rate", f"{share:.3f}", "--duration", str(seconds),
                     "--credentials", os.path.join(tmp, f"users{g}"), "--quiet", "--json", out] + args.gen_args
        if g == 0:  # one generator reads the server's CPU: the step's sum counts it once
            cmd += [a for p in args.server_pid for a in ("--server-pid", p)]
        log = open(os.path.join(tmp, f"step{index}.gen{g}.log"), "w")
        procs.append((subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT), out, log))
    s = {"offered": 0.0, "achieved": 0.0, "attempted": 0, "failed": 0, "retransmissions": 0, "srd_p99_ms": 0.0,
         "server_cpu_s": 0.0, "interrupted": False, "generators": []}
    for p, out, log in procs:
        p.wait()
        log.close()
        try:
            with open(out) as f:
                r = json.load(f)
        except (OSError, ValueError):
            s["interrupted"] = True
            continue
        s["offered"] += r["offered_rate"]
        s["achieved"] += r["achieved_rate"]
        s["attempted"] += r["attempted"]
        s["failed"] += r["failed"]
        s["retransmissions"] += r["retransmissions"]
        # The worst generator's: the p99 of the union is at most that.
        s["srd_p99_ms"] = max(s["srd_p99_ms"], r["srd"]["p99_us"] / 1000)
        s["server_cpu_s"] += sum(x["cpu_s"] for x in r["servers"])
        s["interrupted"] |= bool(r.get("interrupted"))
        s["generators"].append({"cpu_s": r["generator"]["cpu_s"], "attempted": r["attempted"]})
    tolerance = RATE_TOLERANCE + 3 / math.sqrt(max(rate * seconds, 1))
    s["rate"] = rate
    s["seconds"] = seconds
    s["passed"] = (not s["interrupted"] and s["attempted"] > 0
                   and s["failed"] <= args.max_failure * s["attempted"]
                   and s["achieved"] >= (1 - tolerance) * rate
                   and s["srd_p99_ms"] <= args.max_srd_p99_ms)
    # Who was busy: the server's CPU in cores (from its processes' utime+stime) and the busiest
    # generator's share of its one core - a generator near 100% means the load, not the server,
    # set the ceiling.
    busy = ""
    if s["generators"]:
        busy = f" generators busiest {100 * max(g['cpu_s'] for g in s['generators']) / seconds:.0f}%"
    if args.server_pid:
        busy = f" server CPU {s['server_cpu_s'] / seconds:.2f} cores" + busy
    print(f"  {rate:9.0f}/s x {seconds} s: attempted {s['attempted']} failed {s['failed']} "
          f"achieved {s['achieved']:.0f}/s SRD p99 {s['srd_p99_ms']:.1f} ms retransmissions {s['retransmissions']}"
          f"{busy} -> {'pass' if s['passed'] else 'fail'}", file=sys.stderr)
    time.sleep(args.pause)
    return s


def search(args, tmp, steps):
    lo, hi, rate = 0.0, None, args.start
    started = time.monotonic()
    while len(steps) < args.max_steps:
        if hi is not None and lo > 0 and hi - lo <= args.precision * lo:
            break
        if args.deadline_s and time.monotonic() - started >= args.deadline_s:
            # A lent machine's minutes are counted: the best rate passed so far stands, and the
            # report says the search was cut short.
            print(f"  deadline of {args.deadline_s:.0f} s reached: the search stops at {lo:.0f}/s", file=sys.stderr)
            args.cut_short = True
            break
        s = step(args, rate, args.search_s, tmp, len(steps))
        steps.append(s)
        if s["passed"]:
            lo = rate
            rate = rate * args.factor if hi is None else (lo + hi) / 2
        else:
            hi = rate
            rate = rate / args.factor if lo == 0 else (lo + hi) / 2
    return lo


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--herald", required=True)
    ap.add_argument("--proxy", required=True)
    ap.add_argument("--generators", type=int, default=1)
    ap.add_argument("--cpus", default="", help="comma-separated CPUs, one per generator (round-robin; none: unpinned)")
    ap.add_argument("--users", type=int, default=100, help="users per generator")
    ap.add_argument("--start", type=float, default=1000)
    ap.add_argument("--factor", type=float, default=1.5)
    ap.add_argument("--precision", type=float, default=0.05)
    ap.add_argument("--search-s", type=int, default=10)
    ap.add_argument("--confirm-s", type=int, default=60)
    ap.add_argument("--confirm-steps", type=int, default=6)
    ap.add_argument("--confirm-factor", type=float, default=1.1)
    ap.add_argument("--max-steps", type=int, default=16)
    ap.add_argument("--max-failure", type=float, default=0.0001)
    ap.add_argument("--max-srd-p99-ms", type=float, default=500)
    ap.add_argument("--pause", type=float, default=3)
    ap.add_argument("--server-pid", action="append", default=[],
                    help="passed to the first herald bench (the server's CPU over each step)")
    ap.add_argument("--gen-args", default="", help="more options for every herald bench, e.g. --single-socket")
    ap.add_argument("--deadline-s", type=float, default=0,
                    help="no search step starts after this many seconds (0: none); the result says cut_short")
    args = ap.parse_args()
    args.cut_short = False
    args.cpus = [c for c in args.cpus.split(",") if c]
    args.gen_args = args.gen_args.split()
    steps = []
    with tempfile.TemporaryDirectory() as tmp:
        for g in range(args.generators):
            with open(os.path.join(tmp, f"users{g}"), "w") as f:
                f.writelines(f"g{g}u{i} secret\n" for i in range(args.users))
        found = search(args, tmp, steps)
        capacity = found if args.confirm_s == 0 else 0.0  # 0: the search's result stands
        rate = found
        for _ in range(args.confirm_steps if found > 0 and args.confirm_s > 0 else 0):
            s = step(args, rate, args.confirm_s, tmp, len(steps))
            steps.append(s)
            if s["passed"]:
                capacity = rate
                break
            rate /= args.confirm_factor
    print(json.dumps({"search": round(found), "capacity": round(capacity), "cut_short": args.cut_short,
                      "steps": steps}))


if __name__ == "__main__":
    main()
