# Shell helpers shared by the benchmark scripts: stopping processes, waiting for a UDP port,
# process trees and CPU ticks from /proc. Source it; it expects $HZ (getconf CLK_TCK) and $tmp.
stop() { # PID...: SIGTERM, then SIGKILL after 3 s
    local p
    for p in "$@"; do [ -n "$p" ] && kill "$p" 2>/dev/null || true; done
    for _ in $(seq 30); do
        local alive=0
        for p in "$@"; do [ -n "$p" ] && kill -0 "$p" 2>/dev/null && alive=1; done
        [ $alive = 0 ] && break
        sleep 0.1
    done
    for p in "$@"; do [ -n "$p" ] && kill -9 "$p" 2>/dev/null || true; done
    for p in "$@"; do [ -n "$p" ] && wait "$p" 2>/dev/null || true; done
}
wait_bound() { # PORT PID: until a UDP socket is bound to 127.0.0.1:PORT
    local hex
    hex=$(printf '0100007F:%04X' "$1")
    for _ in $(seq 200); do
        awk -v a="$hex" '$2 == a {f = 1} END {exit !f}' /proc/net/udp && return 0
        kill -0 "$2" 2>/dev/null || { echo "process $2 died; log:" >&2; tail -n 20 "$tmp"/*.log >&2; exit 1; }
        sleep 0.05
    done
    echo "nothing bound 127.0.0.1:$1" >&2
    exit 1
}
tree() { # PID: it and all its descendants
    local p
    echo "$1"
    for p in $(pgrep -P "$1" || true); do tree "$p"; done
}
thread_ticks() { # PID: "THREAD-NAME TICKS" for every thread, summed by name
    local t
    for t in /proc/"$1"/task/*; do
        printf '%s %s\n' "$(cat "$t/comm")" "$(sed 's/.*) //' "$t/stat" | awk '{print $12 + $13}')"
    done | awk '{a[$1] += $2} END {for (k in a) print k, a[k]}' | sort
}
median() { # the median of the numbers on stdin, one a line (0 for none)
    sort -g | awk '{v[NR] = $1} END {if (NR == 0) print 0; else if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2}'
}
cpu_ticks() { # PID...: summed utime+stime
    local p t=0
    for p in "$@"; do
        t=$((t + $(sed 's/.*) //' "/proc/$p/stat" | awk '{print $12 + $13}')))
    done
    echo $t
}
busy_ticks() { # CPU time of the whole machine in ticks: the root cgroup's exact accounting when
    # readable (/proc/stat samples at each tick and misses short bursts), else /proc/stat
    if [ -r /sys/fs/cgroup/cpuacct/cpuacct.usage ]; then
        awk -v hz="$HZ" '{printf "%d", $1 * hz / 1e9}' /sys/fs/cgroup/cpuacct/cpuacct.usage
    elif [ -r /sys/fs/cgroup/cpu.stat ]; then
        awk -v hz="$HZ" '$1 == "usage_usec" {printf "%d", $2 * hz / 1e6}' /sys/fs/cgroup/cpu.stat
    else
        awk '/^cpu / {print $2 + $3 + $4 + $7 + $8 + $9}' /proc/stat
    fi
}
herald_bench_config() { # PORT [EXTRA TOML]: herald doing Kamailio's bench job (UDP, record-route,
    # no authentication like bench/kamailio-bench.cfg, the load's one address trusted), $WORKERS
    # workers, $MAX_TRANSACTIONS (default 4,000,000) transactions at most
    cat <<TOML
[server]
workers = $WORKERS
drain_timeout_s = 1
[[listen]]
address = "127.0.0.1:$1"
transports = ["udp"]
[proxy]
record_route = "always"
[auth]
enabled = false
[flood]
trusted = ["127.0.0.0/8"]
[limits]
# Transactions live 32 s after they end (RFC 3261 Timer J, RFC 6026 Timers L and M): about 3.2
# per call, so 4,000,000 (about 4 GB at most, allocated as used) holds 39,000 calls/s; the
# default 500,000 holds 5,000. (2,000,000 refused calls at 19,800 calls/s on one core.)
max_transactions = ${MAX_TRANSACTIONS:-4000000}
[log]
level = "warn"
${2:-}
TOML
}
start_kamailio_bench() { # PORT: bench/kamailio-bench.cfg with the TLSF allocator, $WORKERS
    # children, $KAMAILIO_SHM_MB (default 8192) MB of shared memory, in the background; its pid in
    # $server_pid. tm holds each transaction in shared memory until its 5 s wait ends: measured
    # here, 1 GB ran out at 7,500 calls/s on one core (tm "out of mem", answered 500 at once, so
    # the calls failed fast and the search stopped at 44% of the core: a setting, not capacity) and
    # 12,000 calls/s for 8 s peaked at 1.7 GB. The pool is reserved, not touched, so a large one
    # costs only what is used. kamailio_memory_check tells after a run whether it was enough.
    mkdir -p "$tmp/kamailio-run"
    "$KAMAILIO" -f bench/kamailio-bench.cfg -DD -E -x tlsf -X tlsf -m "${KAMAILIO_SHM_MB:-8192}" -M 16 -n "$WORKERS" \
        -l "udp:127.0.0.1:$1" -w "$tmp/kamailio-run" -Y "$tmp/kamailio-run" >"$tmp/kamailio.log" 2>&1 &
    server_pid=$!
}
kamailio_memory_check() { # after a start_kamailio_bench run: silent with status 0 if Kamailio never
    # ran out of shared memory; else a sentence for the report and status 1, since its failed
    # calls were then refused for want of memory (a setting), not for want of CPU
    local lines
    lines=$(grep -e 'could not allocate shared memory' -e 'out of mem' "$tmp/kamailio.log" || true)
    [ -z "$lines" ] && return 0
    echo "Kamailio ran out of shared memory ($(wc -l <<<"$lines") log lines, e.g. \"$(head -n 1 <<<"$lines" | cut -c1-120)\"): its result is its -m ${KAMAILIO_SHM_MB:-8192} MB pool, not its capacity; rerun with a larger KAMAILIO_SHM_MB."
    return 1
}
kamailio_void_note() { # appends to $tmp/report what kamailio_memory_check wrote to $tmp/void, if any
    [ ! -s "$tmp/void" ] || { echo; echo "**Void as a comparison:**"; sed 's/^/- /' "$tmp/void"; } >>"$tmp/report"
}
floor_of() { # FIELD: runs `herald bench floor` ($HERALD), prints its table indented and then
    # FIELD of its JSON (proxy_floor_us or generator_floor_us), µs, on the last line
    "$HERALD" bench floor --json "$tmp/floor.json" | sed 's/^/    /'
    python3 -c "import json,sys; print(round(json.load(open(sys.argv[1]))[sys.argv[2]], 1))" "$tmp/floor.json" "$1"
}
herald_idle_config() { # PORT N [TRANSPORT [CERT KEY]]: herald holding N idle connections
    # ($WORKERS workers) on TRANSPORT (tcp, tls, ws or wss; tls and wss need CERT and KEY), for the
    # idle-connection memory benchmarks (scripts/bench-tcp-idle.sh, scripts/bench-ab.sh). The
    # WebSocket pings are pushed past the measurement (ping_interval_s): idle means idle.
    cat <<TOML
[server]
workers = $WORKERS
[[listen]]
address = "127.0.0.1:$1"
transports = ["${3:-tcp}"]
[limits]
max_tcp_connections = $(($2 + 1000))
max_tcp_connections_per_ip = $(($2 + 1000))
tcp_idle_timeout_s = 3600
[websocket]
ping_interval_s = 3600
[log]
level = "warn"
TOML
    if [ "${3:-tcp}" = wss ] || [ "${3:-tcp}" = tls ]; then
        printf '[tls]\ncertificate = "%s"\nprivate_key = "%s"\nhandshake_timeout_s = 60\n' "$4" "$5"
    fi
}
