#!/usr/bin/env bash
# Scaling across cores (issue 21, item 7; the seeds' central question), in two parts.
#
# PARTS=cpu - CPU per call with 2 workers against 1 worker at the same, uncontended rate
#   (target: within 1.1x). herald serve (scripts/lib/procs.sh herald_bench_config) with
#   WORKERS=1, then 2, in ABAB order for ROUNDS rounds; each run `herald bench calls` at RATE
#   calls/s for SECS s (GEN_ARGS adds options, e.g. --single-socket for one 4-tuple); server CPU
#   per call = utime+stime of the herald process over the window / calls attempted
#   (`--server-pid`). Each run also names the threads that did the work (per-thread CPU from
#   /proc/PID/task/*/stat), because SO_REUSEPORT places the generator's two flows (its caller
#   and callee sockets) on one receiver or on two, by a hash of their ports.
#
# PARTS=capacity - capacity with N = 1, 2, 4, 8, 16 workers (NS) against Kamailio 5.6 with as
#   many UDP children (bench/kamailio-bench.cfg), each server pinned to CPUs 0..N-1 (taskset:
#   every thread or process), the load from GENS `herald bench` processes pinned to the CPUs
#   after them (default: one per two server cores, at least one), driven by
#   scripts/lib/multi_capacity.py (the capacity search of `herald bench capacity`, summed over
#   the generators: < 0.01% failed calls, a SEARCH_S-second search and a CONFIRM_S-second
#   confirmation). Reports capacity, speed-up over N = 1 (target >= 0.9 N; the seeds' best was
#   6.2 of 8) and herald/Kamailio per N. An N whose server and generators do not fit on
#   separate CPUs (N + GENS > nproc) runs with the generators on the last CPUs, shared with the
#   server, and is marked "shared" - a trial of the script, not a measurement. GENS and START
#   are each one number for every N, or a list of N:VALUE pairs (GENS="1:2 2:3 4:6 8:8"; an N
#   not in it gets the default); KAMAILIO_START (default START) is Kamailio's. herald's
#   transaction limit grows with N (MAX_TRANSACTIONS per worker, default 2,000,000: transactions
#   linger 32 s, Timer J). DEADLINE_S (default 0: none) stops a search that has run that long at
#   its best passing rate, marked "cut short" - for a lent machine whose minutes are counted
#   (scripts/device-scaling.sh). SPREAD_S (default 0: none) adds, after each herald search, a
#   SPREAD_S-second run at SPREAD_LOAD (0.9) x its capacity that reports each herald thread's
#   share of a core (are some receivers saturated while others idle?). Herald runs with
#   `[overload] enabled = false` (OVERLOAD=on keeps it), as scripts/bench-per-core.sh explains:
#   Kamailio's configuration has no overload control either.
#
# Usage: scripts/bench-scaling.sh [HERALD]   (default target/release/herald, built if absent)
#        PARTS="cpu capacity" ROUNDS=3 RATE=2000 SECS=20 GEN_ARGS=
#        NS="1 2 4 8 16" GENS= DEADLINE_S=0 MAX_TRANSACTIONS=2000000 SEARCH_S=10 CONFIRM_S=60
#        START=2000 KAMAILIO_START= FACTOR=1.5 PRECISION=0.05 SERVERS="herald kamailio"
#        SPREAD_S=0 SPREAD_LOAD=0.9
#        OUT=target/bench-scaling.md
# Ports: 127.0.0.1:18620 (herald), 18621 (Kamailio). Needs kamailio and taskset for capacity.
set -euo pipefail
cd "$(dirname "$0")/.."

HERALD=${1:-target/release/herald}
PARTS=${PARTS:-cpu capacity}
ROUNDS=${ROUNDS:-3} RATE=${RATE:-2000} SECS=${SECS:-20} GEN_ARGS=${GEN_ARGS:-}
NS=${NS:-1 2 4 8 16} GENS=${GENS:-} DEADLINE_S=${DEADLINE_S:-0} MAX_TRANSACTIONS=${MAX_TRANSACTIONS:-2000000}
SEARCH_S=${SEARCH_S:-10} CONFIRM_S=${CONFIRM_S:-60} START=${START:-2000} FACTOR=${FACTOR:-1.5}
KAMAILIO_START=${KAMAILIO_START:-$START}
SERVERS=${SERVERS:-herald kamailio}
PRECISION=${PRECISION:-0.05} PAUSE=${PAUSE:-3} OVERLOAD=${OVERLOAD:-off}
SPREAD_S=${SPREAD_S:-0} SPREAD_LOAD=${SPREAD_LOAD:-0.9}
OUT=${OUT:-target/bench-scaling.md}
KAMAILIO=${KAMAILIO:-/usr/sbin/kamailio}
HPORT=18620 KPORT=18621
CPUS=$(nproc)

