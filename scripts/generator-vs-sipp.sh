#!/usr/bin/env bash
# The load generator against SIPp, in one run against the same proxy (issue 21, item 6: `herald
# bench` should sustain >= 5x SIPp's call rate per CPU-second).
#
# A: `herald bench calls` (caller and callee in one process; uniform arrivals by default, as
#    SIPp's -r places them).
# B: SIPp's caller + callee (tests/sipp/uac.xml + uas.xml; the uas REGISTERed first), same rate,
#    same number of calls, same scenario shape (INVITE, 100, 180, 200, ACK, BYE, 200).
# Both go through one `herald serve` (WORKERS workers; pinned to PROXY_CPU and the generators to
# GEN_CPU when PIN=1, so the generator's CPU is not mixed with the proxy's scheduling).
#
# 1. CPU (PARTS contains cpu), at each of RATES calls/s for DURATION s: RUNS rounds of A then B
#    (ABAB...). CPU of the generator processes:
#    herald bench's and SIPp uac's whole-process user + system time (getrusage of the child, as
#    bash's `time` reports it: start-up included for both), plus the SIPp uas's CPU during the uac
#    run (/proc/PID/schedstat, ns; the uas is started and REGISTERed before each SIPp round and
#    stopped after it, so that it does not share herald bench's CPU in herald bench's rounds). Per call = CPU / successful calls; calls per CPU-second is its
#    inverse, the rate the target names. Medians of the rounds and the median of the per-round
#    ratios. Then `herald bench floor`: what the kernel alone charges for a generator's datagrams
#    per call (6 sent, 7 received), which no generator gets below. Before the rounds, SIPp's idle
#    cost: a uas with no calls still wakes about every millisecond (its 1-ms poll), CPU that is
#    spread over the calls, so SIPp's CPU per call falls as the rate rises; herald bench's loop
#    sleeps until its next timer or datagram (no idle wake-ups).
# 2. Instructions (PARTS contains instructions): user-space instructions per call under callgrind
#    (deterministic; valgrind counts no kernel work), each generator placing CG_LOW_S and then
#    CG_HIGH_S seconds of calls at each of CG_RATES calls/s (uniform arrivals); per call = (count
#    at high - count at low) / (calls at high - calls at low), which cancels start-up and shutdown, as
#    scripts/instructions-ab.sh does. The SIPp uas runs under callgrind for both of its runs; its
#    count is read with callgrind_control before and after each uac run. The proxy is not counted.
#
# Usage: scripts/generator-vs-sipp.sh   RATES="100 300 1000" DURATION=20 RUNS=3 WORKERS=1 USERS=10 PIN=1
#        PROXY_CPU=0 GEN_CPU=1 QUANTUM_US= ARRIVALS=uniform PARTS="cpu instructions"
#        CG_RATES="50 200" CG_LOW_S=4 CG_HIGH_S=20 HERALD=target/release/herald OUT=target/generator-vs-sipp
#        BASE_PORT=17660
# (HERALD unset: builds the release binary; QUANTUM_US unset: herald bench's default quantum,
# 10 ms.) Ports: 127.0.0.1:BASE_PORT..+39 (17660). Needs sipp (and valgrind for the instructions part).
set -euo pipefail
cd "$(dirname "$0")/.."

RATES=${RATES:-100 300 1000}
DURATION=${DURATION:-20}
RUNS=${RUNS:-3}
WORKERS=${WORKERS:-1}
USERS=${USERS:-10}
PIN=${PIN:-1}
PROXY_CPU=${PROXY_CPU:-0}
GEN_CPU=${GEN_CPU:-1}
QUANTUM_US=${QUANTUM_US:-}
ARRIVALS=${ARRIVALS:-uniform}
PARTS=${PARTS:-cpu instructions}
CG_RATES=${CG_RATES:-50 200}
CG_LOW_S=${CG_LOW_S:-4}
CG_HIGH_S=${CG_HIGH_S:-20}
OUT=${OUT:-target/generator-vs-sipp}
BASE_PORT=${BASE_PORT:-17660}
HPORT=$BASE_PORT UAS_PORT=$((BASE_PORT + 10)) REG_PORT=$((BASE_PORT + 20)) UAC_PORT=$((BASE_PORT + 30))

command -v sipp >/dev/null || { echo "sipp not found (apt-get install sip-tester)" >&2; exit 2; }
if [ -z "${HERALD:-}" ]; then
    cargo build --release -j2 --bin herald >&2
    HERALD=target/release/herald
