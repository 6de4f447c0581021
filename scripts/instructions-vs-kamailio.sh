#!/usr/bin/env bash
# User-space instructions per proxied call, herald against Kamailio 5.6, counted with valgrind's
# callgrind (deterministic: the same on any x86-64 machine, unlike CPU time on a noisy one).
#
# Method (issue 21), for each server and each transport (UDP, TCP):
#   call run: start the server under callgrind; start a SIPp callee (tests/sipp/uas.xml) and
#             register it at the server (bench/register-contact.xml, a third-party REGISTER
#             sent over UDP whose Contact names the callee and the run's transport: a REGISTER
#             over TCP from a SIPp that then exits leaves a binding whose own connection is
#             gone, and herald, which reaches a phone registered over TCP through the
#             connection it registered on, would try that dead flow before the Contact on
#             every call - a cost of the third-party registration, not of proxying); warm up
#             with WARMUP calls; then CALLS calls of tests/sipp/uac.xml at RATE calls/s
#             (INVITE, 100/180/200, ACK, HOLD_MS pause, BYE/200; the server record-routes, so
#             ACK and BYE cross it as well: 14 messages through the proxy per call); then
#             LINGER_S s of nothing (transactions end: RFC 3261 Timer J/K, RFC 6026 Timer L,
#             herald up to 32 s, Kamailio's tm wait timer 5 s), then stop it.
#   idle run: the same server, callee, REGISTER and warm-up, then nothing until it has lived
#             as long as in the call run (from its start to the stop signal), then stop it.
#   instructions per call = (call run - idle run) / CALLS: start-up, warm-up, shutdown and
#             time-driven work (timers, expiry sweeps) of equal wall time cancel.
# Every call must succeed: SIPp's statistics (SuccessfulCall == CALLS, FailedCall == 0, for the
# warm-up too) are checked and the script fails otherwise. SIPp retransmissions are reported.
#
# The servers (the same job, configured alike: transaction-stateful, record-routing proxy and
# in-memory registrar, no authentication, warnings-only logging):
#   herald    `herald serve` (release build), one worker (`server.workers = 1`): its worker
#             thread and one UDP receiver thread; the config of scripts/lib/procs.sh
#             (herald_bench_config), listening on UDP, and on TCP beside it for the TCP runs;
#             overload control off (`[overload] enabled = false`, see start_server).
#             One process: callgrind's count is the sum over its threads.
#   kamailio  bench/kamailio-bench.cfg (tm, rr, sl, maxfwd, registrar, usrloc db_mode=0), TLSF
#             allocator (-x tlsf -X tlsf -m 1024 -M 16, as scripts/bench-vs-kamailio.sh), one UDP
#             child (-n 1) and one TCP child (-N 1; the TCP runs use a copy of the config with
#             disable_tcp=no), under `--trace-children=yes`: the count is the sum over all its
#             processes (main, timers, UDP receiver, TCP main, TCP receiver), one file each.
#   rsipstack (optional, SERVERS="herald kamailio rsipstack" RSIPSTACK_PROXY=path): the proxy
#             example of the rsipstack crate (examples/proxy.rs of its repository at release
#             0.6.4, built against rsipstack 0.6.4 from crates.io), the one Rust SIP proxy
#             from the registry made to do this job here: a transaction-stateful proxy that
#             record-routes INVITEs and keeps an in-memory registrar (a small one: it routes by
#             the To user and adds its Record-Route to responses as well). siphon-sip 1.15.11
#             also builds from crates.io (no default features, against CPython 3.13 with a GIL)
#             and, with a script doing this job (registrar.save; lookup, record_route, relay
#             to the contact's URI), a call passed through it natively; but under valgrind at
#             50 calls/s its INVITE branches timed out (408) and its BYEs drew 100 Trying that
#             the SIPp caller rejects: not measured. rsipstack's code is
#             not in this repository; build it in a scratch crate (dependencies: rsipstack
#             =0.6.4, tokio, tokio-util, tracing, tracing-subscriber, clap, futures, if-addrs,
#             dotenvy, axum (ws), tower, tower-http, http) with one change, its log level
#             DEBUG -> WARN as for the other two. Started with --addr 127.0.0.1 --port PORT
#             [--tcp-port PORT], one tokio worker thread (TOKIO_WORKER_THREADS=RSIPSTACK_THREADS,
#             default 1, as herald's one worker). Its callee is bench/rsipstack-uas.xml:
#             tests/sipp/uas.xml with the Via fields echoed on separate lines (the example
#             loses responses whose Via fields share a line; see that file).
#
# TCP: SIPp `-t t1`, one persistent connection per SIPp (caller to proxy, proxy to callee), as
# a trunk or an SBC keeps its connection: what it measures is the per-message work of a stream
# transport (framing, reading, writing) for both servers alike. `-t tn` (a connection per call)
# would instead measure connection set-up and teardown, which each server ends on its own idle
# timers (herald `tcp_idle_timeout_s`, Kamailio `tcp_connection_lifetime`): no longer the same job.
#
# Fairness under valgrind: valgrind runs one thread of a process at a time (one big lock). A
# thread that spins before it parks (a lock's spin, a runtime's idle loop, herald's hand-over
# loop in dispatch/balance.rs) burns instructions only while it holds that lock and the thread
# it waits for cannot run, inflating a multi-threaded count. So herald runs one worker (its
# worker thread and one UDP receiver thread), and valgrind's fair scheduler is used
# (`--fair-sched=yes`: a ticket lock that hands the CPU over in turn; FAIR_SCHED=no for the
# default). Measured on herald e30ac0d, 500 calls, 3 runs each: default scheduler UDP 244.9k,
# 244.0k, 247.0k, TCP 382.5k, 381.7k, 390.5k; fair scheduler UDP 243.4k, 242.0k, 244.8k, TCP
# 381.2k, 381.9k, 386.8k per call: the same within the run-to-run spread (the fair one 0.4-0.8%
# lower on average and a little tighter), and the profile shows no spinning (no contended-lock
# spin, no sched_yield; the threads block in recvmmsg and epoll_wait). Kamailio's processes
# are single-threaded, each in its own valgrind, so the scheduler cannot change its count;
# rsipstack runs one tokio worker thread (its profile shows no spinning either). Both settings
# are therefore fair to both servers; the fair one is the default here.
#
# Output: lines `SERVER TRANSPORT instructions_per_call N` (and call_run / idle_run / calls /
# retransmissions / wall_s lines) on stdout, machine-readable, then a table with the ratio.
#
# Usage: scripts/instructions-vs-kamailio.sh
#   CALLS=2000 WARMUP=100 RATE=50 HOLD_MS=0 LINGER_S=35 TRANSPORTS="udp tcp"
#   SERVERS="herald kamailio"   HERALD=path/to/herald (else a release build, copied to a temp dir)
#   KEEP=DIR   keep the callgrind output files there (callgrind.SERVER.TRANSPORT.{calls,idle}.PID)
#   RSIPSTACK_PROXY=path RSIPSTACK_THREADS=1   FAIR_SCHED=yes|no   BASE_PORT=18400 (uses BASE_PORT..BASE_PORT+39 on 127.0.0.1)
# Needs valgrind, sipp and kamailio (scripts/test.sh installs them).
set -euo pipefail
cd "$(dirname "$0")/.."

