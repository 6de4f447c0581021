#!/usr/bin/env bash
# One peer, all cores (issue 21, item 4): load from one address and port - `herald bench
# --single-socket`, callers and callees on one UDP socket, one 4-tuple as from an SBC or trunk -
# lands on one receiver thread (SO_REUSEPORT hashes the 4-tuple); balancing (module
# crates/server/src/dispatch/balance.rs) must spread it over the workers.
#
# For each herald binary given (A, B, ... in ABAB order, ROUNDS rounds) and each worker count in
# WORKER_COUNTS: `herald serve` (scripts/lib/procs.sh herald_bench_config), then
#   1. the capacity with `herald bench --single-socket` (scripts/lib/multi_capacity.py: herald
#      bench capacity's search and rule - < 0.01% failed calls - plus SRD p99 <= MAX_P99_MS;
#      SEARCH_S-second steps from START, FACTOR, PRECISION);
#   2. `herald bench calls --single-socket` at LOAD (default 0.9) x that capacity for SECS s,
#      with the CPU of every herald thread over it (/proc/PID/task/*/stat; herald-wN-udp0 is
#      worker N's receiver, herald-wN its loop, which handles what receivers hand over): whether
#      both workers are busy near capacity.
# Herald runs with `[overload] enabled = false` (OVERLOAD=on keeps it; scripts/bench-per-core.sh
# says why).
# Report: capacity per binary and worker count (median over rounds), and per run the threads'
# CPU share. This machine has 2 cores shared with the generator: 2 workers cannot double
# anything here; what it shows is whether the second worker takes its share.
#
# Usage: scripts/bench-one-peer.sh HERALD [HERALD...]   (default target/release/herald)
#        ROUNDS=2 WORKER_COUNTS="1 2" SEARCH_S=10 START=3000 FACTOR=1.2 PRECISION=0.05 LOAD=0.9
#        SECS=10 MAX_P99_MS=500 PAUSE=5 GEN_ARGS=--single-socket OUT=target/bench-one-peer.md
#        DEADLINE_S=0 (a search that has run this long stops at its best passing rate)
#        MAX_TRANSACTIONS=2000000 (herald's limit per worker)
# Port: 127.0.0.1:18630.
set -euo pipefail
cd "$(dirname "$0")/.."