fi
HZ=$(getconf CLK_TCK)
mkdir -p "$OUT"
tmp=$(mktemp -d)
server_pid='' uas_pid=''
# shellcheck source=scripts/lib/procs.sh
. scripts/lib/procs.sh
trap 'stop "$uas_pid" "$server_pid"; rm -rf "$tmp"' EXIT
trap 'exit 130' INT TERM

proxy_pin='' gen_pin=''
if [ "$PIN" = 1 ] && [ "$(nproc)" -ge 2 ]; then
    proxy_pin="taskset -c $PROXY_CPU"
    gen_pin="taskset -c $GEN_CPU"
fi

start_proxy() {
    herald_bench_config "$HPORT" >"$tmp/herald.toml"
    $proxy_pin "$HERALD" serve --config "$tmp/herald.toml" >"$tmp/herald.log" 2>&1 &
    server_pid=$!
    wait_bound "$HPORT" "$server_pid"
}

stop_proxy() {
    stop "$server_pid"
    server_pid=''
}

# SIPp's callee, REGISTERed as bob at the proxy (the uac calls bob). $1: a command prefix
# (valgrind for the instructions part).
start_uas() {
    # shellcheck disable=SC2086
    $gen_pin ${1:-} sipp -sf tests/sipp/uas.xml -i 127.0.0.1 -p $UAS_PORT -cp $((UAS_PORT + 1)) \
        -mp $((UAS_PORT + 2)) -nostdin >/dev/null 2>"$tmp/uas.log" &
    uas_pid=$!
    wait_bound $UAS_PORT $uas_pid
    sipp "127.0.0.1:$HPORT" -sf tests/sipp/register.xml -s bob -key contact_host 127.0.0.1 \
        -key contact_port $UAS_PORT -i 127.0.0.1 -p $REG_PORT -cp $((REG_PORT + 1)) -mp $((REG_PORT + 2)) \
        -m 1 -timeout 10s -nostdin >/dev/null 2>"$tmp/register.log" || { echo "SIPp REGISTER failed" >&2; exit 1; }
}

stop_uas() {
    stop "$uas_pid"
    uas_pid=''
}

# The uac placing CALLS calls at RATE' calls/s ($1 $2); $3: command prefix. Nothing else runs in
# it (it is what `timed` measures); sipp_ok reads the calls that succeeded.
sipp_uac() {
    local calls=$1 rate=$2
    rm -f "$tmp/sipp-stat.csv"
    # shellcheck disable=SC2086
    $gen_pin ${3:-} sipp "127.0.0.1:$HPORT" -sf tests/sipp/uac.xml -s bob -i 127.0.0.1 -p $UAC_PORT \
        -cp $((UAC_PORT + 1)) -mp $((UAC_PORT + 2)) -r "$rate" -m "$calls" -l $((rate * 10)) \
        -timeout $((calls / rate + 40))s -nostdin -trace_stat -stf "$tmp/sipp-stat.csv" -fd 3600 \
        >/dev/null 2>"$tmp/uac.log" || true
}
sipp_ok() { # successful calls of the last uac run (its final statistics line)
    awk -F';' 'NR == 1 {for (i = 1; i <= NF; i++) if ($i == "SuccessfulCall(C)") n = i} NF > 1 {v = $n} END {print v + 0}' \
        "$tmp/sipp-stat.csv"
}

# herald bench placing CALLS calls at RATE' ($1 $2) with ARRIVALS' ($3); $4: command prefix;
# herald_ok reads the calls that succeeded.
herald_calls() {
    local calls=$1 rate=$2
    rm -f "$tmp/r.json"
    # shellcheck disable=SC2086
    $gen_pin ${4:-} "$HERALD" bench calls --proxy "127.0.0.1:$HPORT" --rate "$rate" \
        --duration $((calls / rate)) --users "$USERS" --arrivals "$3" ${QUANTUM_US:+--quantum-us "$QUANTUM_US"} --seed 1 \
        --quiet --max-failure 1 --json "$tmp/r.json" >/dev/null 2>"$tmp/bench.log" || true
}
herald_ok() { python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['succeeded'])" "$tmp/r.json"; }