CALLS=${CALLS:-2000}
WARMUP=${WARMUP:-100}
RATE=${RATE:-50}
HOLD_MS=${HOLD_MS:-0}
LINGER_S=${LINGER_S:-35}
TRANSPORTS=${TRANSPORTS:-udp tcp}
SERVERS=${SERVERS:-herald kamailio}
KAMAILIO=${KAMAILIO:-/usr/sbin/kamailio}
FAIR_SCHED=${FAIR_SCHED:-yes}
BASE_PORT=${BASE_PORT:-18400}
KEEP=${KEEP:-}
PORT=$BASE_PORT UAS_PORT=$((BASE_PORT + 10)) REG_PORT=$((BASE_PORT + 20)) UAC_PORT=$((BASE_PORT + 30))
WORKERS=1

. scripts/lib/preamble.sh
need valgrind "apt-get install valgrind"
need sipp "apt-get install sip-tester"
RSIPSTACK_PROXY=${RSIPSTACK_PROXY:-}
RSIPSTACK_THREADS=${RSIPSTACK_THREADS:-1}
case " $SERVERS " in *" rsipstack "*) [ -x "$RSIPSTACK_PROXY" ] || { echo "set RSIPSTACK_PROXY (see the header)" >&2; exit 2; } ;; esac
case " $SERVERS " in *" kamailio "*) need_kamailio ;; esac

