#!/usr/bin/env bash
# Durable registrations (issue 19): what [location] costs, one build, modes interleaved.
#
# 1. REGISTER load in each mode - memory, write-back, write-through - same herald build, same
#    run, rounds interleaved (ABC ABC ...): `herald bench register` refreshes USERS users at
#    RATE REGISTERs/s for SECS s against `herald serve` (UDP, no auth, WORKERS workers, a fresh
#    database per run). Per run: achieved REGISTER/s, failures, p50/p99 response time, server
#    CPU µs per REGISTER (--server-pid: utime+stime over the window / attempted), the same split
#    into the workers' threads (what bounds REGISTER/s) and the location writer's thread (off
#    the REGISTER's path; since start), database file size. Prints every sample, the medians,
#    and each mode's cost against memory.
# 2. Throughput (the issue's target names it): the same REGISTER load stepped up through
#    CAPACITY_RATES (REGISTER/s, CAP_SECS s each, modes interleaved at every step; a mode that
#    fails a step is not offered the higher ones). A step passes when under 0.01% of the
#    REGISTERs failed and at least 99% of the offered rate was achieved; each mode's capacity
#    is its highest passing step (the next one failed).
# 3. Start-up with STARTUP_BINDINGS stored bindings (built by the persist crate's example
#    make_location_db through LocationStore + SqliteLocation): time from spawning herald to the
#    200 of its first OPTIONS, and the background load's own time from its log line, STARTS
#    times each against an empty database and the full one.
#
# Usage: scripts/bench-store.sh [DIR]   (DIR holds herald and examples/, default target/release;
#        cargo build --release -p herald -p herald-persist --example make_location_db)
#        ROUNDS=3 RATE=10000 SECS=10 USERS=10000 WORKERS=1 STARTUP_BINDINGS=1000000 STARTS=3
#        MODES="memory write-back write-through" PORT=17731 (UDP; must be free: checked before each start)
#        PARTS="load capacity startup" CAPACITY_RATES="10000 15000 20000 25000 30000 35000" CAP_SECS=5
#        METRICS_PORT=17761 (TCP; set: herald's [metrics] endpoint is on in every mode, which costs
#        the workers their per-message timing, and each write-back/write-through run also prints
#        its commits and AoRs per commit, from herald_location_commit_seconds_count)
set -euo pipefail
cd "$(dirname "$0")/.."
DIR=${1:-target/release}
ROUNDS=${ROUNDS:-3} RATE=${RATE:-10000} SECS=${SECS:-10} USERS=${USERS:-10000} WORKERS=${WORKERS:-1}
STARTUP_BINDINGS=${STARTUP_BINDINGS:-1000000} STARTS=${STARTS:-3}
PARTS=${PARTS:-load capacity startup}
CAPACITY_RATES=${CAPACITY_RATES:-10000 15000 20000 25000 30000 35000} CAP_SECS=${CAP_SECS:-5}
MODES=${MODES:-memory write-back write-through$(command -v redis-server >/dev/null && echo ' redis')}
# Mode redis: one node on a redis-server started here (no persistence, emptied before each run).
REDIS_PORT=${REDIS_PORT:-17741}
PORT=${PORT:-17731}
. scripts/lib/preamble.sh
scratch server_pid redis_pid

port_free() { # refuses to measure someone else's server on our port
    local hex
    hex=$(printf '0100007F:%04X' "$PORT")
    if awk -v a="$hex" '$2 == a {f = 1} END {exit !f}' /proc/net/udp; then
        echo "UDP port $PORT is in use: another server would be measured (set PORT)" >&2
        exit 1
    fi
}

location_toml() { # MODE DB
    if [ "$1" = redis ]; then
        printf '[registrar]\nmin_expires = 0\n[location]\nmode = "redis"\n[location.redis]\n'
        printf 'url = "redis://127.0.0.1:%s/"\nnode = "bench"\n' "$REDIS_PORT"
    else
        printf '[registrar]\nmin_expires = 0\n[location]\nmode = "%s"\npath = "%s"\n' "$1" "$2"
    fi
}

case " $MODES " in *" redis "*)
    redis-server --port "$REDIS_PORT" --bind 127.0.0.1 --save '' --appendonly no --dir "$tmp" \
        >"$tmp/redis.log" 2>&1 &
    redis_pid=$!
    for _ in $(seq 100); do redis-cli -p "$REDIS_PORT" ping 2>/dev/null | grep -q PONG && break; sleep 0.05; done
esac

