#!/usr/bin/env bash
# What an idle herald costs (issue 21, "idle is idle"): system calls per second (perf stat,
# raw_syscalls:sys_enter over all threads) and user-space instructions per second (callgrind,
# counted between a zeroing and a dump taken SECONDS apart, so start-up is not in it), for the
# embedded default configuration (`herald serve`, no --config) and for the benchmark one
# (scripts/lib/procs.sh herald_bench_config) after REGISTERS registrations.
#
# Each herald runs in a private network namespace (unshare -n: root), so the default config's
# port 5060 is free, in a scratch directory (its location database). Needs perf, valgrind and
# python3 (the registrations are sent by a few lines of Python over UDP).
#
# Usage: scripts/idle-cost.sh [HERALD] [SECONDS]   (default target/release/herald, 10 s)
# Output: one line per case: `CONFIG syscalls_per_s N instructions_per_s N`.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib/preamble.sh
HERALD=$(realpath "${1:-target/release/herald}")
SECONDS_IDLE=${2:-10}
REGISTERS=${REGISTERS:-200}
WORKERS=${WORKERS:-2}
scratch
herald_bench_config 5060 >"$tmp/bench.toml"
cat >"$tmp/register.py" <<'PY'
import socket, sys, time
n = int(sys.argv[1])
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.bind(("127.0.0.1", 0)); s.settimeout(2)
port = s.getsockname()[1]
for i in range(n):
    m = (f"REGISTER sip:127.0.0.1 SIP/2.0\r\nVia: SIP/2.0/UDP 127.0.0.1:{port};branch=z9hG4bKidle{i}\r\n"
         f"Max-Forwards: 70\r\nFrom: <sip:u{i}@127.0.0.1>;tag=t{i}\r\nTo: <sip:u{i}@127.0.0.1>\r\n"
         f"Call-ID: idle-{i}-{time.time_ns()}\r\nCSeq: 1 REGISTER\r\nContact: <sip:u{i}@127.0.0.1:{port}>\r\n"
         f"Expires: 3600\r\nContent-Length: 0\r\n\r\n")
    s.sendto(m.encode(), ("127.0.0.1", 5060))
    try: s.recv(4000)
    except socket.timeout: sys.exit(f"REGISTER {i} not answered")
PY

# measure NAME CONFIG|- REGISTERS
measure() {
    local name=$1 cfg=$2 regs=$3 dir="$tmp/$1"
    mkdir -p "$dir/perf" "$dir/cg"
    local config_args=""
    [ "$cfg" != - ] && config_args="--config $cfg"
    # System calls: the real binary, perf counting every thread.
    unshare -n bash -c "
        ip link set lo up; cd '$dir/perf'
        '$HERALD' serve $config_args >serve.log 2>&1 & pid=\$!
        sleep 2; [ $regs -gt 0 ] && python3 '$tmp/register.py' $regs; sleep 1
        perf stat -e raw_syscalls:sys_enter -p \$pid -o perf.txt -- sleep $SECONDS_IDLE
        kill -INT \$pid; wait \$pid || true"
    local calls
    calls=$(awk '/raw_syscalls/ {gsub(",", "", $1); print ($1 ~ /^[0-9]+$/) ? $1 : 0}' "$dir/perf/perf.txt")
    # Instructions: under callgrind, zeroed after start-up (and the registrations), dumped later.
    unshare -n bash -c "
        ip link set lo up; cd '$dir/cg'
        valgrind --tool=callgrind --callgrind-out-file=cg.out '$HERALD' serve $config_args >serve.log 2>&1 & pid=\$!
        sleep 5; [ $regs -gt 0 ] && python3 '$tmp/register.py' $regs; sleep 3
        callgrind_control -z \$pid >/dev/null 2>&1
        sleep $SECONDS_IDLE
        callgrind_control -d idle \$pid >/dev/null 2>&1
        kill -INT \$pid; wait \$pid || true"
    local ir
    ir=$(awk '/^(summary|totals):/ {print $2; exit}' "$dir/cg/cg.out.1")
    echo "$name syscalls_per_s $(awk -v c="$calls" -v s="$SECONDS_IDLE" 'BEGIN {printf "%.1f", c / s}')" \
        "instructions_per_s $(awk -v c="$ir" -v s="$SECONDS_IDLE" 'BEGIN {printf "%.0f", c / s}')"
}

measure default - 0
measure bench "$tmp/bench.toml" 0
measure "bench+${REGISTERS}registrations" "$tmp/bench.toml" "$REGISTERS"
