#!/usr/bin/env bash
# CPU per call through a gateway set vs to a registered user (issue 18: "calls through a gateway
# set cost no more CPU per call than calls to a registered user"), one build, ABAB order.
#
# A (registered): `herald serve` doing the bench job (UDP, record-routing, no auth:
#   scripts/lib/procs.sh herald_bench_config); `herald bench calls` registers its users on the
#   callee socket and calls them through herald's location service.
# B (gateway): the same herald plus a [[route]] sending every bench user (prefix "user") to a
#   [[gateway_set]] whose one destination is the same callee agent, bound to a fixed UDP port
#   (`herald bench --callee-port`): the calls leave by the gateway set (selection, failover
#   bookkeeping, health, probing every 10 s) instead of the location store. The users still
#   REGISTER before the window, as in A.
# Each run: RATE calls/s for SECS s; server CPU µs per call (--server-pid: utime+stime over the
# window / calls attempted) and generator CPU. Prints every sample, the medians and B/A.
# MODE=instructions counts instead the server's instructions per call under callgrind, as
# scripts/instructions-ab.sh does (one worker, LOW then HIGH calls at 20/s, the difference over
# the calls in between): deterministic where CPU time on a shared machine is not.
#
# Usage: scripts/bench-gateway.sh [DIR]   (DIR holds herald, default target/release)
#        ROUNDS=3 RATE=300 SECS=20 WORKERS=2   MODE=instructions LOW=100 HIGH=300
set -euo pipefail
cd "$(dirname "$0")/.."
DIR=${1:-target/release}
ROUNDS=${ROUNDS:-3} RATE=${RATE:-300} SECS=${SECS:-20} WORKERS=${WORKERS:-2}
PORT=17711 CALLEE=17719
. scripts/lib/preamble.sh
scratch server_pid

gateway_toml() { # the route and the set of case B
    cat <<TOML
[[route]]
name = "bench-users-to-gateway"
user_prefix = "user"
methods = ["INVITE"]
gateway_set = "bench"
allow_unauthenticated = true
[[gateway_set]]
name = "bench"
algorithm = "round-robin"
destinations = [{ uri = "sip:127.0.0.1:$CALLEE" }]
TOML
}

calls() { # LABEL (A or B)
    local extra='' callee=()
    if [ "$1" = B ]; then
        extra=$(gateway_toml)
        callee=(--callee-port "$CALLEE")
    fi
    herald_bench_config "$PORT" "$extra" >"$tmp/h.toml"
    "$DIR/herald" serve --config "$tmp/h.toml" >"$tmp/serve.log" 2>&1 &
    server_pid=$!
    wait_bound "$PORT" "$server_pid"
    "$DIR/herald" bench calls --proxy "127.0.0.1:$PORT" --rate "$RATE" --duration "$SECS" --users 100 --quiet \
        "${callee[@]}" --server-pid "$server_pid" --json "$tmp/r.json" >/dev/null || true
    stop "$server_pid"; server_pid=''
    python3 - "$tmp/r.json" "$1" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
srv = sum(s['cpu_s'] for s in r['servers']) * 1e6 / max(r['attempted'], 1)
print(f"calls {sys.argv[2]} server_us_per_call {srv:.1f} generator_us_per_call {r['generator']['cpu_us_per_call']:.1f} attempted {r['attempted']} succeeded {r['succeeded']}")
PY
}

instructions() { # LABEL CALLS -> "server_instructions calls"
    local extra='' callee=()
    if [ "$1" = B ]; then
        extra=$(gateway_toml)
        callee=(--callee-port "$CALLEE")
    fi
    WORKERS=1 herald_bench_config "$PORT" "$extra" >"$tmp/h.toml"
    valgrind --tool=callgrind --callgrind-out-file="$tmp/server.out" "$DIR/herald" serve --config "$tmp/h.toml" \
        >"$tmp/serve.log" 2>&1 &
    server_pid=$!
    wait_bound "$PORT" "$server_pid"
    "$DIR/herald" bench calls --proxy "127.0.0.1:$PORT" --rate 20 --duration $(($2 / 20)) --users 10 \
        --arrivals uniform --seed 1 --quiet "${callee[@]}" --json "$tmp/r.json" >/dev/null 2>"$tmp/gen.log" || true
    kill -TERM "$server_pid"
    wait "$server_pid" 2>/dev/null || true
    server_pid=''
    local calls
    calls=$(python3 -c "import json,sys; r=json.load(open(sys.argv[1])); assert r['succeeded'] == r['attempted'] > 0, (r['attempted'], r['succeeded']); print(r['attempted'])" "$tmp/r.json")
    echo "$(awk '/^summary:|^totals:/ {print $2; exit}' "$tmp/server.out") $calls"
}

if [ "${MODE:-cpu}" = instructions ]; then
    need valgrind "apt-get install valgrind"
    LOW=${LOW:-100} HIGH=${HIGH:-300}
    for side in A B; do
        read -r s_low n_low < <(instructions "$side" "$LOW")
        read -r s_high n_high < <(instructions "$side" "$HIGH")
        awk -v s="$side" -v sl="$s_low" -v sh="$s_high" -v n=$((n_high - n_low)) \
            'BEGIN { printf "%s server_instructions_per_call %.0f\n", s, (sh - sl) / n }' | tee -a "$tmp/instr"
    done
    awk '{v[$1] = $3} END { printf "server instructions per call: A (registered user) %d  B (gateway set) %d  B/A %.3f\n", v["A"], v["B"], v["B"] / v["A"] }' "$tmp/instr"
    exit 0
fi

for round in $(seq "$ROUNDS"); do
    for side in A B; do
        calls "$side" | tee -a "$tmp/samples"
        sleep 2
    done
done
python3 - "$tmp/samples" <<'PY'
import statistics, sys
s = {}
for line in open(sys.argv[1]):
    f = line.split()
    for k, v in zip(f[2::2], f[3::2]):
        s.setdefault((k, f[1]), []).append(float(v))
for k in ('server_us_per_call', 'generator_us_per_call', 'succeeded'):
    a, b = statistics.median(s[(k, 'A')]), statistics.median(s[(k, 'B')])
    print(f"median {k}: A (registered user) {a:.1f}  B (gateway set) {b:.1f}  B/A {b / a:.3f}")
fails = [(side, a - ok) for (k, side), v in s.items() if k == 'attempted' for a, ok in zip(v, s[('succeeded', side)]) if a != ok]
print("failed calls:", fails if fails else "none")
PY
