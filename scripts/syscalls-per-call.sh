#!/usr/bin/env bash
# System calls per proxied call of one or more herald builds, ABAB (issue 21: user-space
# instructions are counted by callgrind, but a change can move work into the kernel - e.g. a
# timerfd_settime per timer instead of tokio's time driver - so its system calls are counted too).
#
# For each round and each binary: `herald serve` with WORKERS workers doing the bench job
# (scripts/lib/procs.sh herald_bench_config, listening on UDP and TCP), `perf stat -e
# raw_syscalls:sys_enter` attached to it (every thread), and `herald bench calls` (the first
# binary's generator for every server, so the load is the same) over TRANSPORT at RATE calls/s
# for SECS s. System calls per call = the server's count / calls attempted; failed calls are
# shown beside it (a run with failures is not comparable). Counts, not times: a loaded machine
# changes them little, but batching does depend on timing, so compare in one run.
#
# Usage: scripts/syscalls-per-call.sh HERALD...   ROUNDS=2 TRANSPORT=tcp RATE=200 SECS=10 WORKERS=1
# Port: 127.0.0.1:17720. Needs perf (linux-perf) and root (or perf_event_paranoid <= -1).
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -ge 1 ] || { echo "usage: $0 HERALD..." >&2; exit 2; }
ROUNDS=${ROUNDS:-2} TRANSPORT=${TRANSPORT:-tcp} RATE=${RATE:-200} SECS=${SECS:-10} WORKERS=${WORKERS:-1}
PORT=17720
. scripts/lib/preamble.sh
need perf linux-perf
scratch server_pid perf_pid
GEN=$1

echo "| round | herald | transport | calls/s | calls | failed | system calls | per call |"
echo "| ---: | --- | --- | ---: | ---: | ---: | ---: | ---: |"
for round in $(seq "$ROUNDS"); do
    for bin in "$@"; do
        WORKERS=$WORKERS herald_bench_config "$PORT" |
            sed 's/^transports = \["udp"\]$/transports = ["udp", "tcp"]/' >"$tmp/h.toml"
        "$bin" serve --config "$tmp/h.toml" >"$tmp/serve.log" 2>&1 &
        server_pid=$!
        wait_bound "$PORT" "$server_pid"
        perf stat -e raw_syscalls:sys_enter -x, -o "$tmp/perf.txt" -p "$server_pid" &
        perf_pid=$!
        sleep 0.5 # perf attached to every thread before the first call
        "$GEN" bench calls --proxy "127.0.0.1:$PORT" --transport "$TRANSPORT" --users 100 --quiet \
            --rate "$RATE" --duration "$SECS" --json "$tmp/r.json" >"$tmp/bench.log" 2>&1 || true
        kill -INT "$perf_pid"
        wait "$perf_pid" || true
        perf_pid=''
        stop "$server_pid"
        server_pid=''
        n=$(awk -F, '/raw_syscalls/ {print $1}' "$tmp/perf.txt")
        read -r calls failed < <(python3 -c "import json,sys
r = json.load(open(sys.argv[1])); print(r['attempted'], r['failed'])" "$tmp/r.json" 2>/dev/null || echo "0 0")
        per=$(awk -v n="${n:-0}" -v c="$calls" 'BEGIN {if (c > 0) printf "%.2f", n / c; else print "n/a"}')
        echo "| $round | $bin | $TRANSPORT | $RATE | $calls | $failed | ${n:-?} | $per |"
    done
done