scratch server_pid uas_pid

herald_rev="binary ${HERALD:-}"
if [ -z "${HERALD:-}" ] && [[ " $SERVERS " == *" herald "* ]]; then
    herald_rev=$(source_rev)
    herald_copy -j2
fi
[ -n "$KEEP" ] && mkdir -p "$KEEP"

stat_col() { # FILE COLUMN: value in the last line of a SIPp statistics file
    awk -F';' -v c="$2" 'NR == 1 {for (i = 1; i <= NF; i++) if ($i == c) n = i} NF > 1 {v = $n} END {print v + 0}' "$1"
}
wait_listen() { # PORT PID: until a TCP socket listens on 127.0.0.1:PORT
    local hex
    hex=$(printf '0100007F:%04X' "$1")
    for _ in $(seq 600); do
        awk -v a="$hex" '$2 == a && $4 == "0A" {f = 1} END {exit !f}' /proc/net/tcp && return 0
        kill -0 "$2" 2>/dev/null || { echo "process $2 died; log:" >&2; tail -n 20 "$tmp"/*.log >&2; exit 1; }
        sleep 0.05
    done
    echo "nothing listens on 127.0.0.1:$1" >&2
    exit 1
}
sipp_t() { [ "$1" = tcp ] && echo t1 || echo u1; }

start_server() { # NAME TRANSPORT OUT_PREFIX: under callgrind, in the background; pid in $server_pid
    local name=$1 transport=$2 out=$3
    local vg=(valgrind --tool=callgrind "--fair-sched=$FAIR_SCHED" "--callgrind-out-file=$out.%p")
    if [ "$name" = herald ]; then
        local extra=''
        [ "$transport" = udp ] || extra=", \"$transport\""
        # No overload control: under valgrind herald runs ~50 times slower, so its UDP socket
        # queue waits look like overload on a busy machine and it would answer 503 (Kamailio's
        # configuration sheds nothing either). Registrations in memory only, as Kamailio's
        # usrloc db_mode=0: with the default write-back database ($tmp/herald-location.db, shared
        # by every run of this script) the TCP run's herald loaded the UDP run's binding of the
        # callee and forked every INVITE to that dead UDP contact as well (retransmissions,
        # CANCELs, a worker ticking every 10 ms): about 55k instructions per call more,
        # in every TRANSPORTS="udp tcp" run and none of the "tcp" ones.
        herald_bench_config "$PORT" "$(printf '[overload]\nenabled = false\n[location]\nmode = "memory"')" |
            sed "s/^transports = \\[\"udp\"\\]/transports = [\"udp\"$extra]/" >"$tmp/herald.toml"
        "${vg[@]}" "$HERALD" serve --config "$tmp/herald.toml" >"$tmp/server.log" 2>&1 &
        server_pid=$!
    elif [ "$name" = rsipstack ]; then
        local tcp=()
        [ "$transport" = tcp ] && tcp=(--tcp-port "$PORT")
        TOKIO_WORKER_THREADS=$RSIPSTACK_THREADS "${vg[@]}" "$RSIPSTACK_PROXY" --addr 127.0.0.1 --port "$PORT" \
            "${tcp[@]}" >"$tmp/server.log" 2>&1 &
        server_pid=$!
    else
        local cfg=bench/kamailio-bench.cfg listen=(-l "udp:127.0.0.1:$PORT") tcp_children=()
        if [ "$transport" = tcp ]; then
            tcp_children=(-N 1)
            sed 's/^disable_tcp=yes/disable_tcp=no/' bench/kamailio-bench.cfg >"$tmp/kamailio-tcp.cfg"
            cfg=$tmp/kamailio-tcp.cfg
            listen+=(-l "tcp:127.0.0.1:$PORT")
        fi
        mkdir -p "$tmp/kamailio-run"
        "${vg[@]}" --trace-children=yes "$KAMAILIO" -f "$cfg" -DD -E -x tlsf -X tlsf -m 1024 -M 16 -n 1 \
            "${tcp_children[@]}" "${listen[@]}" -w "$tmp/kamailio-run" -Y "$tmp/kamailio-run" >"$tmp/server.log" 2>&1 &
        server_pid=$!
    fi
    wait_bound "$PORT" "$server_pid"
    [ "$transport" = tcp ] && wait_listen "$PORT" "$server_pid"
    # Kamailio forks its children after binding, herald starts its threads: let both settle (a
    # request sent earlier would wait in the socket anyway, and be retransmitted).
    sleep "${SETTLE_S:-3}"
}

calls() { # TRANSPORT N TAG: N calls of uac.xml at RATE through the server; checks every call
    local t=$1 n=$2 tag=$3
    sipp "127.0.0.1:$PORT" -sf tests/sipp/uac.xml -s bob -t "$(sipp_t "$t")" -i 127.0.0.1 -p $UAC_PORT \
        -cp $((UAC_PORT + 1)) -mp $((UAC_PORT + 2)) -r "$RATE" -m "$n" -l $((RATE * 10)) -d "$HOLD_MS" \
        -timeout $((n / RATE + 120))s -nostdin -trace_stat -stf "$tmp/stat.$tag.csv" -fd 1 \
        -trace_err -error_file "$tmp/err.$tag.log" >/dev/null 2>"$tmp/uac.$tag.log" || true
    local ok failed
    ok=$(stat_col "$tmp/stat.$tag.csv" 'SuccessfulCall(C)')
    failed=$(stat_col "$tmp/stat.$tag.csv" 'FailedCall(C)')
    if [ "$ok" != "$n" ] || [ "$failed" != 0 ]; then
        echo "$tag: $ok of $n calls succeeded, $failed failed; SIPp errors:" >&2
        tail -n 20 "$tmp/err.$tag.log" "$tmp/uac.$tag.log" >&2 || true
        tail -n 20 "$tmp/server.log" >&2 || true
        exit 1
    fi
    stat_col "$tmp/stat.$tag.csv" 'Retransmissions(C)' >"$tmp/retrans.$tag"
}

# run NAME TRANSPORT KIND: one server lifetime (KIND calls or idle); the summed instruction
# count of all its processes in $tmp/count.NAME.TRANSPORT.KIND, the calls' wall time (s) in
# $tmp/wall.NAME.TRANSPORT, the call run's lifetime from start to stop in
# $tmp/life.NAME.TRANSPORT, which the idle run then matches: idle herald still spends about 2M
# instructions a second (Kamailio 0.8M), so a second more or less in one of the runs would move
# a 500-call count by 1-2%. (Not in a $(...) subshell: the EXIT trap must see the server's pid
# to stop it when a check fails.)
run() {
    local name=$1 t=$2 kind=$3
    local out=$tmp/cg/callgrind.$name.$t.$kind born
    mkdir -p "$tmp/cg"
    rm -f "$out".*
    born=$(date +%s.%N)
    start_server "$name" "$t" "$out"
    local uas=tests/sipp/uas.xml
    [ "$name" = rsipstack ] && uas=bench/rsipstack-uas.xml
    sipp -sf "$uas" -t "$(sipp_t "$t")" -i 127.0.0.1 -p $UAS_PORT -cp $((UAS_PORT + 1)) \
        -mp $((UAS_PORT + 2)) -nostdin >/dev/null 2>"$tmp/uas.log" &
    uas_pid=$!
    if [ "$t" = tcp ]; then wait_listen $UAS_PORT $uas_pid; else wait_bound $UAS_PORT $uas_pid; fi
    sipp "127.0.0.1:$PORT" -sf bench/register-contact.xml -s bob -t u1 -key contact_host 127.0.0.1 \
        -key contact_transport "$t" -key contact_port $UAS_PORT -i 127.0.0.1 -p $REG_PORT -cp $((REG_PORT + 1)) -mp $((REG_PORT + 2)) \
        -m 1 -timeout 30s -nostdin >/dev/null 2>"$tmp/register.log" ||
        { echo "$name $t: REGISTER failed" >&2; tail -n 20 "$tmp/server.log" >&2; exit 1; }
    [ "$WARMUP" -gt 0 ] && calls "$t" "$WARMUP" "$name.$t.$kind.warmup"
    if [ "$kind" = calls ]; then
        local t0 t1
        t0=$(date +%s.%N)
        calls "$t" "$CALLS" "$name.$t"
        t1=$(date +%s.%N)
        awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.1f", b - a}' >"$tmp/wall.$name.$t"
        sleep "$LINGER_S"
        awk -v a="$born" -v b="$(date +%s.%N)" 'BEGIN {printf "%.2f", b - a}' >"$tmp/life.$name.$t"
    else
        sleep "$(awk -v a="$born" -v b="$(date +%s.%N)" -v l="$(cat "$tmp/life.$name.$t")" \
            'BEGIN {s = l - (b - a); printf "%.2f", (s > 0 ? s : 0)}')"
    fi
    local pids
    mapfile -t pids < <(tree "$server_pid")
    # SIGTERM to the server (Kamailio's main process stops its children); valgrind writes each
    # process's counts when it exits.
    kill -TERM "$server_pid" 2>/dev/null || true
    for _ in $(seq 600); do
        local alive=0 p
        for p in "${pids[@]}"; do kill -0 "$p" 2>/dev/null && alive=1; done
        [ $alive = 0 ] && break
        sleep 0.1
    done
    # shellcheck disable=SC2068
    stop ${pids[@]}
    server_pid=''
    stop "$uas_pid"
    uas_pid=''
    [ -n "$KEEP" ] && cp "$out".* "$KEEP/"
    local f total=0 n=0
    for f in "$out".*; do
        total=$((total + $(awk '/^summary:|^totals:/ {print $2; exit}' "$f")))
        n=$((n + 1))
    done
    [ "$n" -gt 0 ] || { echo "$name $t $kind: no callgrind output" >&2; exit 1; }
    echo "$total" >"$tmp/count.$name.$t.$kind"
}

echo "# instructions per call: CALLS=$CALLS WARMUP=$WARMUP RATE=$RATE HOLD_MS=$HOLD_MS LINGER_S=$LINGER_S" \
    "FAIR_SCHED=$FAIR_SCHED herald: $herald_rev;" \
    "$("$KAMAILIO" -v 2>/dev/null | awk 'NR == 1 {print $2, $3}' || true) $(valgrind --version)"
: >"$tmp/table"
for t in $TRANSPORTS; do
    for name in $SERVERS; do
        run "$name" "$t" calls
        wall=$(cat "$tmp/wall.$name.$t")
        run "$name" "$t" idle
        busy=$(cat "$tmp/count.$name.$t.calls")
        idle=$(cat "$tmp/count.$name.$t.idle")
        per_call=$(( (busy - idle) / CALLS ))
        echo "$name $t call_run $busy"
        echo "$name $t idle_run $idle"
        echo "$name $t calls $CALLS"
        echo "$name $t wall_s $wall"
        echo "$name $t lifetime_s $(cat "$tmp/life.$name.$t")"
        retrans=$(cat "$tmp/retrans.$name.$t")
        echo "$name $t retransmissions $retrans"
        # A retransmission is work a call does not normally cause (the server was too slow under
        # valgrind on a busy machine): noted, and small next to 14 messages a call.
        [ "$retrans" = 0 ] || echo "warning: $name $t: SIPp retransmitted $retrans times during the calls" >&2
        echo "$name $t instructions_per_call $per_call"
        echo "$t $name $per_call" >>"$tmp/table"
    done
done

echo
echo "| transport | server | instructions per call | herald / server |"
echo "| --- | --- | ---: | ---: |"
awk '{v[$1, $2] = $3; if (!($1 in seen)) {seen[$1] = 1; order[++n] = $1}; s[$1] = s[$1] " " $2}
    END {
        for (i = 1; i <= n; i++) {
            t = order[i]; h = v[t, "herald"]; k = split(s[t], names, " ")
            for (j = 1; j <= k; j++) {
                r = (h != "" && v[t, names[j]] > 0) ? sprintf("%.2f", h / v[t, names[j]]) : "-"
                printf "| %s | %s | %s | %s |\n", t, names[j], v[t, names[j]], r
            }
        }
    }' "$tmp/table"
