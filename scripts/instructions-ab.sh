#!/usr/bin/env bash
# Instructions per call of two herald builds, server and generator, counted with callgrind
# (deterministic, unlike CPU time on these noisy machines).
#
# For each build: `herald serve` (one worker, UDP, the bench job of scripts/lib/procs.sh) under
# callgrind while that build's `herald bench calls`, also under callgrind, places LOW and then
# HIGH calls at RATE calls/s in two separate runs; instructions per call = (count at HIGH -
# count at LOW) / (HIGH - LOW), which cancels start-up and shutdown.
#
# Usage: scripts/instructions-ab.sh A_DIR B_DIR   (DIR holds herald)  RATE=20 LOW=100 HIGH=300
set -euo pipefail
cd "$(dirname "$0")/.."
A=$1 B=$2
RATE=${RATE:-20} LOW=${LOW:-100} HIGH=${HIGH:-300}
WORKERS=1 PORT=17801
HZ=$(getconf CLK_TCK)
tmp=$(mktemp -d)
server_pid=''
# shellcheck source=scripts/lib/procs.sh
. scripts/lib/procs.sh
trap 'stop "$server_pid"; rm -rf "$tmp"' EXIT
trap 'exit 130' INT TERM
command -v valgrind >/dev/null || { echo "valgrind not found (apt-get install valgrind)" >&2; exit 2; }

collected() { awk '/^summary:|^totals:/ {print $2; exit}' "$1"; }

count() { # DIR CALLS -> "server generator"
    herald_bench_config "$PORT" >"$tmp/h.toml"
    valgrind --tool=callgrind --callgrind-out-file="$tmp/server.out" "$1/herald" serve --config "$tmp/h.toml" \
        >"$tmp/serve.log" 2>&1 &
    server_pid=$!
    wait_bound "$PORT" "$server_pid"
    valgrind --tool=callgrind --callgrind-out-file="$tmp/gen.out" "$1/herald" bench calls \
        --proxy "127.0.0.1:$PORT" --rate "$RATE" --duration $(($2 / RATE)) --users 10 --arrivals uniform --seed 1 --quiet \
        --json "$tmp/r.json" >/dev/null 2>"$tmp/gen.log" || true
    kill -TERM "$server_pid"
    wait "$server_pid" 2>/dev/null || true
    server_pid=''
    # every call must succeed for the count to mean a call's cost
    calls=$(python3 -c "import json,sys; r=json.load(open(sys.argv[1])); assert r['succeeded'] == r['attempted'] > 0, (r['attempted'], r['succeeded']); print(r['attempted'])" "$tmp/r.json")
    echo "$(collected "$tmp/server.out") $(collected "$tmp/gen.out") $calls"
}

for side in A B; do
    dir=$A; [ $side = B ] && dir=$B
    read -r s_low g_low n_low < <(count "$dir" "$LOW")
    read -r s_high g_high n_high < <(count "$dir" "$HIGH")
    awk -v s="$side" -v sl="$s_low" -v sh="$s_high" -v gl="$g_low" -v gh="$g_high" -v n=$((n_high - n_low)) \
        'BEGIN { printf "%s server_instructions_per_call %.0f generator_instructions_per_call %.0f\n", s, (sh - sl) / n, (gh - gl) / n }'
done