. scripts/lib/preamble.sh
herald_or_build
scratch server_pid
finished=''
on_exit() { # a run stopped early (a lent machine's time limit) still leaves what it measured
    [ -n "$finished" ] || { mkdir -p "$(dirname "$OUT")" && cp "$tmp/report" "$OUT.partial"; } 2>/dev/null || true
}

{
    echo "## Scaling across cores: $(date -u '+%Y-%m-%d %H:%M UTC')"
    echo
    echo "\`PARTS=\"$PARTS\" ROUNDS=$ROUNDS RATE=$RATE SECS=$SECS GEN_ARGS=\"$GEN_ARGS\" NS=\"$NS\" GENS=\"$GENS\" DEADLINE_S=$DEADLINE_S SEARCH_S=$SEARCH_S CONFIRM_S=$CONFIRM_S START=\"$START\" KAMAILIO_START=\"$KAMAILIO_START\" FACTOR=$FACTOR PRECISION=$PRECISION scripts/bench-scaling.sh $HERALD\`"
    echo
    echo "herald $(git rev-parse --short HEAD 2>/dev/null || echo unknown) ($HERALD)."
    echo "Machine: $CPUS CPUs ($(awk -F': ' '/model name/ {print $2; exit}' /proc/cpuinfo)), $(uname -r); load average before: $(cut -d' ' -f1-3 /proc/loadavg)."
} >"$tmp/report"

# cpu_run W: one herald with W workers under RATE calls/s; appends to $tmp/cpu.W and the report
cpu_run() {
    local w=$1 us busy
    WORKERS=$w herald_bench_config "$HPORT" >"$tmp/herald.toml"
    "$HERALD" serve --config "$tmp/herald.toml" >"$tmp/herald.log" 2>&1 &
    server_pid=$!
    wait_bound "$HPORT" "$server_pid"
    thread_ticks "$server_pid" >"$tmp/ticks0"
    # shellcheck disable=SC2086
    "$HERALD" bench calls --proxy "127.0.0.1:$HPORT" --rate "$RATE" --duration "$SECS" --users 100 --quiet \
        --server-pid "$server_pid" --json "$tmp/cpu.json" $GEN_ARGS >"$tmp/cpu.txt" 2>&1 || true
    thread_ticks "$server_pid" >"$tmp/ticks1"
    stop "$server_pid"
    server_pid=''
    us=$(python3 -c "import json,sys
r = json.load(open(sys.argv[1]))
ok = r['attempted'] - r['failed']
print(f\"{r['servers'][0]['cpu_s'] / r['attempted'] * 1e6:.1f} {r['attempted']} {r['failed']}\" if ok > 0 else '0 0 0')" \
        "$tmp/cpu.json" 2>/dev/null || echo "0 0 0")
    # (threads started after the first look count from zero)
    busy=$(awk -v hz="$HZ" 'NR == FNR {t0[$1] = $2; next} $2 - t0[$1] > 0 {
        printf "%s%s %.2f", sep, $1, ($2 - t0[$1]) / hz; sep = ", "}' "$tmp/ticks0" "$tmp/ticks1")
    set -- $us
    echo "$1" >>"$tmp/cpu.$w"
    echo "| $round | $w | $2 | $3 | $1 | $busy |" >>"$tmp/report"
    echo "cpu: round $round, $w worker(s): $1 µs per call" >&2
}

if [[ " $PARTS " == *" cpu "* ]]; then
    {
        echo
        echo "### CPU per call, 1 vs 2 workers at $RATE calls/s ($SECS s windows, ABAB)"
        echo
        echo "| round | workers | calls | failed | server CPU µs per call | threads that worked (CPU s) |"
        echo "| --- | ---: | ---: | ---: | ---: | --- |"
    } >>"$tmp/report"
    for round in $(seq "$ROUNDS"); do
        cpu_run 1
        sleep "$PAUSE"
        cpu_run 2
        sleep "$PAUSE"
    done
    one=$(median <"$tmp/cpu.1")
    two=$(median <"$tmp/cpu.2")
    {
        echo
        echo "Median CPU per call: 1 worker $one µs, 2 workers $two µs; 2/1 = $(awk -v a="$two" -v b="$one" 'BEGIN {if (b > 0) printf "%.2f", a / b; else print "n/a"}') (target <= 1.10)."
    } >>"$tmp/report"
fi

# for_n N DEFAULT SPEC...: the value SPEC gives N - one number for all, or N:VALUE pairs
for_n() {
    local n=$1 value=$2 pair
    shift 2
    for pair in "$@"; do
        case $pair in
        "$n":*) value=${pair#*:} ;;
        *:*) ;;
        *) value=$pair ;;
        esac
    done
    echo "$value"
}

