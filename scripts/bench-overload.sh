#!/usr/bin/env bash
# Overload control (seed 001, issue "Trust" §5): herald offered two and three times its capacity.
#
# On a 2-core machine the generator and the server share the CPU, and `herald bench` cannot
# offer three times what herald handles on both cores. So herald runs with one worker, pinned to
# CPU 0 and limited to QUOTA_PCT percent of it (a cgroup-v1 CPU quota: a smaller server, not a
# slower one), and the generator is pinned to CPU 1. The quota is enforced over a short period
# (PERIOD_US, 4 ms; the quota it leaves must be at least 1 ms): the kernel lets the group run QUOTA_PCT% of each period and then stops it
# until the next, so with the default 100-ms period herald sat still for 50 ms at a time and its
# datagrams waited that long in the socket queue however idle it was - the overload detector
# fired on the throttling, not on saturation. With 4-ms periods the stops are at most 3 ms,
# like a slower CPU rather than a CPU that comes and goes. Then:
#   1. `herald bench capacity` finds herald's capacity C (< 0.01% failed calls);
#   2. `herald bench calls` offers 1x, 2x and 3x C for DURATION_S seconds each (calls held
#      HOLD_MS, so thousands of calls are set up when the overload hits), herald restarted
#      before each so no transactions carry over; once with [overload] on (the default) and once
#      with it off, for contrast.
# Per run: completed calls per second (goodput), new calls refused with 503, calls that failed
# after they were answered (the BYE of a call already set up), herald's peak RSS, kernel UDP
# drops. Results: $OUT/summary.md and one JSON per run.
#
# Usage: scripts/bench-overload.sh   QUOTA_PCT=25 PERIOD_US=4000 DURATION_S=30 HOLD_MS=2000 STEP_S=10
#        CAPACITY=(skip the search) OUT=target/overload
# Ports: 127.0.0.1:17650-17652. Needs root (cgroup, taskset).
set -euo pipefail
cd "$(dirname "$0")/.."

QUOTA_PCT=${QUOTA_PCT:-25}
PERIOD_US=${PERIOD_US:-4000}
DURATION_S=${DURATION_S:-30}
HOLD_MS=${HOLD_MS:-2000}
STEP_S=${STEP_S:-10}
CAPACITY=${CAPACITY:-}
OUT=${OUT:-target/overload}
WORKERS=1
PORT=17650 MPORT=17651
CG=/sys/fs/cgroup/cpu/herald-overload

. scripts/lib/preamble.sh
[ -d /sys/fs/cgroup/cpu ] || { echo "needs cgroup v1 cpu controller at /sys/fs/cgroup/cpu" >&2; exit 2; }
build_herald
mkdir -p "$OUT" "$CG"
# The quota first: the kernel refuses a period that would leave the current quota above it.
echo -1 >"$CG/cpu.cfs_quota_us"
echo "$PERIOD_US" >"$CG/cpu.cfs_period_us"
echo $((QUOTA_PCT * PERIOD_US / 100)) >"$CG/cpu.cfs_quota_us"
on_exit() { rmdir "$CG" 2>/dev/null || true; }
scratch server_pid

start_herald() { # OVERLOAD(true|false)
    stop "$server_pid"
    herald_bench_config "$PORT" "[metrics]
listen = \"127.0.0.1:$MPORT\"
[overload]
enabled = $1" >"$tmp/herald.toml"
    taskset -c 0 "$HERALD" serve --config "$tmp/herald.toml" >"$tmp/herald.log" 2>&1 &
    server_pid=$!
    echo "$server_pid" >"$CG/tasks"
    # Threads started later inherit the cgroup; the workers start at once, move them too.
    sleep 0.3
    for t in /proc/"$server_pid"/task/*; do echo "${t##*/}" >"$CG/tasks"; done
    wait_bound "$PORT" "$server_pid"
}

bench() { # calls|capacity NAME [args]: the generator on CPU 1
    local kind=$1 name=$2
    shift 2
    taskset -c 1 "$HERALD" bench "$kind" --proxy "127.0.0.1:$PORT" --domain "127.0.0.1:$PORT" \
        --server-pid "$server_pid" --metrics "http://127.0.0.1:$MPORT/metrics" --label "$name" \
        --hold "$HOLD_MS" --quiet --json "$OUT/$name.json" "$@" >"$OUT/$name.txt" 2>&1 || true
}

if [ -z "$CAPACITY" ]; then
    start_herald true
    echo "== capacity search (${STEP_S} s steps)" >&2
    bench capacity capacity --duration "$STEP_S" --start-rate 200 --pause 33
    CAPACITY=$(python3 -c "import json,sys; print(int(json.load(open(sys.argv[1]))['capacity_rate']))" "$OUT/capacity.json")
fi
echo "== capacity $CAPACITY calls/s" >&2
[ "$CAPACITY" -gt 0 ] || { echo "no capacity found; see $OUT/capacity.txt" >&2; exit 1; }

for overload in true false; do
    for x in 1 2 3; do
        rate=$((CAPACITY * x))
        echo "== overload control $overload: ${x}x = $rate calls/s for $DURATION_S s" >&2
        start_herald "$overload"
        bench calls "oc-$overload-${x}x" --rate "$rate" --duration "$DURATION_S" --users 1000
    done
done

python3 - "$OUT" "$CAPACITY" "$QUOTA_PCT" "$DURATION_S" "$HOLD_MS" "$PERIOD_US" <<'PY' | tee "$OUT/summary.md"
import json, sys
out, cap, quota, dur, hold, period = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5], sys.argv[6]
print(f"herald overload: capacity {cap} calls/s (1 worker, {quota}% of one core in {period}-us periods), {dur} s per run, calls held {hold} ms\n")
print("| overload control | offered | offered calls/s | completed calls/s | vs capacity | refused 503 | timed out | failed after answer | other failures | herald peak RSS | UDP drops |")
print("|---|---|---|---|---|---|---|---|---|---|---|")
for oc in ("true", "false"):
    for x in (1, 2, 3):
        r = json.load(open(f"{out}/oc-{oc}-{x}x.json"))
        f = r["failures"]
        after = sum(v for k, v in f.items() if k.startswith("after answer"))
        refused = f.get("status 503", 0)
        timeout = f.get("timeout", 0)
        other = r["failed"] - after - refused - timeout
        done = r["succeeded"] / r["duration_s"]
        rss = r["servers"][0]["peak_rss_kib"] / 1024
        drops = r["udp_after"]["rcvbuf_errors"] - r["udp_before"]["rcvbuf_errors"]
        print(f"| {'on' if oc == 'true' else 'off'} | {x}x | {r['offered_rate']:.0f} | {done:.0f} | {done / cap:.2f} | {refused} | {timeout} | {after} | {other} | {rss:.0f} MiB | {drops} |")
PY
