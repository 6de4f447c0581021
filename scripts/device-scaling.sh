#!/usr/bin/env bash
# Issue 21 items 7 and 4 on a lent many-core machine (the workplace's device tool: a bare machine
# with no package registry and a few counted minutes), in one bounded run:
#   1. scripts/bench-scaling.sh PARTS=capacity: herald with N workers against Kamailio 5.6 with N
#      children, N in $NS, each pinned to CPUs 0..N-1, the generators on their own CPUs, and
#      herald's threads' shares of a core at 0.9 x its capacity (SPREAD_S s);
#   2. scripts/bench-one-peer.sh: one 4-tuple (`herald bench --single-socket --threads 4`: four
#      event loops behind one socket, so that the generator is not the ceiling, as its one thread
#      was in session 15) against 1, 2 and 4 workers.
# Every search is cut at DEADLINE_S seconds (its best passing rate stands, marked "cut short"), and
# each part at a hard time limit, so the run ends inside one call of the tool.
#
# That machine cannot install anything, so this machine packs what it needs:
#   scripts/device-scaling.sh pack   -> .dev/ (git-ignored through .git/info/exclude): a stripped
#                                      release herald and Kamailio's binary, the modules
#                                      bench/kamailio-bench.cfg loads, and their one library
# and the run there (the tool's `carry: [".dev"]`) installs Kamailio where the config expects it:
#   scripts/device-scaling.sh run    -> reports in $OUT (the tool's folder that comes back), else
#                                      target/device/
# Knobs (run): SERVERS="herald kamailio" KAMAILIO_SHM_MB=8192 NS="1 2 4 8" GENS START KAMAILIO_START SEARCH_S=3 DEADLINE_S=25 SCALING_LIMIT_S=330 SPREAD_S=4
#              ONE_PEER_WORKERS="1 2 4" ONE_PEER_START=15000 ONE_PEER_LIMIT_S=150 (0: no one-peer part)
#              ONE_PEER_DEADLINE_S=$DEADLINE_S (its own search limit: a step takes well over its SEARCH_S window - a fresh server, registration, the calls' end)
#              ONE_PEER_GEN_ARGS="--single-socket --threads 4"
set -euo pipefail
cd "$(dirname "$0")/.."
DEV=.dev
KAMAILIO_MODULES=/usr/lib/x86_64-linux-gnu/kamailio/modules

pack() {
    cargo build --release -j2 --bin herald >&2
    rm -rf "$DEV"
    mkdir -p "$DEV/kamailio/modules"
    grep -qx "/$DEV/" .git/info/exclude 2>/dev/null || echo "/$DEV/" >>.git/info/exclude
    strip -o "$DEV/herald" target/release/herald
    cp /usr/sbin/kamailio "$DEV/kamailio/"
    cp /usr/lib/x86_64-linux-gnu/kamailio/libsrdb1.so.1 "$DEV/kamailio/"
    local m
    for m in $(sed -n 's/^loadmodule "\(.*\)"$/\1/p' bench/kamailio-bench.cfg); do
        cp "$KAMAILIO_MODULES/$m" "$DEV/kamailio/modules/"
    done
    du -sh "$DEV"
}

run() {
    local out=${OUT:-target/device}
    mkdir -p "$out"
    # Kamailio where bench/kamailio-bench.cfg's mpath and its modules' runpath look
    if [ ! -x /usr/sbin/kamailio ]; then
        cp "$DEV/kamailio/kamailio" /usr/sbin/kamailio
        mkdir -p "$KAMAILIO_MODULES"
        cp "$DEV/kamailio/modules/"* "$KAMAILIO_MODULES/"
        cp "$DEV/kamailio/libsrdb1.so.1" /usr/lib/x86_64-linux-gnu/kamailio/
    fi
    {
        echo "## Machine"
        echo
        echo "- $(nproc) CPUs: $(awk -F': ' '/model name/ {print $2; exit}' /proc/cpuinfo); kernel $(uname -r)"
        echo "- memory: $(awk '/MemTotal/ {printf "%.0f GiB", $2 / 1048576}' /proc/meminfo); net.core.rmem_max $(cat /proc/sys/net/core/rmem_max 2>/dev/null || echo '?'), rmem_default $(cat /proc/sys/net/core/rmem_default 2>/dev/null || echo '?')"
        echo "- $(/usr/sbin/kamailio -v 2>&1 | head -n 1)"
        echo "- herald: $DEV/herald, $(git rev-parse --short HEAD 2>/dev/null || echo 'commit unknown (no .git)')"
    } >"$out/machine.md"
    cat "$out/machine.md"
    KAMAILIO_SHM_MB=${KAMAILIO_SHM_MB:-8192} PARTS=capacity NS=${NS:-1 2 4 8} GENS=${GENS:-1:2 2:3 4:6 8:8} START=${START:-1:12000 2:24000 4:48000 8:96000} \
        KAMAILIO_START=${KAMAILIO_START:-1:6000 2:12000 4:24000 8:48000} SEARCH_S=${SEARCH_S:-3} CONFIRM_S=0 SPREAD_S=${SPREAD_S:-4} \
        FACTOR=1.4 PRECISION=0.1 PAUSE=1 DEADLINE_S=${DEADLINE_S:-25} OUT="$out/scaling.md" \
        timeout -k 5 "${SCALING_LIMIT_S:-330}" scripts/bench-scaling.sh "$DEV/herald" || echo "scaling: exit $?" >&2
    [ "${ONE_PEER_LIMIT_S:-150}" -gt 0 ] || return 0
    ROUNDS=1 WORKER_COUNTS=${ONE_PEER_WORKERS:-1 2 4} SEARCH_S=${SEARCH_S:-3} START=${ONE_PEER_START:-15000} \
        GEN_ARGS=${ONE_PEER_GEN_ARGS:---single-socket --threads 4} \
        FACTOR=1.4 PRECISION=0.1 PAUSE=1 SECS=4 DEADLINE_S=${ONE_PEER_DEADLINE_S:-${DEADLINE_S:-25}} OUT="$out/one-peer.md" \
        timeout -k 5 "${ONE_PEER_LIMIT_S:-150}" scripts/bench-one-peer.sh "$DEV/herald" || echo "one peer: exit $?" >&2
}

case ${1:-} in
pack) pack ;;
run) run ;;
*)
    echo "usage: scripts/device-scaling.sh pack|run" >&2
    exit 2
    ;;
esac