# spread_run N GENS CPUS CAPACITY: the running herald (N workers) at SPREAD_LOAD x CAPACITY for
# SPREAD_S s from the same generators; appends each thread's share of a core to $tmp/steps - a
# receiver near 100% while others idle is SO_REUSEPORT's hash, not the cores, setting the limit
spread_run() {
    local rate
    rate=$(awk -v c="$4" -v l="$SPREAD_LOAD" 'BEGIN {printf "%d", c * l}')
    thread_ticks "$server_pid" >"$tmp/ticks0"
    python3 scripts/lib/multi_capacity.py --herald "$HERALD" --proxy "127.0.0.1:$HPORT" --generators "$2" \
        --cpus "$3" --start "$rate" --max-steps 1 --search-s "$SPREAD_S" --confirm-s 0 --pause 0 \
        --server-pid "$server_pid" >/dev/null 2>"$tmp/spread.log" || true
    thread_ticks "$server_pid" >"$tmp/ticks1"
    {
        echo "- herald, N = $1, threads at $rate calls/s for $SPREAD_S s (share of one core):"
        sed 's/^/      /' "$tmp/spread.log"
        awk -v hz="$HZ" -v s="$SPREAD_S" 'NR == FNR {t0[$1] = $2; next} $2 - t0[$1] > 0 {
            printf "%s%s %.0f%%", sep, $1, 100 * ($2 - t0[$1]) / hz / s; sep = ", "} END {print ""}' \
            "$tmp/ticks0" "$tmp/ticks1" | sed 's/^/      /'
    } >>"$tmp/steps"
}

