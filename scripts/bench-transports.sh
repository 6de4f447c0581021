#!/usr/bin/env bash
# CPU cost per call of herald over UDP, TCP, TLS, WS and WSS, measured with `herald bench calls`
# in one run against one herald build (release, WORKERS workers, record-routing, no
# authentication): the same call shape (INVITE, 180, 200, ACK, hold, BYE, 200) at RATE calls/s
# for DURATION_S seconds per transport, REPEAT rounds in turn (udp, tcp, tls, udp, ...; with
# TRANSPORTS="udp ws": udp, ws, udp, ws, ABAB) so that drift of the machine hits every transport
# alike, herald restarted before each run. Over ws and wss both the generator's callers and its
# callees are WebSocket clients, so every call is WS-to-WS (RFC 7118). Server CPU comes from
# --server-pid (utime + stime of herald over the measurement window), per 1,000 calls; the
# generator's own CPU per call is shown too (it pays for TLS and WebSocket on its side as well).
# Medians over the rounds in $OUT/summary.md, each transport against the first one listed.
#
# Usage: scripts/bench-transports.sh    WORKERS=2 RATE=500 DURATION_S=20 REPEAT=3
#        TRANSPORTS="udp tcp tls" (any of udp tcp tls ws wss) OUT=target/transports
# Ports: 127.0.0.1:17640-17643. Needs the openssl command (test certificates).
set -euo pipefail
cd "$(dirname "$0")/.."

WORKERS=${WORKERS:-2}
RATE=${RATE:-500}
DURATION_S=${DURATION_S:-20}
REPEAT=${REPEAT:-3}
OUT=${OUT:-target/transports}
TRANSPORTS=${TRANSPORTS:-udp tcp tls}
PORT=17640 TLS_PORT=17641 WS_PORT=17642 WSS_PORT=17643
for t in $TRANSPORTS; do
    case $t in udp | tcp | tls | ws | wss) ;; *) echo "unknown transport '$t' in TRANSPORTS" >&2; exit 2 ;; esac
done

. scripts/lib/preamble.sh
build_herald
mkdir -p "$OUT"
scratch server_pid

# A throwaway CA and a certificate for 127.0.0.1.
ec=(-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes)
openssl req -x509 "${ec[@]}" -keyout "$tmp/ca-key.pem" -out "$tmp/ca.pem" -days 2 -subj /CN=bench-ca 2>/dev/null
openssl req "${ec[@]}" -keyout "$tmp/key.pem" -out "$tmp/req.pem" -subj /CN=localhost 2>/dev/null
printf 'subjectAltName=IP:127.0.0.1\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth,clientAuth\n' >"$tmp/ext.cnf"
openssl x509 -req -in "$tmp/req.pem" -CA "$tmp/ca.pem" -CAkey "$tmp/ca-key.pem" -CAcreateserial \
    -out "$tmp/cert.pem" -days 2 -extfile "$tmp/ext.cnf" 2>/dev/null

herald_bench_config "$PORT" "[[listen]]
address = \"127.0.0.1:$TLS_PORT\"
transports = [\"tls\"]
[[listen]]
address = \"127.0.0.1:$WS_PORT\"
transports = [\"ws\"]
[[listen]]
address = \"127.0.0.1:$WSS_PORT\"
transports = [\"wss\"]
[tls]
certificate = \"$tmp/cert.pem\"
private_key = \"$tmp/key.pem\"
ca_file = \"$tmp/ca.pem\"" | sed 's/transports = \["udp"\]/transports = ["udp", "tcp"]/' >"$tmp/herald.toml"
start_herald() {
    stop "$server_pid"
    "$HERALD" serve --config "$tmp/herald.toml" >"$tmp/herald.log" 2>&1 &
    server_pid=$!
    wait_bound "$PORT" "$server_pid"
}

for round in $(seq "$REPEAT"); do
    for t in $TRANSPORTS; do
        # A fresh herald per run: the generator's callees leave their bindings behind (contacts
        # on its closed sockets), which later runs would otherwise fork to.
        start_herald
        port=$PORT
        extra=()
        case $t in
            tls) port=$TLS_PORT extra=(--tls-ca "$tmp/ca.pem") ;;
            ws) port=$WS_PORT ;;
            wss) port=$WSS_PORT extra=(--tls-ca "$tmp/ca.pem") ;;
        esac
        echo "== round $round: $t at $RATE calls/s for $DURATION_S s" >&2
        "$HERALD" bench calls --proxy "127.0.0.1:$port" --domain 127.0.0.1 --transport "$t" "${extra[@]}" \
            --rate "$RATE" --duration "$DURATION_S" --users 100 --hold 0 --server-pid "$server_pid" \
            --label "$t" --json "$OUT/$t-$round.json" >"$OUT/$t-$round.txt" 2>&1 ||
            { echo "$t round $round failed:" >&2; tail -n 20 "$OUT/$t-$round.txt" >&2; exit 1; }
    done
done

python3 - "$OUT" "$REPEAT" "$RATE" "$DURATION_S" "$WORKERS" "$TRANSPORTS" <<'PY' | tee "$OUT/summary.md"
import json, statistics, sys
out, repeat, rate, dur, workers = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5]
transports = sys.argv[6].split()
rows = {}
for t in transports:
    server, gen, failed, srd = [], [], 0, []
    for r in range(1, repeat + 1):
        run = json.load(open(f"{out}/{t}-{r}.json"))  # kind "calls": the run's fields at top level
        server.append(run["servers"][0]["cpu_s_per_1000_calls"])
        gen.append(run["generator"]["cpu_us_per_call"])
        failed += run["failed"]
        srd.append(run["srd"]["p50_us"])
    rows[t] = (statistics.median(server), statistics.median(gen), failed, statistics.median(srd))
first = transports[0]
base = rows[first][0]
names = ", ".join(t.upper() for t in transports)
print(f"herald over {names}: {rate} calls/s, {dur} s per run, {repeat} rounds, {workers} workers, medians\n")
print(f"| transport | herald CPU s / 1,000 calls | vs {first.upper()} | generator CPU µs / call | failed calls | SRD p50 |")
print("|---|---|---|---|---|---|")
for t, (s, g, f, d) in rows.items():
    print(f"| {t} | {s:.3f} | {s / base:.2f}x | {g:.0f} | {f} | {d / 1000:.2f} ms |")
PY