schedstat_ns() { # PID: CPU time of all its threads, ns (exact, unlike /proc/PID/stat's ticks)
    cat /proc/"$1"/task/*/schedstat | awk '{t += $1} END {printf "%d", t}'
}

timed() { # FILE COMMAND...: runs COMMAND, its user + system seconds (getrusage of the waited-for
    # children, as bash's `time` reports them) into FILE
    local file=$1 TIMEFORMAT='%3U %3S'
    shift
    { time "$@"; } 2>"$file.time"
    awk '{printf "%.3f\n", $1 + $2}' "$file.time" >"$file"
}

median() { sort -g | awk '{v[NR] = $1} END {if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }

summary="$OUT/summary.md"
{
    echo "## herald bench vs SIPp: generator cost per call ($(date -u '+%Y-%m-%d %H:%M UTC'))"
    echo
    echo "\`RATES=\"$RATES\" DURATION=$DURATION RUNS=$RUNS WORKERS=$WORKERS USERS=$USERS PIN=$PIN QUANTUM_US=$QUANTUM_US" \
        "ARRIVALS=$ARRIVALS PARTS=\"$PARTS\" CG_RATES=\"$CG_RATES\" CG_LOW_S=$CG_LOW_S CG_HIGH_S=$CG_HIGH_S scripts/generator-vs-sipp.sh\`;" \
        "$(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg) at the start"
} | tee "$summary"

cpu_at() { # RATE: the rounds at one rate, their table and medians
    local RATE=$1 calls=$(($1 * DURATION)) round hok sok hcpu scpu u0 u1 h_med s_med r_med
    : >"$tmp/rounds"
    for round in $(seq "$RUNS"); do
        timed "$tmp/hcpu" herald_calls "$calls" "$RATE" "$ARRIVALS"
        hok=$(herald_ok)
        # SIPp's callee runs only for SIPp's rounds: idle, it still wakes (~2% of a CPU here),
        # on the CPU herald bench has during its rounds.
        start_uas
        u0=$(schedstat_ns "$uas_pid")
        timed "$tmp/scpu" sipp_uac "$calls" "$RATE"
        u1=$(schedstat_ns "$uas_pid")
        stop_uas
        sok=$(sipp_ok)
        read -r hcpu <"$tmp/hcpu"
        read -r scpu <"$tmp/scpu"
        scpu=$(awk -v c="$scpu" -v d=$((u1 - u0)) 'BEGIN {printf "%.3f", c + d / 1e9}')
        echo "$RATE/s round $round: herald bench $hok calls $hcpu s, SIPp $sok calls $scpu s" >&2
        echo "$round $hok $hcpu $sok $scpu" >>"$tmp/rounds"
    done
    cp "$tmp/rounds" "$OUT/cpu-rounds-$RATE.txt"
    h_med=$(awk '{print $3 / $2 * 1e6}' "$tmp/rounds" | median)
    s_med=$(awk '{print $5 / $4 * 1e6}' "$tmp/rounds" | median)
    r_med=$(awk '{print ($5 / $4) / ($3 / $2)}' "$tmp/rounds" | median)
    {
        echo
        echo "### CPU per call at $RATE calls/s, $DURATION s, $RUNS rounds (herald bench, then SIPp)"
        echo
        echo "| round | herald bench calls ok | CPU s | µs per call | calls per CPU-s | SIPp uac+uas calls ok | CPU s | µs per call | calls per CPU-s | SIPp / herald bench |"
        echo "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
        awk '{h = $3 / $2 * 1e6; s = $5 / $4 * 1e6
              printf "| %d | %d | %.2f | %.1f | %.0f | %d | %.2f | %.1f | %.0f | **%.2fx** |\n", $1, $2, $3, h, 1e6 / h, $4, $5, s, 1e6 / s, s / h}' \
            "$tmp/rounds"
        echo
        awk -v h="$h_med" -v s="$s_med" -v r="$r_med" 'BEGIN {
            printf "Medians: herald bench %.1f µs per call (%.0f calls per CPU-second), SIPp %.1f µs (%.0f calls per CPU-second);\n", h, 1e6 / h, s, 1e6 / s
            printf "median of the rounds'"'"' ratios: **herald bench sustains %.2fx SIPp'"'"'s call rate per CPU-second** (target >= 5x).\n", r }'
    } | tee -a "$summary"
    echo "$RATE $h_med $s_med $r_med" >>"$tmp/medians"
}

if [[ " $PARTS " == *" cpu "* ]]; then
    start_proxy
    start_uas
    u0=$(schedstat_ns "$uas_pid")
    sleep 5
    u1=$(schedstat_ns "$uas_pid")
    stop_uas
    idle_ms=$(awk -v d=$((u1 - u0)) 'BEGIN {printf "%.1f", d / 1e6 / 5}')
    {
        echo
        echo "SIPp's idle cost: its uas with no calls used $idle_ms ms of CPU per second (the uac runs the same loop):" \
            "2 x $idle_ms ms per second spread over the calls, $(awk -v i="$idle_ms" -v r="${RATES%% *}" 'BEGIN {printf "%.0f", 2 * i * 1000 / r}') µs per call at ${RATES%% *} calls/s."
    } | tee -a "$summary"
    : >"$tmp/medians"
    for rate in $RATES; do
        cpu_at "$rate"
    done
    stop_proxy
    floor_of generator_floor_us >"$tmp/floor.txt"
    floor_us=$(tail -n 1 "$tmp/floor.txt")
    {
        echo
        echo "\`herald bench floor\` (what the kernel charges for the datagrams alone: a generator's 6 sends, each to a sleeping reader, and 7 batched receives per call, no wake-ups of its own):"
        echo
        sed '$d' "$tmp/floor.txt"
        echo
        echo "| calls/s | herald bench µs per call | SIPp µs per call | SIPp / herald bench | generator floor µs | SIPp / floor: the most any generator could reach by CPU time |"
        echo "| ---: | ---: | ---: | ---: | ---: | ---: |"
        awk -v f="$floor_us" '{printf "| %d | %.1f | %.1f | **%.2fx** | %.1f | %.2fx |\n", $1, $2, $3, $4, f, $3 / f}' "$tmp/medians"
    } | tee -a "$summary"
fi

if [[ " $PARTS " == *" instructions "* ]]; then
    command -v valgrind >/dev/null || { echo "valgrind not found (apt-get install valgrind)" >&2; exit 2; }
    CG="valgrind --tool=callgrind --callgrind-out-file=$tmp/cg.%p.out"
    collected() { awk '/^summary:|^totals:/ {print $2; exit}' "$1"; }
    uas_ir() { # instructions the uas under callgrind executed so far
        callgrind_control -e Ir "$uas_pid" 2>/dev/null | awk '/Ir/ {gsub(/[^0-9]/, "", $NF); v = $NF} END {print v + 0}'
    }
    herald_count() { # CALLS -> "instructions calls"
        rm -f "$tmp"/cg.*.out
        herald_calls "$1" "$CG_RATE" uniform "$CG"
        echo "$(collected "$(ls "$tmp"/cg.*.out)") $(herald_ok)"
    }
    sipp_count() { # CALLS -> "instructions calls" (uac whole run + uas during it)
        rm -f "$tmp"/cg.*.out
        local before after
        before=$(uas_ir)
        sipp_uac "$1" "$CG_RATE" "$CG"
        after=$(uas_ir)
        echo "$(($(collected "$(ls "$tmp"/cg.*.out)") + after - before)) $(sipp_ok)"
    }
    instructions_at() { # RATE: both generators at LOW_S and HIGH_S seconds of calls
        local CG_RATE=$1 low=$(($1 * CG_LOW_S)) high=$(($1 * CG_HIGH_S)) h_low h_nl h_high h_nh s_low s_nl s_high s_nh n
        read -r h_low h_nl < <(herald_count "$low")
        read -r h_high h_nh < <(herald_count "$high")
        start_uas "$CG"
        read -r s_low s_nl < <(sipp_count "$low")
        read -r s_high s_nh < <(sipp_count "$high")
        stop_uas
        for n in "$h_nl:$low" "$h_nh:$high" "$s_nl:$low" "$s_nh:$high"; do
            [ "${n%:*}" -ge $((${n#*:} - 1)) ] || echo "warning: ${n%:*} of ${n#*:} calls succeeded under callgrind" >&2
        done
        {
            echo
            echo "### User-space instructions per call at $CG_RATE calls/s (callgrind: $low and $high calls, difference)"
            echo
            echo "| generator | instructions, $low calls | $high calls | per call |"
            echo "| --- | ---: | ---: | ---: |"
            awk -v l="$h_low" -v h="$h_high" -v nl="$h_nl" -v nh="$h_nh" \
                'BEGIN {printf "| herald bench calls | %d | %d | %.0f |\n", l, h, (h - l) / (nh - nl)}'
            awk -v l="$s_low" -v h="$s_high" -v nl="$s_nl" -v nh="$s_nh" \
                'BEGIN {printf "| SIPp uac + uas | %d | %d | %.0f |\n", l, h, (h - l) / (nh - nl)}'
            awk -v hl="$h_low" -v hh="$h_high" -v hnl="$h_nl" -v hnh="$h_nh" -v sl="$s_low" -v sh="$s_high" -v snl="$s_nl" -v snh="$s_nh" \
                'BEGIN {h = (hh - hl) / (hnh - hnl); s = (sh - sl) / (snh - snl)
                        printf "\nSIPp / herald bench instructions per call at %d calls/s: **%.2fx** (target >= 5x)\n", '"$CG_RATE"', s / h}'
        } | tee -a "$summary"
    }
    start_proxy
    for rate in $CG_RATES; do
        instructions_at "$rate"
    done
    stop_proxy
fi