# capacity_run NAME N: the capacity of the server NAME with N workers/children; echoes it
capacity_run() {
    local name=$1 n=$2 gens cpus mask first shared='' start
    gens=$(for_n "$n" $(((n + 1) / 2)) $GENS)
    if [ "$name" = herald ]; then start=$(for_n "$n" 2000 $START); else start=$(for_n "$n" 2000 $KAMAILIO_START); fi
    first=$n
    if [ $((n + gens)) -gt "$CPUS" ]; then
        first=$((CPUS - gens))
        [ "$first" -lt 0 ] && first=0
        shared=' (shared)'
    fi
    cpus=$(seq -s, "$first" $((first + gens - 1)) | sed 's/,$//')
    if [ "$name" = herald ]; then
        local extra=''
        [ "$OVERLOAD" = on ] || extra=$'[overload]\nenabled = false'
        WORKERS=$n MAX_TRANSACTIONS=$((MAX_TRANSACTIONS * n)) herald_bench_config "$HPORT" "$extra" >"$tmp/herald.toml"
        taskset -c "0-$((n - 1))" "$HERALD" serve --config "$tmp/herald.toml" >"$tmp/herald.log" 2>&1 &
        server_pid=$!
        wait_bound "$HPORT" "$server_pid"
        port=$HPORT
    else
        # Kamailio forks its processes itself: pinning this shell while it starts pins them all.
        mask=$(taskset -p $$ | awk '{print $NF}')
        taskset -p -c "0-$((n - 1))" $$ >/dev/null
        WORKERS=$n start_kamailio_bench "$KPORT"
        taskset -p "$mask" $$ >/dev/null
        wait_bound "$KPORT" "$server_pid"
        sleep 1 # Kamailio forks its children after binding
        port=$KPORT
    fi
    local procs p pids=()
    procs=$(tree "$server_pid" | tr '\n' ' ')
    # each step's log names the server's CPU in cores and the busiest generator's share
    for p in $procs; do pids+=(--server-pid "$p"); done
    python3 scripts/lib/multi_capacity.py --herald "$HERALD" --proxy "127.0.0.1:$port" --generators "$gens" \
        --cpus "$cpus" --start "$start" --factor "$FACTOR" --precision "$PRECISION" --search-s "$SEARCH_S" \
        --confirm-s "$CONFIRM_S" --pause "$PAUSE" --deadline-s "$DEADLINE_S" "${pids[@]}" >"$tmp/cap.$name.$n.json" 2>"$tmp/cap.$name.$n.log" || true
    local found cap cut
    read -r found cap cut < <(python3 -c "import json,sys
try:
    r = json.load(open(sys.argv[1])); print(r['search'], r['capacity'], ' (cut short)' if r.get('cut_short') else '')
except Exception: print(0, 0)" "$tmp/cap.$name.$n.json")
    {
        echo "- $name, N = $n:"
        sed 's/^/      /' "$tmp/cap.$name.$n.log"
        # why a server refused calls, where it says so (Kamailio: "out of memory" at -m too small)
        [ "$name" = herald ] || grep -i -m 3 'error\|memory' "$tmp/kamailio.log" | sed 's/^/      log: /' || true
    } >>"$tmp/steps"
    [ "$name" != herald ] || [ "$SPREAD_S" -le 0 ] || [ "$cap" -le 0 ] || spread_run "$n" "$gens" "$cpus" "$cap"
    [ "$name" = herald ] || kamailio_memory_check >>"$tmp/void" || true
    # shellcheck disable=SC2086
    stop $procs
    server_pid=''
    echo "$cap" >"$tmp/capacity.$name.$n"
    echo "| $n | $name | $gens on CPU $cpus$shared | $found${cut:+ $cut} | $cap |" >>"$tmp/report"
    echo "capacity: $name, N=$n: $cap calls/s (search $found)" >&2
}

if [[ " $PARTS " == *" capacity "* ]]; then
    need_kamailio
    need taskset util-linux
    {
        echo
        echo "### Capacity with N workers (herald) and N children (Kamailio)"
        echo
        echo "Servers pinned to CPUs 0..N-1, generators to their own CPUs; < 0.01% failed calls, ${SEARCH_S} s search steps, ${CONFIRM_S} s confirmation."
        echo
        echo "| N | server | generators | search calls/s | capacity calls/s |"
        echo "| ---: | --- | --- | ---: | ---: |"
    } >>"$tmp/report"
    ran=()
    for n in $NS; do
        if [ "$n" -gt "$CPUS" ]; then
            echo "N=$n: more than the $CPUS CPUs here, skipped" >&2
            continue
        fi
        for server in $SERVERS; do
            capacity_run "$server" "$n"
            sleep "$PAUSE"
        done
        ran+=("$n")
    done
    {
        echo
        echo "| N | herald calls/s | speed-up | Kamailio calls/s | speed-up | herald/Kamailio |"
        echo "| ---: | ---: | ---: | ---: | ---: | ---: |"
        h1=$(cat "$tmp/capacity.herald.${ran[0]}" 2>/dev/null || echo 0)
        k1=$(cat "$tmp/capacity.kamailio.${ran[0]}" 2>/dev/null || echo 0)
        for n in "${ran[@]}"; do
            h=$(cat "$tmp/capacity.herald.$n" 2>/dev/null || echo 0) # 0: not in SERVERS
            k=$(cat "$tmp/capacity.kamailio.$n" 2>/dev/null || echo 0)
            awk -v n="$n" -v h="$h" -v k="$k" -v h1="$h1" -v k1="$k1" 'BEGIN {
                printf "| %d | %d | %s | %d | %s | %s |\n", n, h, (h1 > 0 ? sprintf("%.2f", h / h1) : "n/a"),
                    k, (k1 > 0 ? sprintf("%.2f", k / k1) : "n/a"), (k > 0 ? sprintf("%.2f", h / k) : "n/a")}'
        done
        echo
        echo "Speed-up is over N = ${ran[0]}; target >= 0.9 N."
    } >>"$tmp/report"
fi

if [ -s "$tmp/steps" ]; then
    { echo; echo "Search steps (offered rate x window: summed over the generators):"; echo; cat "$tmp/steps"; } >>"$tmp/report"
fi
kamailio_void_note
echo "Load average after: $(cut -d' ' -f1-3 /proc/loadavg)." >>"$tmp/report"
mkdir -p "$(dirname "$OUT")"
cp "$tmp/report" "$OUT"
finished=1
cat "$OUT"
