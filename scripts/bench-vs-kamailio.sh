#!/usr/bin/env bash
# The same SIPp load against herald and then against Kamailio 5.6, in one run.
#
# For each server: start it on 127.0.0.1 (herald: release build, generated config; Kamailio:
# bench/kamailio-bench.cfg with the TLSF allocator, -x tlsf -X tlsf), start a SIPp callee
# (tests/sipp/uas.xml), register it once (tests/sipp/register.xml, third-party REGISTER), then
# run tests/sipp/uac.xml at RATE calls/s for DURATION s (UDP; INVITE, ACK, HOLD_MS pause, BYE;
# the server record-routes, so ACK and BYE cross it too). Both servers do the same job:
# transaction-stateful proxy, Record-Route, registrar lookup, UDP only, WORKERS workers
# (herald `server.workers` = Kamailio `children`).
#
# Reported per server:
#   calls ok/failed   SIPp statistics file (SuccessfulCall(C), FailedCall(C)); "(N late 180)":
#                     N of them were aborted by SIPp because a 180 arrived after the 200 (the
#                     scenario does not expect one), counted from SIPp's error log; retrans =
#                     SIPp's Retransmissions(C)
#   CPU s, per 1000   utime+stime from /proc/PID/stat of every server process (Kamailio: main
#                     and all children), read before and after the load; divided by successful
#                     calls
#   peak PSS          peak over 1 s samples of the sum of Pss (smaps_rollup) over the server's
#                     processes: shared memory (Kamailio's shm) counted once
#   sum VmHWM         sum of each process's VmHWM at the end (counts Kamailio's shm once per
#                     process that touched it, so it overstates Kamailio)
#   SIPp CPU s        utime+stime of the caller and the callee SIPp during the load
#   others CPU s      CPU the rest of the machine used during the load (root cgroup cpuacct or
#                     /proc/stat, minus the server and SIPp): the noise from other processes
#
# Then `herald bench floor`: what the kernel charges for the 7 datagrams a proxy sends and the 6
# it receives per call, with nothing else done; its ratio to Kamailio's median CPU per call is the
# lowest herald/Kamailio ratio any proxy could reach on this machine.
#
# Usage: scripts/bench-vs-kamailio.sh    RATE=500 DURATION=20 WORKERS=2 HOLD_MS=100 RUNS=1
#        OUT=target/bench-vs-kamailio.md
# Ports: 127.0.0.1:17500-17549. Needs sipp and kamailio (scripts/test.sh installs both).
set -euo pipefail
cd "$(dirname "$0")/.."

RATE=${RATE:-500}
DURATION=${DURATION:-20}
WORKERS=${WORKERS:-2}
HOLD_MS=${HOLD_MS:-100}
RUNS=${RUNS:-1}
OUT=${OUT:-target/bench-vs-kamailio.md}
KAMAILIO=${KAMAILIO:-/usr/sbin/kamailio}
KPORT=17500 HPORT=17501 UAS_PORT=17510 REG_PORT=17520 UAC_PORT=17530

. scripts/lib/preamble.sh
need sipp "apt-get install sip-tester"
need_kamailio
build_herald
CALLS=$((RATE * DURATION))

scratch server_pid uas_pid sampler_pid

kb_sum() { # FIELD FILE PID...: sum of a kB field over /proc/PID/FILE
    local field=$1 file=$2 p t=0
    shift 2
    for p in "$@"; do
        t=$((t + $(awk -v f="$field:" '$1 == f {print $2}' "/proc/$p/$file" 2>/dev/null || echo 0)))
    done
    echo $t
}
ticks_s() { awk -v t="$1" -v hz="$HZ" 'BEGIN {printf "%.2f", t / hz}'; }
mib() { awk -v k="$1" 'BEGIN {printf "%.1f", k / 1024}'; }
stat_col() { # FILE COLUMN: value in the last line of a SIPp statistics file
    awk -F';' -v c="$2" 'NR == 1 {for (i = 1; i <= NF; i++) if ($i == c) n = i} NF > 1 {v = $n} END {print v + 0}' "$1"
}

