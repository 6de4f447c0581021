#!/usr/bin/env bash
# herald vs Kamailio 5.6, measured with `herald bench` in one run, plus the load generator itself
# vs SIPp.
#
# 1. Capacity: the same `herald bench capacity` search (UDP, no authentication, Poisson arrivals,
#    STEP_S-second windows, < 0.01% failed calls) against herald and then against Kamailio
#    (bench/kamailio-bench.cfg, the fast allocator -x tlsf -X tlsf, WORKERS children), both
#    on 127.0.0.1 with WORKERS workers, record-routing, registrar + proxy. Server CPU and peak
#    RSS come from --server-pid; herald's queue wait and service times from its metrics endpoint.
#    One report with both: $OUT/report.html (and the JSON files beside it).
# 2. Generator efficiency: against herald at GEN_RATE calls/s for GEN_S seconds, the CPU of
#    `herald bench calls` (caller and callee in one process) and of SIPp's caller + callee
#    (tests/sipp/uac.xml + uas.xml), same scenario shape (INVITE, 180, 200, ACK, BYE, 200);
#    then `herald bench floor`, the kernel's CPU for a generator's own datagrams per call.
#
# PAUSE_S: seconds between capacity steps (herald keeps finished transactions 32 s, RFC 3261
# Timer J / RFC 6026 Timer L, Kamailio about 5 s: without a pause a step inherits the previous
# step's state, which weighs on herald more).
#
# Usage: scripts/bench-side-by-side.sh   WORKERS=2 STEP_S=20 START_RATE=250 MAX_RATE=20000
#        GEN_RATE=300 GEN_S=20 PAUSE_S=2 OUT=target/side-by-side SKIP_CAPACITY=0
# Ports: 127.0.0.1:17600-17659. Needs sipp and kamailio (scripts/test.sh installs both).
set -euo pipefail
cd "$(dirname "$0")/.."

WORKERS=${WORKERS:-2}
STEP_S=${STEP_S:-20}
START_RATE=${START_RATE:-250}
MAX_RATE=${MAX_RATE:-20000}
GEN_RATE=${GEN_RATE:-300}
GEN_S=${GEN_S:-20}
OUT=${OUT:-target/side-by-side}
SKIP_CAPACITY=${SKIP_CAPACITY:-0}
PAUSE_S=${PAUSE_S:-2}
KAMAILIO=${KAMAILIO:-/usr/sbin/kamailio}
KPORT=17600 HPORT=17601 MPORT=17602 UAS_PORT=17610 REG_PORT=17620 UAC_PORT=17630

. scripts/lib/preamble.sh
need sipp "apt-get install sip-tester"
need_kamailio
build_herald
mkdir -p "$OUT"
scratch server_pid uas_pid

start_herald() {
    herald_bench_config "$HPORT" "[metrics]
listen = \"127.0.0.1:$MPORT\"" >"$tmp/herald.toml"
    "$HERALD" serve --config "$tmp/herald.toml" >"$tmp/herald.log" 2>&1 &
    server_pid=$!
    wait_bound "$HPORT" "$server_pid"
}

start_kamailio() {
    start_kamailio_bench "$KPORT"
    wait_bound "$KPORT" "$server_pid"
    sleep 1 # Kamailio forks its children after binding
}

stop_server() {
    local pids
    mapfile -t pids < <(tree "$server_pid")
    stop "${pids[@]}"
    server_pid=''
}

pid_args() { # --server-pid for the server and every child process
    local p
    for p in $(tree "$server_pid"); do printf -- '--server-pid %s ' "$p"; done
}

capacity() { # NAME PORT [extra args]
    local name=$1 port=$2
    shift 2
    # shellcheck disable=SC2046
    "$HERALD" bench capacity --proxy "127.0.0.1:$port" --label "$name" --duration "$STEP_S" \
        --start-rate "$START_RATE" --max-rate "$MAX_RATE" --pause "$PAUSE_S" --users 1000 --quiet --domain "127.0.0.1:$port" \
        $(pid_args) "$@" --json "$OUT/$name-capacity.json" | tee "$OUT/$name-capacity.txt"
}

if [ "$SKIP_CAPACITY" != 1 ]; then
    start_herald
    capacity herald "$HPORT" --metrics "http://127.0.0.1:$MPORT/metrics" || true
    stop_server
    sleep 2
    start_kamailio
    capacity kamailio "$KPORT" || true
    stop_server
    kamailio_memory_check >&2 || echo "bench-side-by-side: Kamailio's capacity above is void" >&2
    "$HERALD" bench report --input "$OUT/herald-capacity.json" --input "$OUT/kamailio-capacity.json" \
        --title "herald vs Kamailio $("$KAMAILIO" -v | awk 'NR == 1 {print $3}'): capacity over UDP, $WORKERS workers" \
        --output "$OUT/report.html"
fi