register() { # MODE
    rm -f "$tmp"/loc.db*
    local redis_ticks=0
    if [ "$1" = redis ]; then
        redis-cli -p "$REDIS_PORT" flushall >/dev/null
        redis_ticks=$(cpu_ticks "$redis_pid")
    fi
    port_free
    herald_bench_config "$PORT" "$(location_toml "$1" "$tmp/loc.db")" >"$tmp/h.toml"
    if [ -n "${METRICS_PORT:-}" ]; then
        printf '[metrics]\nlisten = "127.0.0.1:%s"\n' "$METRICS_PORT" >>"$tmp/h.toml"
    fi
    "$DIR/herald" serve --config "$tmp/h.toml" >"$tmp/serve.log" 2>&1 &
    server_pid=$!
    wait_bound "$PORT" "$server_pid"
    "$DIR/herald" bench register --registrar "127.0.0.1:$PORT" --rate "$RATE" --duration "$SECS" \
        --users "$USERS" --quiet --server-pid "$server_pid" --json "$tmp/r.json" >/dev/null || true
    local size writer_ticks other_ticks
    size=$( (cat "$tmp"/loc.db* 2>/dev/null || true) | wc -c | awk '{print int($1 / 1024)}')
    # Per thread, since start: the location writer ("herald-location-writer", cut to 15
    # characters) against every other thread (the workers). The writer works off the REGISTER's
    # path; the workers' CPU is what bounds REGISTER/s.
    # Nanoseconds on CPU from schedstat (clock ticks of 10 ms were too coarse for the writer).
    writer_ticks=0 other_ticks=0
    for t in /proc/"$server_pid"/task/*; do
        local ns
        ns=$(awk '{print $1}' "$t/schedstat")
        case "$(cat "$t/comm")" in
            herald-location*) writer_ticks=$((writer_ticks + ns)) ;;
            *) other_ticks=$((other_ticks + ns)) ;;
        esac
    done
    if [ "$1" = redis ]; then
        # The redis-server's own CPU, apart from herald's (to stderr: not a sample line).
        python3 -c 'import json, sys; r = json.load(open(sys.argv[1])); n = max(r["attempted"], 1); print(f"  redis-server cpu_us_per_register {int(sys.argv[2]) * 1e6 / int(sys.argv[3]) / n:.2f}")' \
            "$tmp/r.json" "$(($(cpu_ticks "$redis_pid") - redis_ticks))" "$HZ" >&2
    fi
    if [ -n "${METRICS_PORT:-}" ] && [ "$1" != memory ] && [ "$1" != redis ]; then
        # Since start (the users' first registrations included); to stderr: not a sample line.
        python3 - "$METRICS_PORT" "$1" >&2 <<'PY'
import sys, urllib.request
text = urllib.request.urlopen(f"http://127.0.0.1:{sys.argv[1]}/metrics", timeout=5).read().decode()
v = {l.split()[0]: float(l.split()[1]) for l in text.splitlines() if l.startswith("herald_location_")}
commits, writes = v.get("herald_location_commit_seconds_count", 0), v.get("herald_location_writes_total", 0)
print(f"  {sys.argv[2]} commits {commits:.0f} aor_writes {writes:.0f} aors_per_commit {writes / max(commits, 1):.1f}")
PY
    fi
    stop "$server_pid"; server_pid=''
    python3 - "$tmp/r.json" "$1" "$size" "$writer_ticks" "$other_ticks" 1000000000 <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
n = max(r['attempted'], 1)
srv = sum(s['cpu_s'] for s in r['servers']) * 1e6 / n
writer, other, hz = int(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6])
t = r['response_time'].get('REGISTER', {})
print(f"register {sys.argv[2]} achieved_per_s {r['achieved_rate']:.0f} attempted {r['attempted']} failed {r['failed']} "
      f"p50_ms {t.get('p50_us', 0) / 1000:.3f} p99_ms {t.get('p99_us', 0) / 1000:.3f} "
      f"server_us_per_register {srv:.2f} workers_us_per_register {other * 1e6 / hz / n:.2f} "
      f"writer_us_per_register {writer * 1e6 / hz / n:.2f} db_kib {sys.argv[3]}")
PY
}

first_options() { # DB LABEL: spawn herald on DB, time to the first OPTIONS 200, then stop it
    herald_bench_config "$PORT" "$(location_toml write-back "$1")" >"$tmp/h.toml"
    sed -i 's/level = "warn"/level = "info"/' "$tmp/h.toml"
    port_free
    local t0
    t0=$(date +%s%N)
    "$DIR/herald" serve --config "$tmp/h.toml" >"$tmp/serve.log" 2>&1 &
    server_pid=$!
    python3 - "$PORT" "$t0" "$2" <<'PY'
import socket, sys, time
port, t0, label = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind(("127.0.0.1", 0))
s.settimeout(0.002)
local = "127.0.0.1:%d" % s.getsockname()[1]
deadline = time.time() + 60
n = 0
while time.time() < deadline:
    n += 1
    req = (f"OPTIONS sip:127.0.0.1:{port} SIP/2.0\r\nVia: SIP/2.0/UDP {local};branch=z9hG4bK-start{n}\r\n"
           f"Max-Forwards: 70\r\nFrom: <sip:probe@{local}>;tag=p\r\nTo: <sip:127.0.0.1:{port}>\r\n"
           f"Call-ID: start-{n}\r\nCSeq: 1 OPTIONS\r\nContent-Length: 0\r\n\r\n")
    s.sendto(req.encode(), ("127.0.0.1", port))
    try:
        data = s.recv(65536)
    except socket.timeout:
        continue
    if data.startswith(b"SIP/2.0 200"):
        print(f"startup {label} first_options_ms {(time.time_ns() - t0) / 1e6:.1f}")
        sys.exit(0)
print(f"startup {label} first_options_ms nan")
PY
    # The background load's own summary (the full database only).
    for _ in $(seq 600); do grep -q "registrations loaded" "$tmp/serve.log" && break; sleep 0.05; done
    grep "registrations loaded" "$tmp/serve.log" | sed 's/.*registrations loaded/  load:/' || true
    stop "$server_pid"; server_pid=''
}

case " $PARTS " in *" load "*)
echo "== REGISTER load: rate $RATE/s, $USERS users, $SECS s, $WORKERS worker(s), $ROUNDS rounds"
for round in $(seq "$ROUNDS"); do
    for mode in $MODES; do
        register "$mode" >>"$tmp/samples"
        tail -n 1 "$tmp/samples"
        sleep 1
    done
done
python3 - "$tmp/samples" "$MODES" <<'PY'
import statistics, sys
s = {}
for line in open(sys.argv[1]):
    f = line.split()
    for k, v in zip(f[2::2], f[3::2]):
        s.setdefault((k, f[1]), []).append(float(v))
modes = sys.argv[2].split()
for k in ('achieved_per_s', 'failed', 'p50_ms', 'p99_ms', 'server_us_per_register', 'workers_us_per_register',
          'writer_us_per_register', 'db_kib'):
    cells = "  ".join(f"{m} {statistics.median(s[(k, m)]):.3f}" for m in modes)
    print(f"median {k}: {cells}")
for k in ('server_us_per_register', 'workers_us_per_register'):
    base = statistics.median(s[(k, modes[0])])
    for m in modes[1:]:
        c = statistics.median(s[(k, m)])
        print(f"cost of {m} vs {modes[0]}, {k}: {c / base:.3f}x ({(c / base - 1) * 100:+.1f}%)")
PY
esac

case " $PARTS " in *" capacity "*)
    echo "== REGISTER capacity: steps $CAPACITY_RATES REGISTER/s, $CAP_SECS s each, $USERS users, $WORKERS worker(s)"
    failed_modes=' '
    for step in $CAPACITY_RATES; do
        for mode in $MODES; do
            case "$failed_modes" in *" $mode "*) continue ;; esac
            line=$(RATE=$step SECS=$CAP_SECS register "$mode")
            echo "step $step $line" | tee -a "$tmp/steps"
            if ! python3 -c 'import sys; f = sys.argv[2:]; d = dict(zip(f[2::2], map(float, f[3::2])))
sys.exit(not (d["failed"] <= 1e-4 * d["attempted"] and d["achieved_per_s"] >= 0.99 * int(sys.argv[1])))' \
                "$step" $line; then
                failed_modes="$failed_modes$mode "
            fi
            sleep 1
        done
    done
    python3 - "$tmp/steps" "$MODES" <<'PY'
import sys
best, fail = {}, {}
for line in open(sys.argv[1]):
    f = line.split()
    step, mode, d = int(f[1]), f[3], dict(zip(f[4::2], map(float, f[5::2])))
    ok = d["failed"] <= 1e-4 * d["attempted"] and d["achieved_per_s"] >= 0.99 * step
    if ok:
        best[mode] = max(best.get(mode, 0), step)
    else:
        fail[mode] = min(fail.get(mode, 1 << 40), step)
modes = sys.argv[2].split()
for m in modes:
    print(f"capacity {m}: {best.get(m, 0)} REGISTER/s (next step {fail.get(m, 'none: raise CAPACITY_RATES')})")
base = best.get(modes[0], 0)
for m in modes[1:]:
    if base:
        print(f"capacity of {m} vs {modes[0]}: {best.get(m, 0) / base:.3f}x")
PY
esac

case " $PARTS " in *" startup "*)
echo "== start-up with $STARTUP_BINDINGS stored bindings"
"$DIR/examples/make_location_db" "$tmp/full.db" "$STARTUP_BINDINGS"
ls -l "$tmp/full.db" | awk '{printf "database %.0f MiB\n", $5 / 1048576}'
for i in $(seq "$STARTS"); do
    rm -f "$tmp"/empty.db*
    first_options "$tmp/empty.db" empty >>"$tmp/starts"
    first_options "$tmp/full.db" full >>"$tmp/starts"
    tail -n 3 "$tmp/starts"
done
python3 - "$tmp/starts" <<'PY'
import statistics, sys
v = {}
for line in open(sys.argv[1]):
    f = line.split()
    if f and f[0] == 'startup':
        v.setdefault(f[1], []).append(float(f[3]))
for k, xs in v.items():
    print(f"median first OPTIONS 200 after spawn, {k} database: {statistics.median(xs):.1f} ms ({len(xs)} starts)")
PY
esac
