#!/usr/bin/env bash
# Memory per idle TCP, WS or WSS connection of the herald serve runtime.
#
# Starts a server (`herald serve` once the binary has it, else the herald-server example
# `options_server`, the same runtime with the test OPTIONS handler) on 127.0.0.1, opens N idle
# connections from several 127.0.0.x source addresses (each sends one CRLFCRLF ping and waits
# for the pong), and prints the server's VmRSS before and after, and KB per connection. Also
# prints the kernel's TCP memory (/proc/net/sockstat), which VmRSS does not include.
# MODE=ws upgrades each connection to SIP over WebSocket (RFC 7118) first and pings with
# WebSocket messages; MODE=tls and MODE=wss do the same as tcp and ws over TLS (a throwaway
# certificate made with openssl).
#
# Usage: scripts/bench-tcp-idle.sh            N=100000 WORKERS=2 PORT=15060 SOURCES=8 MODE=tcp
#        HERALD=target/release/herald (the server, when it has `serve`)
# N is capped by the open-file limit: the server and the client each need one descriptor per
# connection, and `ulimit -n` cannot exceed the hard limit without CAP_SYS_RESOURCE.
set -euo pipefail
cd "$(dirname "$0")/.."

N=${N:-100000}
WORKERS=${WORKERS:-2}
PORT=${PORT:-15060}
SOURCES=${SOURCES:-8}
MODE=${MODE:-tcp}
HERALD=${HERALD:-target/release/herald}

hard=$(ulimit -Hn)
want=$((N + 1024))
if [ "$hard" != unlimited ] && [ "$want" -gt "$hard" ]; then
    ulimit -Hn "$want" 2>/dev/null || true
    hard=$(ulimit -Hn)
fi
if [ "$hard" = unlimited ] || [ "$want" -le "$hard" ]; then ulimit -n "$want"; else ulimit -n "$hard"; fi
limit=$(ulimit -n)
if [ "$N" -gt $((limit - 200)) ]; then
    echo "note: open-file limit is $limit (hard $hard): testing $((limit - 200)) connections instead of $N" >&2
    N=$((limit - 200))
fi

cargo build --release -j2 -p herald-server --examples >&2
. scripts/lib/preamble.sh
scratch spid cpid
if [ "$MODE" = wss ] || [ "$MODE" = tls ]; then
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 -subj /CN=localhost \
        -addext subjectAltName=IP:127.0.0.1 -keyout "$tmp/key.pem" -out "$tmp/cert.pem" 2>/dev/null
fi
herald_idle_config "$PORT" "$N" "$MODE" "$tmp/cert.pem" "$tmp/key.pem" >"$tmp/herald.toml"

if [ -x "$HERALD" ] && "$HERALD" --help 2>/dev/null | grep -q '^  serve'; then
    server=("$HERALD" serve --config "$tmp/herald.toml")
else
    server=(target/release/examples/options_server "$tmp/herald.toml")
fi
echo "server: ${server[*]}" >&2
"${server[@]}" &
spid=$!
for _ in $(seq 100); do
    (exec 3<>"/dev/tcp/127.0.0.1/$PORT") 2>/dev/null && break
    sleep 0.1
done
sleep 0.5
rss() { awk '/^VmRSS/ {print $2}' "/proc/$1/status"; }
tcpmem() { awk '/^TCP:/ {for (i = 1; i <= NF; i++) if ($i == "mem") print $(i + 1)}' /proc/net/sockstat; }
before=$(rss $spid)
kbefore=$(tcpmem)

mkfifo "$tmp/hold"
target/release/examples/tcp_idle_clients "127.0.0.1:$PORT" "$N" "$SOURCES" 3600 "$MODE" <"$tmp/hold" >"$tmp/clients.out" &
cpid=$!
exec 4>"$tmp/hold"
while ! grep -q READY "$tmp/clients.out" 2>/dev/null; do
    kill -0 $cpid 2>/dev/null || { echo "clients died" >&2; exit 1; }
    sleep 0.5
done
opened=$(awk '/READY/ {print $2}' "$tmp/clients.out")
sleep 2
after=$(rss $spid)
kafter=$(tcpmem)
pages=$(getconf PAGESIZE)

echo "connections:        $opened $MODE (asked $N, open-file limit $limit)"
echo "server VmRSS:       ${before} KB before, ${after} KB after"
if [ "$opened" -gt 0 ]; then
    awk -v a="$after" -v b="$before" -v n="$opened" 'BEGIN { printf "per connection:     %.2f KB (user space, VmRSS)\n", (a - b) / n }'
    if [ "${kafter:-0}" -gt "${kbefore:-0}" ]; then
        awk -v a="$kafter" -v b="$kbefore" -v n="$opened" -v p="$pages" \
            'BEGIN { printf "kernel TCP memory:  %.2f KB per connection, both ends (sockstat mem pages)\n", (a - b) * p / 1024 / n }'
    else
        echo "kernel TCP memory:  not reported by this kernel (/proc/net/sockstat mem unchanged)"
    fi
fi

exec 4>&-
wait $cpid || true
kill -TERM $spid
status=0
wait $spid || status=$?
echo "server exit status after SIGTERM: $status"
