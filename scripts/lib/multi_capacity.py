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
then runs the full CONFIRM_S window at the search's result and steps down by 5% until one
passes (at most CONFIRM_STEPS): that rate is the capacity.

Prints one JSON object: {"search": rate, "capacity": rate, "steps": [...]}.
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
        cmd = ["taskset", "-c", args.cpus[g % len(args.cpus)], args.herald, "bench", "calls",
               "--proxy", args.proxy, "--domain", args.proxy, "--rate", f"{share:.3f}", "--duration", str(seconds),
               "--credentials", os.path.join(tmp, f"users{g}"), "--quiet", "--json", out]
        log = open(os.path.join(tmp, f"step{index}.gen{g}.log"), "w")
        procs.append((subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT), out, log))
    s = {"offered": 0.0, "achieved": 0.0, "attempted": 0, "failed": 0, "interrupted": False, "generators": []}
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
        s["interrupted"] |= bool(r.get("interrupted"))
        s["generators"].append({"cpu_s": r["generator"]["cpu_s"], "attempted": r["attempted"]})
    tolerance = RATE_TOLERANCE + 3 / math.sqrt(max(rate * seconds, 1))
    s["rate"] = rate
    s["seconds"] = seconds
    s["passed"] = (not s["interrupted"] and s["attempted"] > 0
                   and s["failed"] <= args.max_failure * s["attempted"]
                   and s["achieved"] >= (1 - tolerance) * rate)
    print(f"  {rate:9.0f}/s x {seconds} s: attempted {s['attempted']} failed {s['failed']} "
          f"achieved {s['achieved']:.0f}/s -> {'pass' if s['passed'] else 'fail'}", file=sys.stderr)
    time.sleep(args.pause)
    return s


def search(args, tmp, steps):
    lo, hi, rate = 0.0, None, args.start
    while len(steps) < args.max_steps:
        if hi is not None and lo > 0 and hi - lo <= args.precision * lo:
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
    ap.add_argument("--cpus", required=True, help="comma-separated CPUs, one per generator (reused round-robin)")
    ap.add_argument("--users", type=int, default=100, help="users per generator")
    ap.add_argument("--start", type=float, default=1000)
    ap.add_argument("--factor", type=float, default=1.5)
    ap.add_argument("--precision", type=float, default=0.05)
    ap.add_argument("--search-s", type=int, default=10)
    ap.add_argument("--confirm-s", type=int, default=60)
    ap.add_argument("--confirm-steps", type=int, default=4)
    ap.add_argument("--max-steps", type=int, default=16)
    ap.add_argument("--max-failure", type=float, default=0.0001)
    ap.add_argument("--pause", type=float, default=3)
    args = ap.parse_args()
    args.cpus = args.cpus.split(",")
    steps = []
    with tempfile.TemporaryDirectory() as tmp:
        for g in range(args.generators):
            with open(os.path.join(tmp, f"users{g}"), "w") as f:
                f.writelines(f"g{g}u{i} secret\n" for i in range(args.users))
        found = search(args, tmp, steps)
        capacity = 0.0
        rate = found
        for _ in range(args.confirm_steps if found > 0 else 0):
            s = step(args, rate, args.confirm_s, tmp, len(steps))
            steps.append(s)
            if s["passed"]:
                capacity = rate
                break
            rate /= 1.05
    print(json.dumps({"search": round(found), "capacity": round(capacity), "steps": steps}))


if __name__ == "__main__":
    main()
