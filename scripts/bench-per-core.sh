#!/usr/bin/env bash
# Capacity per core, herald vs Kamailio 5.6 (issue 21, target 3: herald >= 3x Kamailio).
#
# Each server is confined to one core (taskset -c $SERVER_CPU: all its threads or processes) and
# does the same job - transaction-stateful, record-routing proxy and in-memory registrar, UDP, no
# authentication: herald `serve` with one worker (scripts/lib/procs.sh herald_bench_config),
# Kamailio with bench/kamailio-bench.cfg and one UDP child (-n 1; its main, timer and other
# helper processes share the core too). The load generator, `herald bench`, runs on another
# core (taskset -c $GEN_CPU) and plays both ends: callees REGISTER, callers place
# INVITE->180->200->ACK->BYE calls (no ring, no hold) through the proxy, Poisson arrivals.
#
# Capacity is the highest call rate whose failed-call ratio stays under 0.01% over a 60 s window
# (seeds 000/002), with `herald bench capacity`'s search and pass rule, run by
# scripts/lib/multi_capacity.py (one generator here), which adds one condition: the SRD's 99th
# percentile stays under MAX_P99_MS (500 ms, RFC 3261's T1). Without it a server that queues
# past its capacity passes: herald bench fails a call only when its transaction times out (32 s)
# and waits that long for the calls in flight, so a backlog finishes late but "successfully"
# (seen here: herald without overload control "passing" 20,000 calls/s on one core in 5 s steps,
# SRD p99 5 s; Kamailio 12,000 with 1.5 s). Two passes keep a run short:
#   1. search: SEARCH_S-second steps from START, multiplying by FACTOR, then bisecting to
#      PRECISION;
#   2. confirm: the full CONFIRM_S-second window at the search's result, stepping down by 5% until
#      a rate passes (at most CONFIRM_STEPS). That rate is the reported capacity.
# Overload control: Kamailio's bench configuration has none - past its capacity it queues.
# Herald's `[overload]` answers 503 instead, which fails calls early; so that both are measured
# alike, herald runs with `[overload] enabled = false` (OVERLOAD=on keeps it).
# Servers run in ABAB order (ROUNDS rounds of herald then Kamailio); the report gives every
# round, the medians and herald/Kamailio, next to siphon-sip's published figure (about 2,700
# proxied calls/s on one core of a 2024 laptop CPU; a different machine, so only a landmark).
#
# Usage: scripts/bench-per-core.sh [HERALD]   (default target/release/herald, built if absent)
#        ROUNDS=2 SEARCH_S=10 CONFIRM_S=60 START=2000 FACTOR=1.5 PRECISION=0.05 CONFIRM_STEPS=4
#        MAX_P99_MS=500 KAMAILIO_SHM_MB=8192
#        SERVER_CPU=0 GEN_CPU=1 PAUSE=3 OVERLOAD=off OUT=target/bench-per-core.md
#        Trials: SEARCH_S=5 CONFIRM_S=10 ROUNDS=1.
# Ports: 127.0.0.1:18610 (herald), 18611 (Kamailio). Needs kamailio and taskset.
set -euo pipefail
cd "$(dirname "$0")/.."

HERALD=${1:-target/release/herald}
ROUNDS=${ROUNDS:-2} SEARCH_S=${SEARCH_S:-10} CONFIRM_S=${CONFIRM_S:-60} CONFIRM_STEPS=${CONFIRM_STEPS:-4}
START=${START:-2000} FACTOR=${FACTOR:-1.5} PRECISION=${PRECISION:-0.05} PAUSE=${PAUSE:-3}
MAX_P99_MS=${MAX_P99_MS:-500}
SERVER_CPU=${SERVER_CPU:-0} GEN_CPU=${GEN_CPU:-1} OVERLOAD=${OVERLOAD:-off}
OUT=${OUT:-target/bench-per-core.md}
KAMAILIO=${KAMAILIO:-/usr/sbin/kamailio}
HPORT=18610 KPORT=18611
WORKERS=1 # one herald worker, one Kamailio UDP child (herald_bench_config, start_kamailio_bench)

. scripts/lib/preamble.sh
need_kamailio
need taskset util-linux
herald_or_build
[ "$SERVER_CPU" != "$GEN_CPU" ] || echo "warning: server and generator share CPU $GEN_CPU" >&2

scratch server_pid

# capacity NAME PORT PID...: scripts/lib/multi_capacity.py with one generator on GEN_CPU against
# the server on PORT (its processes PID...: their CPU per call); writes "SEARCHED CONFIRMED"
# (calls/s, 0 when nothing passed) to $tmp/result
capacity() {
    local name=$1 port=$2 p pids=()
    shift 2
    for p in "$@"; do pids+=(--server-pid "$p"); done
    python3 scripts/lib/multi_capacity.py --herald "$HERALD" --proxy "127.0.0.1:$port" --generators 1 \
        --cpus "$GEN_CPU" --start "$START" --factor "$FACTOR" --precision "$PRECISION" --search-s "$SEARCH_S" \
        --confirm-s "$CONFIRM_S" --confirm-steps "$CONFIRM_STEPS" --max-srd-p99-ms "$MAX_P99_MS" \
        --pause "$PAUSE" "${pids[@]}" >"$tmp/cap.$name.json" 2>"$tmp/cap.$name.log" || true
    python3 -c "import json,sys
try:
    r = json.load(open(sys.argv[1])); print(r['search'], r['capacity'])
except Exception: print(0, 0)" "$tmp/cap.$name.json" >"$tmp/result"
}

