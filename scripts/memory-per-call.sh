#!/usr/bin/env bash
# Memory herald holds per call: the transactions that absorb retransmissions for 32 s after a
# call ends (RFC 3261 Timer J, RFC 6026 Timers L and M) are all still held right after a short
# run. `herald serve` with the bench config (scripts/lib/procs.sh herald_bench_config, WORKERS
# workers) takes `herald bench calls --rate RATE --duration SECS`; then:
#
# * rss: herald's VmRSS growth from before the load to its end, per call attempted. What the
#   allocator took from the kernel and touched: with mimalloc (herald's allocator since issue
#   21) this is the one figure comparable across allocators.
# * mimalloc: its own statistics at exit (MIMALLOC_SHOW_STATS=1), the peak committed memory.
# * heaptrack (HEAPTRACK=1): the peak heap heaptrack saw, per call, after FIXED_MB of buffers
#   allocated before any call (session 8's method, docs/benchmarks.md). heaptrack sees only
#   what goes through malloc: with mimalloc as the global allocator that is almost nothing, so
#   this is for a build with the system allocator.
#
# Usage: scripts/memory-per-call.sh [HERALD]   (default target/release/herald, built if absent)
#        RATE=1000 SECS=10 WORKERS=2 PORT=19430 HEAPTRACK=0 FIXED_MB=5
# Output: `rss_before_kb N rss_after_kb N calls N succeeded N rss_per_call_kb N`, then the mimalloc or
# heaptrack lines.
set -euo pipefail
cd "$(dirname "$0")/.."
HERALD=${1:-target/release/herald}
RATE=${RATE:-1000} SECS=${SECS:-10} WORKERS=${WORKERS:-2} PORT=${PORT:-19430}
HEAPTRACK=${HEAPTRACK:-0} FIXED_MB=${FIXED_MB:-5}
. scripts/lib/preamble.sh
herald_or_build
[ "$HEAPTRACK" = 0 ] || need heaptrack "apt-get install heaptrack"
scratch server_pid
HERALD=$(realpath "$HERALD")

herald_bench_config "$PORT" >"$tmp/h.toml"
if [ "$HEAPTRACK" = 0 ]; then
    MIMALLOC_SHOW_STATS=1 "$HERALD" serve --config "$tmp/h.toml" >"$tmp/serve.log" 2>&1 &
else
    heaptrack -o "$tmp/heap" "$HERALD" serve --config "$tmp/h.toml" >"$tmp/serve.log" 2>&1 &
fi
server_pid=$!
wait_bound "$PORT" "$server_pid"
herald_pid() { # the herald process itself (heaptrack runs it as a child)
    local p
    for p in $(tree "$server_pid"); do
        [ "$(readlink "/proc/$p/exe" 2>/dev/null)" = "$HERALD" ] && { echo "$p"; return; }
    done
    echo "$server_pid"
}
rss() { awk '/^VmRSS/ {print $2}' "/proc/$1/status"; }
pid=$(herald_pid)
sleep 1
before=$(rss "$pid")
"$HERALD" bench calls --proxy "127.0.0.1:$PORT" --rate "$RATE" --duration "$SECS" --quiet \
    --json "$tmp/r.json" >/dev/null || true
after=$(rss "$pid")
calls=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['attempted'])" "$tmp/r.json")
succeeded=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['succeeded'])" "$tmp/r.json")
echo "rss_before_kb $before rss_after_kb $after calls $calls succeeded $succeeded" \
    "rss_per_call_kb $(awk -v a="$after" -v b="$before" -v n="$calls" 'BEGIN {printf "%.2f", (a - b) / n}')"
kill -INT "$pid" # herald itself: heaptrack's wrapper script would not pass the signal on
wait "$server_pid" 2>/dev/null || true
server_pid=''
if [ "$HEAPTRACK" = 0 ]; then
    # mimalloc's statistics at exit (a build without mimalloc prints none): what it committed
    # from the kernel, peak first; the process's peak RSS and commit.
    grep -E '^ *(committed|process) *:' "$tmp/serve.log" | sed 's/^ */mimalloc: /' || true
else
    peak=$(heaptrack_print -f "$tmp"/heap.* 2>/dev/null | awk '/^peak heap memory consumption:/ {print $5}')
    echo "heaptrack_peak_heap $peak" \
        "heap_per_call_kb $(python3 - "$peak" "$FIXED_MB" "$calls" <<'PY'
import re, sys
units = {"B": 1, "K": 1e3, "M": 1e6, "G": 1e9}
m = re.fullmatch(r"([0-9.]+)([BKMG])?", sys.argv[1])
peak = float(m.group(1)) * units[m.group(2) or "B"]
print(f"{(peak - float(sys.argv[2]) * 1e6) / int(sys.argv[3]) / 1e3:.2f}")
PY
)"
fi