[ $# -gt 0 ] || set -- target/release/herald
ROUNDS=${ROUNDS:-2} WORKER_COUNTS=${WORKER_COUNTS:-1 2} SEARCH_S=${SEARCH_S:-10} START=${START:-3000}
FACTOR=${FACTOR:-1.2} PRECISION=${PRECISION:-0.05} LOAD=${LOAD:-0.9} SECS=${SECS:-10} PAUSE=${PAUSE:-5}
MAX_P99_MS=${MAX_P99_MS:-500} DEADLINE_S=${DEADLINE_S:-0} MAX_TRANSACTIONS=${MAX_TRANSACTIONS:-2000000}
GEN_ARGS=${GEN_ARGS:---single-socket} OVERLOAD=${OVERLOAD:-off}
OUT=${OUT:-target/bench-one-peer.md}
PORT=18630
GEN=$1 # the generator: the first binary, the same in every run

. scripts/lib/preamble.sh
scratch server_pid
finished=''
on_exit() { # a run stopped early (a lent machine's time limit) still leaves its rows
    [ -n "$finished" ] || { mkdir -p "$(dirname "$OUT")" && cp "$tmp/rows" "$OUT.partial"; } 2>/dev/null || true
}

# run LABEL BINARY WORKERS ROUND
run() {
    local label=$1 bin=$2 w=$3 round=$4 cap rate busy calls
    local extra=''
    [ "$OVERLOAD" = on ] || extra=$'[overload]\nenabled = false'
    WORKERS=$w MAX_TRANSACTIONS=$((MAX_TRANSACTIONS * w)) herald_bench_config "$PORT" "$extra" >"$tmp/h.toml"
    "$bin" serve --config "$tmp/h.toml" >"$tmp/serve.log" 2>&1 &
    server_pid=$!
    wait_bound "$PORT" "$server_pid"
    python3 scripts/lib/multi_capacity.py --herald "$GEN" --proxy "127.0.0.1:$PORT" --gen-args="$GEN_ARGS" \
        --start "$START" --factor "$FACTOR" --precision "$PRECISION" --search-s "$SEARCH_S" --confirm-s 0 \
        --max-srd-p99-ms "$MAX_P99_MS" --pause "$PAUSE" --deadline-s "$DEADLINE_S" --server-pid "$server_pid" >"$tmp/cap.json" 2>"$tmp/cap.log" || true
    cap=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['capacity'])" "$tmp/cap.json" 2>/dev/null || echo 0)
    rate=$(awk -v c="$cap" -v l="$LOAD" 'BEGIN {printf "%d", c * l}')
    sleep "$PAUSE"
    thread_ticks "$server_pid" >"$tmp/ticks0"
    if [ "$rate" -gt 0 ]; then
        # shellcheck disable=SC2086
        "$GEN" bench calls --proxy "127.0.0.1:$PORT" --users 100 --quiet --rate "$rate" --duration "$SECS" \
            --server-pid "$server_pid" $GEN_ARGS --json "$tmp/calls.json" >"$tmp/calls.txt" 2>&1 || true
    fi
    thread_ticks "$server_pid" >"$tmp/ticks1"
    stop "$server_pid"
    server_pid=''
    calls=$(python3 -c "import json,sys
r = json.load(open(sys.argv[1]))
print(f\"{r['attempted']} calls, {r['failed']} failed, SRD p99 {r['srd']['p99_us'] / 1000:.1f} ms, herald {r['servers'][0]['cpu_s'] / r['attempted'] * 1e6:.0f} µs/call, generator CPU {r['generator']['cpu_s']:.1f} s\")" \
        "$tmp/calls.json" 2>/dev/null || echo "no run")
    # Threads started after the first look count from zero; shares of the herald's CPU.
    busy=$(awk -v hz="$HZ" 'NR == FNR {t0[$1] = $2; next} {d[$1] = $2 - t0[$1]; all += d[$1]}
        END {for (k in d) if (d[k] > 0) printf "%s %.2f s (%.0f%%)\n", k, d[k] / hz, 100 * d[k] / all}' \
        "$tmp/ticks0" "$tmp/ticks1" | sort | paste -sd, - | sed 's/,/, /g')
    echo "$cap" >>"$tmp/cap.$label.$w"
    { echo "- round $round, $label, $w worker(s):"; sed 's/^/      /' "$tmp/cap.log"; } >>"$tmp/steps"
    echo "| $round | $label | $w | $cap | $rate | $calls | $busy |" >>"$tmp/rows"
    echo "round $round $label, $w worker(s): capacity $cap; at $rate/s: $busy" >&2
}

: >"$tmp/rows"
: >"$tmp/steps"
labels=()
for round in $(seq "$ROUNDS"); do
    i=0
    for bin in "$@"; do
        label=$(printf "\\x$(printf %x $((65 + i)))")
        labels[i]=$label
        for w in $WORKER_COUNTS; do
            run "$label" "$bin" "$w" "$round"
            sleep "$PAUSE"
        done
        i=$((i + 1))
    done
done

{
    echo "## One peer, all cores: $(date -u '+%Y-%m-%d %H:%M UTC')"
    echo
    echo "\`ROUNDS=$ROUNDS WORKER_COUNTS=\"$WORKER_COUNTS\" SEARCH_S=$SEARCH_S START=$START FACTOR=$FACTOR LOAD=$LOAD SECS=$SECS GEN_ARGS=\"$GEN_ARGS\" scripts/bench-one-peer.sh $*\`"
    echo
    i=0
    for bin in "$@"; do
        echo "- ${labels[i]}: $bin"
        i=$((i + 1))
    done
    echo
    echo "Machine: $(nproc) CPUs ($(awk -F': ' '/model name/ {print $2; exit}' /proc/cpuinfo)), $(uname -r); load average at the end: $(cut -d' ' -f1-3 /proc/loadavg). Generator: $GEN $GEN_ARGS."
    echo
    echo "| round | herald | workers | capacity calls/s (${SEARCH_S} s steps, SRD p99 <= $MAX_P99_MS ms) | load calls/s | at that load | herald threads' CPU (share) |"
    echo "| --- | --- | ---: | ---: | ---: | --- | --- |"
    cat "$tmp/rows"
    echo
    echo "| herald | workers | median capacity calls/s |"
    echo "| --- | ---: | ---: |"
    for label in "${labels[@]}"; do
        for w in $WORKER_COUNTS; do
            echo "| $label | $w | $(median <"$tmp/cap.$label.$w") |"
        done
    done
    echo
    echo "Search steps (the server's CPU in cores, the generator's busiest share of a core):"
    echo
    cat "$tmp/steps"
} >"$tmp/report"
mkdir -p "$(dirname "$OUT")"
cp "$tmp/report" "$OUT"
finished=1
cat "$OUT"