passing_step() { # NAME: the passing step at the capacity and the first failing step above it, in words
    python3 -c "import json,sys
def words(s):
    busy = lambda cpu_s: f'{cpu_s / s[\"seconds\"] * 100:.0f}%'
    gen = sum(g['cpu_s'] for g in s.get('generators', []))
    cpu = f\", server {s['server_cpu_s'] / s['attempted'] * 1e6:.0f} µs/call ({busy(s['server_cpu_s'])} of its core)\" if s['server_cpu_s'] and s['attempted'] else ''
    cpu += f', generator {busy(gen)} of its core' if gen else ''
    return (f\"{s['rate']:.0f}/s for {s['seconds']} s: {s['attempted']} calls, {s['failed']} failed, achieved {s['achieved']:.0f}/s, \"
            f\"{s['retransmissions']} retransmissions, SRD p99 {s['srd_p99_ms']:.1f} ms{cpu}\")
try:
    r = json.load(open(sys.argv[1]))
    ok = [s for s in r['steps'] if s['passed'] and round(s['rate']) == r['capacity']][-1]
    above = [s for s in r['steps'] if not s['passed'] and s['rate'] > ok['rate']]
    print(words(ok) + ' | ' + (words(min(above, key=lambda s: s['rate'])) if above else 'none tried'))
except Exception: print('none passed | ')" "$tmp/cap.$1.json"
}

run_herald() {
    local extra=''
    [ "$OVERLOAD" = on ] || extra=$'[overload]\nenabled = false'
    herald_bench_config "$HPORT" "$extra" >"$tmp/herald.toml"
    taskset -c "$SERVER_CPU" "$HERALD" serve --config "$tmp/herald.toml" >"$tmp/herald.log" 2>&1 &
    server_pid=$!
    wait_bound "$HPORT" "$server_pid"
    capacity herald "$HPORT" "$server_pid"
    stop "$server_pid"
    server_pid=''
}

run_kamailio() {
    # Kamailio forks its processes itself: pinning this shell for the moment of the start gives
    # them all the server's core.
    local mask kids
    mask=$(taskset -p $$ | awk '{print $NF}')
    taskset -p -c "$SERVER_CPU" $$ >/dev/null
    start_kamailio_bench "$KPORT"
    taskset -p "$mask" $$ >/dev/null
    wait_bound "$KPORT" "$server_pid"
    sleep 1 # Kamailio forks its children after binding
    kids=$(tree "$server_pid" | tr '\n' ' ')
    # shellcheck disable=SC2086
    capacity kamailio "$KPORT" $kids
    # shellcheck disable=SC2086
    stop $kids
    server_pid=''
    kamailio_memory_check >>"$tmp/void" || true
}

{
    echo "## Capacity per core, herald vs Kamailio: $(date -u '+%Y-%m-%d %H:%M UTC')"
    echo
    echo "\`ROUNDS=$ROUNDS SEARCH_S=$SEARCH_S CONFIRM_S=$CONFIRM_S START=$START FACTOR=$FACTOR PRECISION=$PRECISION MAX_P99_MS=$MAX_P99_MS SERVER_CPU=$SERVER_CPU GEN_CPU=$GEN_CPU OVERLOAD=$OVERLOAD scripts/bench-per-core.sh $HERALD\`"
    echo
    echo "herald $(git rev-parse --short HEAD 2>/dev/null || echo unknown) ($HERALD), $("$KAMAILIO" -v | awk 'NR == 1 {print $2, $3}') (-n 1, -x tlsf -X tlsf -m ${KAMAILIO_SHM_MB:-8192})."
    echo "Machine: $(nproc) CPUs ($(awk -F': ' '/model name/ {print $2; exit}' /proc/cpuinfo)), $(uname -r); load average before: $(cut -d' ' -f1-3 /proc/loadavg)."
    echo "Server on CPU $SERVER_CPU, generator on CPU $GEN_CPU. Capacity: highest rate with failed calls <= 0.01% and SRD p99 <= $MAX_P99_MS ms over a ${CONFIRM_S} s window."
    echo
    echo "| round | server | search (${SEARCH_S} s steps) | confirmed (${CONFIRM_S} s) calls/s | the passing step | the lowest failing step above it (what limited) |"
    echo "| --- | --- | ---: | ---: | --- | --- |"
} >"$tmp/report"

for round in $(seq "$ROUNDS"); do
    for name in herald kamailio; do
        "run_$name"
        read -r found confirmed <"$tmp/result"
        echo "$confirmed" >>"$tmp/cap.$name"
        echo "| $round | $name | $found | $confirmed | $(passing_step "$name") |" >>"$tmp/report"
        echo "round $round $name: search $found, confirmed $confirmed calls/s" >&2
        sleep "$PAUSE"
    done
done

median() { sort -g "$1" | awk '{v[NR] = $1} END {if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }
h=$(median "$tmp/cap.herald")
k=$(median "$tmp/cap.kamailio")
{
    echo
    echo "Median capacity on one core: herald $h calls/s, Kamailio $k calls/s;" \
        "herald/Kamailio $(awk -v h="$h" -v k="$k" 'BEGIN {if (k > 0) printf "%.2f", h / k; else print "n/a"}')" \
        "(target >= 3). siphon-sip publishes about 2,700 proxied calls/s per core (2024 laptop CPU):" \
        "herald $(awk -v h="$h" 'BEGIN {printf "%.2f", h / 2700}')x that figure on this machine."
    echo "Load average after: $(cut -d' ' -f1-3 /proc/loadavg)."
} >>"$tmp/report"
kamailio_void_note
mkdir -p "$(dirname "$OUT")"
cp "$tmp/report" "$OUT"
cat "$OUT"
[ ! -s "$tmp/void" ] || exit 1
