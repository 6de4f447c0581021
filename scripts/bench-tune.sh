#!/usr/bin/env bash
# Default vs tuned OS settings, side by side on this machine (issue 21 item 5): capacity and
# latency of the same herald build with the machine as it is ("default") and after
# `herald tune --apply` ("tuned"), in ABAB order, reverting after every tuned phase.
#
# Each phase starts a fresh `herald serve` (UDP, record-routing, no auth: scripts/lib/procs.sh
# herald_bench_config, $WORKERS workers, metrics on) and warms it up: RATE calls/s for 6 s while
# `herald tune --metrics URL --pid PID --rate RATE` measures its CPU per message; in a tuned phase
# with --apply, so that the recommendations (per-task slices of its threads, socket ceilings,
# backlog, RPS ...; debugfs knobs where the kernel allows) come from this herald at that rate.
# A tuned phase ends with --revert.
# Then, in every phase:
#   capacity  `herald bench capacity` from START calls/s (doubling, then bisecting to 5%): the
#             highest rate with < MAX_FAILURE failed calls over CAP_SECS-s windows
#   latency   `herald bench calls --rate RATE` for SECS s: SRD (INVITE → 180) p50/p99/p99.9,
#             failed calls, herald CPU µs per call
# Prints every sample, then per setting the medians and the ratio tuned/default. The machine is
# left as found: a trap reverts on any exit. Run it when the machine is quiet (`uptime` load
# < 1.5): capacity on 2 shared cores moves with whatever else runs.
#
# Usage: scripts/bench-tune.sh [HERALD]   (default target/release/herald, copied first)
#        ROUNDS=2 WORKERS=2 RATE=4000 SECS=20 START=2000 MAX_RATE=40000 CAP_SECS=10
#        MAX_FAILURE=0.0001 SKIP_CAPACITY=0 OUT=DIR (keeps the JSON results)
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${ROUNDS:-2} WORKERS=${WORKERS:-2} RATE=${RATE:-4000} SECS=${SECS:-20} START=${START:-2000}
MAX_RATE=${MAX_RATE:-40000} CAP_SECS=${CAP_SECS:-10} MAX_FAILURE=${MAX_FAILURE:-0.0001}
SKIP_CAPACITY=${SKIP_CAPACITY:-0}
PORT=17801 MPORT=17802
. scripts/lib/preamble.sh
on_exit() { if [ -f "${state:-}" ]; then "$H" tune --revert --state "$state" >&2 || true; fi; }
scratch server_pid load_pid
OUT=${OUT:-$tmp/out}
mkdir -p "$OUT"
H="$tmp/herald"
cp "${1:-target/release/herald}" "$H"
state="$tmp/tune-state.json"

start_herald() {
    herald_bench_config "$PORT" "[metrics]
listen = \"127.0.0.1:$MPORT\"" >"$tmp/h.toml"
    "$H" serve --config "$tmp/h.toml" >"$tmp/serve.log" 2>&1 &
    server_pid=$!
    wait_bound "$PORT" "$server_pid"
}

warm_up() { # SETTING: offer RATE for 6 s and run herald tune on this herald meanwhile: it measures
    # the CPU per message at that rate; in a tuned phase it applies its recommendations. Default
    # phases get the same warm-up, so that both start with the same transactions in memory.
    "$H" bench calls --proxy "127.0.0.1:$PORT" --rate "$RATE" --duration 6 --quiet --max-failure 1 >/dev/null 2>&1 &
    load_pid=$!
    sleep 2
    local apply=()
    if [ "$1" = tuned ]; then apply=(--apply --state "$state"); fi
    "$H" tune --config "$tmp/h.toml" --metrics "http://127.0.0.1:$MPORT/metrics" --window-s 2 --pid "$server_pid" \
        --rate "$RATE" "${apply[@]}" >"$tmp/tune.txt" 2>"$tmp/tune.err"
    wait "$load_pid" 2>/dev/null || true
    load_pid=''
    if [ "$1" = tuned ]; then
        sed -n 's/^workload: /    tune workload: /p' "$tmp/tune.txt"
        grep -v '^not set sched [a-z_]*: debugfs' "$tmp/tune.err" | sed 's/^/    tune: /'
    fi
    sleep 2 # let the warm-up's calls end before measuring
}

