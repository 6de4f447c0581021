#!/usr/bin/env bash
# Instructions per message for each parser workload (callgrind: independent of machine load).
# Usage: scripts/parse-cost.sh [N]   (default N=20000 iterations)
set -euo pipefail
cd "$(dirname "$0")/.."
N="${1:-20000}"
command -v valgrind >/dev/null || { echo "valgrind is required (apt-get install valgrind)" >&2; exit 2; }
cargo build --release -q -p herald-sip --example parse_cost
BIN=target/release/examples/parse_cost
ir() { valgrind --tool=callgrind --callgrind-out-file=/dev/null "$BIN" "$1" "$2" "$3" 2>&1 | sed -n 's/.*Collected : \([0-9]*\).*/\1/p'; }
printf '| message | parse_only | proxy_depth | full | rsip | rsip_typed | rsip_typed / proxy_depth |\n|---|---|---|---|---|---|---|\n'
for m in invite trying100 ringing180 ok200 ack bye register; do
    row="| $m"
    declare -A cost
    for k in parse_only proxy_depth full rsip rsip_typed; do
        base=$(ir "$k" "$m" 0); run=$(ir "$k" "$m" "$N")
        cost[$k]=$(( (run - base) / N ))
        row="$row | ${cost[$k]}"
    done
    ratio=$(awk -v a="${cost[rsip_typed]}" -v b="${cost[proxy_depth]}" 'BEGIN { printf "%.1fx", a / b }')
    echo "$row | $ratio |"
done
