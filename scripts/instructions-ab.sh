#!/usr/bin/env bash
# Instructions per call of two herald builds, server and generator, counted with callgrind
# (deterministic, unlike CPU time on these noisy machines).
#
# For each build: `herald serve` (one worker, the bench job of scripts/lib/procs.sh) under
# callgrind while that build's `herald bench calls`, also under callgrind, places LOW and then
# HIGH calls at RATE calls/s in two separate runs; instructions per call = (count at HIGH -
# count at LOW) / (HIGH - LOW), which cancels start-up and shutdown.
#
# TRANSPORT: what the generator's phones use, udp (default), tcp or ws (RFC 7118: herald then
# listens for it on the same port beside UDP, and its Record-Route carries flow tokens).
#
# Usage: scripts/instructions-ab.sh A_DIR B_DIR   (DIR holds herald)  RATE=20 LOW=100 HIGH=300 TRANSPORT=udp
set -euo pipefail
cd "$(dirname "$0")/.."
A=$1 B=$2
RATE=${RATE:-20} LOW=${LOW:-100} HIGH=${HIGH:-300} TRANSPORT=${TRANSPORT:-udp}
case $TRANSPORT in udp | tcp | ws) ;; *) echo "TRANSPORT must be udp, tcp or ws" >&2; exit 2 ;; esac
WORKERS=1 PORT=17801
. scripts/lib/preamble.sh
scratch server_pid
need valgrind "apt-get install valgrind"

collected() { awk '/^summary:|^totals:/ {print $2; exit}' "$1"; }

count() { # DIR CALLS -> "server generator"
    # UDP stays on (wait_bound watches for it); a stream transport listens on the same port.
    local extra=''
    [ "$TRANSPORT" = udp ] || extra=", \"$TRANSPORT\""
    herald_bench_config "$PORT" | sed "s/^transports = \\[\"udp\"\\]/transports = [\"udp\"$extra]/" >"$tmp/h.toml"
    valgrind --tool=callgrind --callgrind-out-file="$tmp/server.out" "$1/herald" serve --config "$tmp/h.toml" \
        >"$tmp/serve.log" 2>&1 &
    server_pid=$!
    wait_bound "$PORT" "$server_pid"
    valgrind --tool=callgrind --callgrind-out-file="$tmp/gen.out" "$1/herald" bench calls \
        --proxy "127.0.0.1:$PORT" --transport "$TRANSPORT" --rate "$RATE" --duration $(($2 / RATE)) --users 10 --arrivals uniform --seed 1 --quiet \
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
        'BEGIN { printf "%s '"$TRANSPORT"' server_instructions_per_call %.0f generator_instructions_per_call %.0f\n", s, (sh - sl) / n, (gh - gl) / n }'
done