# Generator CPU: herald bench calls vs SIPp caller + callee, same rate, same server.
start_herald
"$HERALD" bench calls --proxy "127.0.0.1:$HPORT" --rate "$GEN_RATE" --duration "$GEN_S" --users 100 \
    --quiet --label "herald bench calls" --json "$OUT/generator-herald.json" >"$OUT/generator-herald.txt" || true
gen_cpu=$(python3 -c "import json,sys; r=json.load(open(sys.argv[1])); print(r['generator']['cpu_s'], r['attempted'], r['succeeded'])" "$OUT/generator-herald.json")

sipp -sf tests/sipp/uas.xml -i 127.0.0.1 -p $UAS_PORT -cp $((UAS_PORT + 1)) -mp $((UAS_PORT + 2)) \
    -nostdin >/dev/null 2>"$tmp/uas.log" &
uas_pid=$!
wait_bound $UAS_PORT $uas_pid
sipp "127.0.0.1:$HPORT" -sf tests/sipp/register.xml -s bob -key contact_host 127.0.0.1 \
    -key contact_port $UAS_PORT -i 127.0.0.1 -p $REG_PORT -cp $((REG_PORT + 1)) -mp $((REG_PORT + 2)) \
    -m 1 -timeout 10s -nostdin >/dev/null 2>"$tmp/register.log" || { echo "SIPp REGISTER failed" >&2; exit 1; }
u0=$(cpu_ticks $uas_pid)
TIMEFORMAT='%U %S'
{ time sipp "127.0.0.1:$HPORT" -sf tests/sipp/uac.xml -s bob -i 127.0.0.1 -p $UAC_PORT \
    -cp $((UAC_PORT + 1)) -mp $((UAC_PORT + 2)) -r "$GEN_RATE" -m $((GEN_RATE * GEN_S)) -l $((GEN_RATE * 10)) \
    -timeout $((GEN_S + 40))s -nostdin -trace_stat -stf "$tmp/sipp-stat.csv" -fd 1 \
    >/dev/null 2>"$tmp/uac.log" || true; } 2>"$tmp/time.sipp"
u1=$(cpu_ticks $uas_pid)
stop "$uas_pid"
uas_pid=''
stop_server
sipp_ok=$(awk -F';' 'NR == 1 {for (i = 1; i <= NF; i++) if ($i == "SuccessfulCall(C)") n = i} NF > 1 {v = $n} END {print v + 0}' "$tmp/sipp-stat.csv")
sipp_cpu=$(awk -v t=$((u1 - u0)) -v hz="$HZ" '{printf "%.2f", t / hz + $1 + $2}' "$tmp/time.sipp")

{
    echo "## herald bench vs SIPp: generator CPU per call ($(date -u '+%Y-%m-%d %H:%M UTC'))"
    echo
    echo "\`GEN_RATE=$GEN_RATE GEN_S=$GEN_S scripts/bench-side-by-side.sh\`, against herald (release, $WORKERS workers)"
    echo
    echo "| generator | calls ok | CPU s (caller + callee) | CPU µs per call |"
    echo "| --- | ---: | ---: | ---: |"
    read -r hcpu hatt hok <<<"$gen_cpu"
    awk -v c="$hcpu" -v ok="$hok" 'BEGIN {printf "| herald bench calls | %d | %.2f | %.1f |\n", ok, c, (ok > 0 ? c / ok * 1e6 : 0)}'
    awk -v c="$sipp_cpu" -v ok="$sipp_ok" 'BEGIN {printf "| SIPp uac + uas | %d | %.2f | %.1f |\n", ok, c, (ok > 0 ? c / ok * 1e6 : 0)}'
    awk -v h="$hcpu" -v hok="$hok" -v s="$sipp_cpu" -v sok="$sipp_ok" \
        'BEGIN {if (hok > 0 && sok > 0 && s > 0) printf "\nherald bench / SIPp CPU per call: %.3f\n", (h / hok) / (s / sok)}'
    # What the kernel charges for a generator's own datagrams (6 sent, 7 received per call):
    # no generator, however built, gets below it.
    floor_of generator_floor_us >"$tmp/floor.txt"
    floor_us=$(tail -n 1 "$tmp/floor.txt")
    echo
    echo "\`herald bench floor\` (kernel CPU for the datagrams alone):"
    echo
    sed '$d' "$tmp/floor.txt"
    awk -v f="$floor_us" -v s="$sipp_cpu" -v sok="$sipp_ok" \
        'BEGIN {if (sok > 0 && s > 0) printf "\nGenerator floor / SIPp CPU per call: %.1f / %.1f µs = %.3f\n", f, s / sok * 1e6, f / (s / sok * 1e6)}'
    if [ "$SKIP_CAPACITY" != 1 ]; then
        echo
        echo "## Capacity (highest rate with < 0.01% failed calls, ${STEP_S}-s windows)"
        echo
        for n in herald kamailio; do
            grep -m1 'capacity' "$OUT/$n-capacity.txt" | sed "s/^/    /"
        done
        echo
        echo "Report: $OUT/report.html"
    fi
} | tee "$OUT/summary.md"