# bench NAME: one server under load; appends a table row to $tmp/rows and the CPU per call to
# $tmp/cpu.NAME
bench() {
    local name=$1 port
    if [ "$name" = herald ]; then
        port=$HPORT
        herald_bench_config "$HPORT" >"$tmp/herald.toml"
        "$HERALD" serve --config "$tmp/herald.toml" >"$tmp/herald.log" 2>&1 &
        server_pid=$!
    else
        port=$KPORT
        start_kamailio_bench "$KPORT"
    fi
    wait_bound "$port" "$server_pid"
    sleep 1 # Kamailio forks its children after binding
    local pids
    mapfile -t pids < <(tree "$server_pid")

    sipp -sf tests/sipp/uas.xml -i 127.0.0.1 -p $UAS_PORT -cp $((UAS_PORT + 1)) -mp $((UAS_PORT + 2)) \
        -nostdin >/dev/null 2>"$tmp/uas.log" &
    uas_pid=$!
    wait_bound $UAS_PORT $uas_pid
    sipp "127.0.0.1:$port" -sf tests/sipp/register.xml -s bob -key contact_host 127.0.0.1 \
        -key contact_port $UAS_PORT -i 127.0.0.1 -p $REG_PORT -cp $((REG_PORT + 1)) -mp $((REG_PORT + 2)) \
        -m 1 -timeout 10s -nostdin >/dev/null 2>"$tmp/register.log" ||
        { echo "$name: REGISTER failed" >&2; exit 1; }

    # Peak of the summed PSS, sampled once a second.
    (
        peak=0
        while :; do
            v=$(kb_sum Pss smaps_rollup "${pids[@]}")
            [ "$v" -gt "$peak" ] && peak=$v && echo $peak >"$tmp/pss.$name"
            sleep 1
        done
    ) &
    sampler_pid=$!

    local s0 u0 b0 uac_cpu
    s0=$(cpu_ticks "${pids[@]}")
    u0=$(cpu_ticks $uas_pid)
    b0=$(busy_ticks)
    local TIMEFORMAT='%U %S'
    { time sipp "127.0.0.1:$port" -sf tests/sipp/uac.xml -s bob -i 127.0.0.1 -p $UAC_PORT \
        -cp $((UAC_PORT + 1)) -mp $((UAC_PORT + 2)) -r "$RATE" -m "$CALLS" -l $((RATE * 10)) -d "$HOLD_MS" \
        -timeout $((DURATION + 40))s -nostdin -trace_stat -stf "$tmp/stat.$name.csv" -fd 1 \
        -trace_err -error_file "$tmp/err.$name.log" \
        >/dev/null 2>"$tmp/uac.$name.log" || true; } 2>"$tmp/time.$name"
    local s1 u1 b1
    s1=$(cpu_ticks "${pids[@]}")
    u1=$(cpu_ticks $uas_pid)
    b1=$(busy_ticks)
    uac_cpu=$(awk '{print ($1 + $2)}' "$tmp/time.$name")
    local hwm
    hwm=$(kb_sum VmHWM status "${pids[@]}")
    stop "$sampler_pid"
    sampler_pid=''
    stop $uas_pid
    uas_pid=''
    # shellcheck disable=SC2068
    stop ${pids[@]}
    server_pid=''
    [ "$name" = herald ] || kamailio_memory_check >>"$tmp/void" || true

    local ok failed retrans server_t sipp_s others_s per1000 procs
    ok=$(stat_col "$tmp/stat.$name.csv" 'SuccessfulCall(C)')
    failed=$(stat_col "$tmp/stat.$name.csv" 'FailedCall(C)')
    retrans=$(stat_col "$tmp/stat.$name.csv" 'Retransmissions(C)')
    # A 180 forwarded after the 200 (UDP workers relaying responses of one call in parallel)
    # aborts a SIPp call as an unexpected message although the call was set up.
    late180=$(grep -c "Aborting call on unexpected message.*received 'SIP/2.0 180" "$tmp/err.$name.log" 2>/dev/null || true)
    [ "${late180:-0}" -gt 0 ] && failed="$failed ($late180 late 180)"
    server_t=$((s1 - s0))
    sipp_s=$(awk -v t=$((u1 - u0)) -v hz="$HZ" -v c="$uac_cpu" 'BEGIN {printf "%.2f", t / hz + c}')
    others_s=$(awk -v b=$((b1 - b0)) -v s=$server_t -v hz="$HZ" -v p="$sipp_s" \
        'BEGIN {o = (b - s) / hz - p; if (o < 0) o = 0; printf "%.2f", o}')
    per1000=$(awk -v t=$server_t -v hz="$HZ" -v ok="$ok" 'BEGIN {if (ok > 0) printf "%.3f", t / hz / ok * 1000; else print "n/a"}')
    procs=${#pids[@]}
    echo "$per1000" >"$tmp/cpu.$name"
    printf '| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n' "$name" "$CALLS" "$ok" "$failed" \
        "$retrans" "$(ticks_s $server_t)" "$per1000" "$(mib "$(cat "$tmp/pss.$name" 2>/dev/null || echo 0)")" \
        "$(mib "$hwm")" "$procs" "$sipp_s" "$others_s" >>"$tmp/rows"
}

kamailio_version=$("$KAMAILIO" -v | awk 'NR == 1 {print $2, $3}')
herald_rev=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
git diff --quiet HEAD -- crates src 2>/dev/null || herald_rev="$herald_rev+dirty"
{
    echo "## herald vs Kamailio: $(date -u '+%Y-%m-%d %H:%M UTC')"
    echo
    echo "\`RATE=$RATE DURATION=$DURATION WORKERS=$WORKERS HOLD_MS=$HOLD_MS RUNS=$RUNS scripts/bench-vs-kamailio.sh\`"
    echo
    echo "herald $herald_rev (release), $kamailio_version (-x tlsf -X tlsf -m 1024 -M 16), $(sipp -v 2>&1 | awk '/SIPp v/ {sub(/\.$/, "", $2); print $2}')."
    echo "Machine: $(nproc) CPUs ($(awk -F': ' '/model name/ {print $2; exit}' /proc/cpuinfo)), $(uname -r);" \
        "load average before: $(cut -d' ' -f1-3 /proc/loadavg)."
} >"$tmp/report"

ratios=()
for run in $(seq "$RUNS"); do
    : >"$tmp/rows"
    bench herald
    sleep 2
    bench kamailio
    load=$(cut -d' ' -f1-3 /proc/loadavg)
    ratio=$(awk -v h="$(cat "$tmp/cpu.herald")" -v k="$(cat "$tmp/cpu.kamailio")" \
        'BEGIN {if (k + 0 > 0 && h + 0 > 0) printf "%.2f", h / k; else print "n/a"}')
    ratios+=("$ratio")
    {
        echo
        echo "### run $run of $RUNS (load average after: $load)"
        echo
        echo "| server | calls | ok | failed | retrans | server CPU s | CPU s / 1000 calls | peak PSS MiB | sum VmHWM MiB | procs | SIPp CPU s | others CPU s |"
        echo "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
        cat "$tmp/rows"
        echo
        echo "herald/Kamailio CPU per call: $ratio"
    } >>"$tmp/report"
    [ "$run" -lt "$RUNS" ] && sleep 2
done
if [ "$RUNS" -gt 1 ]; then
    median=$(printf '%s\n' "${ratios[@]}" | grep -v n/a | sort -g | awk '{v[NR] = $1} END {
        if (NR == 0) print "n/a"; else if (NR % 2) print v[(NR + 1) / 2]; else printf "%.2f", (v[NR / 2] + v[NR / 2 + 1]) / 2}')
    { echo; echo "Median herald/Kamailio CPU per call over $RUNS runs: $median (runs: ${ratios[*]})"; } >>"$tmp/report"
fi
kmedian=$(awk -F'|' '$2 ~ /kamailio/ {print $8 + 0}' "$tmp/report" | sort -g |
    awk '{v[NR] = $1} END {if (NR == 0) print 0; else if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2}')
floor_of proxy_floor_us >"$tmp/floor.txt"
floor_us=$(tail -n 1 "$tmp/floor.txt")
{
    echo
    echo "### The floor: \`herald bench floor\` (kernel CPU for the datagrams alone)"
    echo
    sed '$d' "$tmp/floor.txt"
    echo
    awk -v f="$floor_us" -v k="$kmedian" 'BEGIN {if (k > 0) printf "Proxy floor / Kamailio median CPU per call: %.1f µs / %.1f µs = %.2f\n", f, k * 1000, f / (k * 1000)}'
} >>"$tmp/report"
kamailio_void_note
mkdir -p "$(dirname "$OUT")"
cp "$tmp/report" "$OUT"
cat "$OUT"
echo >&2
echo "written to $OUT" >&2