untune() { # restore what warm_up applied (while its herald still runs, so its threads exist)
    if [ -f "$state" ]; then "$H" tune --revert --state "$state" | tail -1 | sed 's/^/    revert: /'; fi
}

phase() { # SETTING ROUND
    start_herald
    warm_up "$1"
    if [ "$SKIP_CAPACITY" != 1 ]; then
        "$H" bench capacity --proxy "127.0.0.1:$PORT" --start-rate "$START" --max-rate "$MAX_RATE" --duration "$CAP_SECS" \
            --max-failure "$MAX_FAILURE" --users 1000 --quiet --json "$OUT/capacity-$1-$2.json" >/dev/null 2>&1 || true
        # herald keeps each step's transactions for 32 s (Timer J): a fresh one for the latency run
        untune
        stop "$server_pid"; server_pid=''
        start_herald
        warm_up "$1"
    fi
    "$H" bench calls --proxy "127.0.0.1:$PORT" --rate "$RATE" --duration "$SECS" --users 1000 --quiet \
        --server-pid "$server_pid" --metrics "http://127.0.0.1:$MPORT/metrics" --json "$OUT/calls-$1-$2.json" >/dev/null 2>&1 || true
    untune
    stop "$server_pid"; server_pid=''
    python3 - "$OUT" "$1" "$2" "$SKIP_CAPACITY" <<'PY'
import json, sys, os
out, setting, rnd, skip = sys.argv[1:5]
line = f"{setting:8s} round {rnd}"
if skip != "1":
    c = json.load(open(os.path.join(out, f"capacity-{setting}-{rnd}.json")))
    line += f"  capacity {c['capacity_rate']:.0f} calls/s"
r = json.load(open(os.path.join(out, f"calls-{setting}-{rnd}.json")))
srv = sum(s['cpu_s'] for s in r['servers']) * 1e6 / max(r['attempted'], 1)
drops = (r.get('server_metrics') or {}).get('socket_drops', 0)
s = r['srd']
line += (f"  at {r['offered_rate']:.0f}/s: SRD p50 {s['p50_us']} µs p99 {s['p99_us']} µs p99.9 {s['p999_us']} µs"
         f"  failed {r['failed']}/{r['attempted']}  socket drops {drops}  herald {srv:.1f} µs CPU/call")
print(line, flush=True)
PY
}

echo "bench-tune: $(nproc) cores, $(uname -r), load $(cut -d' ' -f1-3 /proc/loadavg); ROUNDS=$ROUNDS WORKERS=$WORKERS RATE=$RATE SECS=$SECS"
for r in $(seq "$ROUNDS"); do
    phase default "$r"
    phase tuned "$r"
done

python3 - "$OUT" "$ROUNDS" "$SKIP_CAPACITY" <<'PY'
import json, os, sys, statistics as st
out, rounds, skip = sys.argv[1], int(sys.argv[2]), sys.argv[3] == "1"
def med(setting, f):
    return st.median(f(s, r) for s in [setting] for r in range(1, rounds + 1))
def cap(s, r): return json.load(open(os.path.join(out, f"capacity-{s}-{r}.json")))["capacity_rate"]
def calls(s, r): return json.load(open(os.path.join(out, f"calls-{s}-{r}.json")))
rows = []
if not skip:
    rows.append(("capacity, calls/s", cap))
for q in ("p50_us", "p99_us", "p999_us"):
    rows.append((f"SRD {q[:-3]} at the fixed rate, µs", lambda s, r, q=q: calls(s, r)["srd"][q]))
rows.append(("herald CPU µs per call", lambda s, r: sum(x['cpu_s'] for x in calls(s, r)['servers']) * 1e6 / max(calls(s, r)['attempted'], 1)))
rows.append(("failed calls at the fixed rate", lambda s, r: calls(s, r)["failed"]))
print(f"\nmedians over {rounds} rounds          default      tuned   tuned/default")
for name, f in rows:
    d, t = med("default", f), med("tuned", f)
    ratio = f"{t / d:.3f}" if d else "-"
    print(f"{name:36s} {d:9.1f} {t:10.1f}   {ratio}")
PY
