#!/usr/bin/env bash
# A/B comparison of two herald builds in one run, ABAB order (issue 17: "within noise of before").
#
# For each round and build: `herald serve` (UDP, record-routing, no auth: the bench job of
# scripts/lib/procs.sh herald_bench_config) and that build's own `herald bench calls` at RATE
# calls/s for SECS s; records server CPU µs per call (--server-pid) and generator CPU µs per call.
# Then the idle-connection memory of that build's server: N idle connections over IDLE_MODE
# (tcp, tls, ws or wss; tcp_idle_clients example of the same build), VmRSS delta per connection.
# Prints every sample, the medians per build and the ratio B/A.
#
# Usage: scripts/bench-ab.sh A_DIR B_DIR   (each DIR holds herald and examples/tcp_idle_clients,
#        e.g. target/release)   ROUNDS=2 RATE=300 SECS=20 N=19800 WORKERS=2 IDLE_MODE=tcp
set -euo pipefail
cd "$(dirname "$0")/.."
A=$1 B=$2
ROUNDS=${ROUNDS:-2} RATE=${RATE:-300} SECS=${SECS:-20} N=${N:-19800} WORKERS=${WORKERS:-2}
IDLE_MODE=${IDLE_MODE:-tcp}
PORT=17701 TPORT=17702
. scripts/lib/preamble.sh
scratch server_pid clients_pid
ulimit -n "$(ulimit -Hn)"
[ "$N" -gt $(($(ulimit -n) - 300)) ] && N=$(($(ulimit -n) - 300))

calls() { # DIR LABEL
    herald_bench_config "$PORT" >"$tmp/h.toml"
    "$1/herald" serve --config "$tmp/h.toml" >"$tmp/serve.log" 2>&1 &
    server_pid=$!
    wait_bound "$PORT" "$server_pid"
    "$1/herald" bench calls --proxy "127.0.0.1:$PORT" --rate "$RATE" --duration "$SECS" --users 100 --quiet \
        --server-pid "$server_pid" --json "$tmp/r.json" >/dev/null || true
    stop "$server_pid"; server_pid=''
    python3 - "$tmp/r.json" "$2" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
srv = sum(s['cpu_s'] for s in r['servers']) * 1e6 / max(r['attempted'], 1)
print(f"calls {sys.argv[2]} server_us_per_call {srv:.1f} generator_us_per_call {r['generator']['cpu_us_per_call']:.1f} attempted {r['attempted']} succeeded {r['succeeded']}")
PY
}

idle() { # DIR LABEL
    if { [ "$IDLE_MODE" = wss ] || [ "$IDLE_MODE" = tls ]; } && [ ! -f "$tmp/cert.pem" ]; then
        openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 -subj /CN=localhost \
            -addext subjectAltName=IP:127.0.0.1 -keyout "$tmp/key.pem" -out "$tmp/cert.pem" 2>/dev/null
    fi
    herald_idle_config "$TPORT" "$N" "$IDLE_MODE" "$tmp/cert.pem" "$tmp/key.pem" >"$tmp/t.toml"
    "$1/herald" serve --config "$tmp/t.toml" >"$tmp/idle.log" 2>&1 &
    server_pid=$!
    for _ in $(seq 100); do (exec 3<>"/dev/tcp/127.0.0.1/$TPORT") 2>/dev/null && break; sleep 0.1; done
    sleep 0.5
    local before after opened
    before=$(awk '/^VmRSS/ {print $2}' "/proc/$server_pid/status")
    rm -f "$tmp/hold"; mkfifo "$tmp/hold"
    "$1/examples/tcp_idle_clients" "127.0.0.1:$TPORT" "$N" 8 3600 "$IDLE_MODE" <"$tmp/hold" >"$tmp/clients.out" &
    clients_pid=$!
    exec 4>"$tmp/hold"
    while ! grep -q READY "$tmp/clients.out" 2>/dev/null; do
        kill -0 "$clients_pid" 2>/dev/null || { echo "clients died" >&2; exit 1; }
        sleep 0.5
    done
    opened=$(awk '/READY/ {print $2}' "$tmp/clients.out")
    sleep 2
    after=$(awk '/^VmRSS/ {print $2}' "/proc/$server_pid/status")
    exec 4>&-
    stop "$clients_pid" "$server_pid"; clients_pid='' server_pid=''
    awk -v a="$after" -v b="$before" -v n="$opened" -v l="$2" 'BEGIN { printf "idle %s kb_per_connection %.3f connections %d\n", l, (a - b) / n, n }'
}

for round in $(seq "$ROUNDS"); do
    for side in A B; do
        dir=$A; [ $side = B ] && dir=$B
        calls "$dir" "$side" | tee -a "$tmp/samples"
        sleep 2
        idle "$dir" "$side" | tee -a "$tmp/samples"
        sleep 2
    done
done
python3 - "$tmp/samples" <<'PY'
import statistics, sys
s = {}
for line in open(sys.argv[1]):
    f = line.split()
    kind, side = f[0], f[1]
    for k, v in zip(f[2::2], f[3::2]):
        s.setdefault((kind, k, side), []).append(float(v))
for (kind, k, side) in sorted(s):
    if side != 'A' or k in ('attempted', 'succeeded', 'connections'): continue
    a, b = statistics.median(s[(kind, k, 'A')]), statistics.median(s[(kind, k, 'B')])
    print(f"median {k}: A {a:.3f}  B {b:.3f}  B/A {b / a:.3f}   (A {s[(kind, k, 'A')]}, B {s[(kind, k, 'B')]})")
PY
