#!/usr/bin/env bash
# Builds the libFuzzer targets in fuzz/ with the stable toolchain and runs each for a while.
#
#   scripts/fuzz.sh [SECONDS_PER_TARGET] [TARGET...]     (default: 20 s each, all targets)
#
# Stable Rust cannot use -Zsanitizer, but SanitizerCoverage is reachable through the stable
# -Cpasses / -Cllvm-args flags (the same ones cargo-fuzz passes). Without AddressSanitizer the
# targets find panics, failed assertions, overflows (-Coverflow-checks), debug assertions and
# aborts, which is what matters for safe Rust.
#
# The seed corpus is rebuilt on every run from the RFC 4475 torture messages in
# ../shared/testdata/sip-torture/rfc4475 and the benchmark fixtures; fuzz/corpus, fuzz/target
# and fuzz/artifacts are gitignored. Exit status is non-zero if any target crashes.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
FUZZ="$ROOT/fuzz"
SECONDS_PER_TARGET="${1:-20}"
shift || true
TARGETS=("$@")
if [ ${#TARGETS[@]} -eq 0 ]; then
    TARGETS=(parse_message stream_framer uri engine_pipeline stun)
fi
TORTURE="${HERALD_TORTURE_DIR:-$ROOT/../shared/testdata/sip-torture/rfc4475}"
FIXTURES="$ROOT/crates/sip/benches/messages"

case "$SECONDS_PER_TARGET" in
    '' | *[!0-9]*) echo "usage: $0 [SECONDS_PER_TARGET] [TARGET...]" >&2; exit 2 ;;
esac

HOST="$(rustc -vV | sed -n 's/^host: //p')"
# An explicit --target keeps RUSTFLAGS away from build scripts and proc macros, which would
# otherwise be instrumented too and fail to link without libFuzzer's runtime.
export RUSTFLAGS="-Cpasses=sancov-module \
-Cllvm-args=-sanitizer-coverage-level=4 \
-Cllvm-args=-sanitizer-coverage-inline-8bit-counters \
-Cllvm-args=-sanitizer-coverage-pc-table \
-Cllvm-args=-sanitizer-coverage-trace-compares \
--cfg fuzzing \
-Cdebug-assertions -Coverflow-checks"
echo "== building fuzz targets (release, $HOST)"
cargo build --release -j 2 --manifest-path "$FUZZ/Cargo.toml" --target "$HOST" \
    $(printf -- '--bin %s ' "${TARGETS[@]}")
BIN="$FUZZ/target/$HOST/release"

# --- seed corpus -------------------------------------------------------------------------
seed_dir() { mkdir -p "$FUZZ/corpus/$1"; echo "$FUZZ/corpus/$1"; }
messages=()
if [ -d "$TORTURE" ]; then
    for f in "$TORTURE"/*.dat; do [ -e "$f" ] && messages+=("$f"); done
else
    echo "warning: $TORTURE not found; seeding from the bench fixtures only" >&2
fi
for f in "$FIXTURES"/*.sip; do [ -e "$f" ] && messages+=("$f"); done

pm="$(seed_dir parse_message)"
sf="$(seed_dir stream_framer)"
ur="$(seed_dir uri)"
for f in "${messages[@]}"; do
    base="seed-$(basename "$f")"
    cp -f "$f" "$pm/$base"
    # stream_framer: the first byte picks chunking and limits, the rest is the stream.
    { printf '\x00'; cat "$f"; } >"$sf/$base.0"
    { printf '\x81'; cat "$f"; printf '\r\n\r\n'; cat "$f"; } >"$sf/$base.81"
    # uri: the Request-URI and every <...> URI of the message, one seed each.
    {
        head -n 1 "$f" | tr -d '\r' | awk 'NF == 3 && $3 ~ /^SIP\// { print $2 }'
        grep -ao '<[^<> ]*>' "$f" | tr -d '<>' || true
    } | sort -u | while IFS= read -r u; do
        [ -n "$u" ] || continue
        h="$(printf '%s' "$u" | cksum | cut -d' ' -f1)"
        printf '%s' "$u" >"$ur/seed-$h"
    done
done
# stun: RFC 5769 §2.1's sample Binding request and a bare one (RFC 5626 §8 needs no attributes).
st="$(seed_dir stun)"
printf '%b' '\x00\x01\x00\x58\x21\x12\xa4\x42\xb7\xe7\xa7\x01\xbc\x34\xd6\x86\xfa\x87\xdf\xae\x80\x22\x00\x10STUN test client\x00\x24\x00\x04\x6e\x00\x01\xff\x80\x29\x00\x08\x93\x2f\xf9\xb1\x51\x26\x3b\x36\x00\x06\x00\x09evtj:h6vY   \x00\x08\x00\x14\x9a\xea\xa7\x0c\xbf\xd8\xcb\x56\x78\x1e\xf2\xb5\xb2\xd3\xf2\x49\xc1\xb5\x71\xa2\x80\x28\x00\x04\xe5\x7a\x3b\xcf' >"$st/seed-rfc5769"
printf '%b' '\x00\x01\x00\x00\x21\x12\xa4\x42abcdefghijkl' >"$st/seed-bare"
# A whole call on one connection, cut at every kind of chunk size.
if compgen -G "$FIXTURES/*.sip" >/dev/null; then
    { printf '\xfe'; cat "$FIXTURES"/*.sip; } >"$sf/seed-call-stream"
fi

# --- run ---------------------------------------------------------------------------------
status=0
summary=()
for t in "${TARGETS[@]}"; do
    log="$FUZZ/target/fuzz-$t.log"
    mkdir -p "$FUZZ/artifacts/$t" "$FUZZ/corpus/$t"
    echo "== fuzzing $t for ${SECONDS_PER_TARGET}s (log: ${log#"$ROOT"/})"
    set +e
    "$BIN/$t" "$FUZZ/corpus/$t" \
        -max_total_time="$SECONDS_PER_TARGET" -rss_limit_mb=2048 -max_len=70000 \
        -artifact_prefix="$FUZZ/artifacts/$t/" -print_final_stats=1 >"$log" 2>&1
    rc=$?
    set -e
    execs="$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)"
    last="$(grep -E '^#[0-9]+' "$log" | tail -n 1 || true)"
    cov="$(printf '%s' "$last" | sed -n 's/.* cov: \([0-9]*\).*/\1/p')"
    ft="$(printf '%s' "$last" | sed -n 's/.* ft: \([0-9]*\).*/\1/p')"
    corp="$(printf '%s' "$last" | sed -n 's/.* corp: \([0-9]*\).*/\1/p')"
    if [ "$rc" -eq 0 ]; then
        line="$t: ok, ${execs:-?} execs, cov ${cov:-?}, ft ${ft:-?}, corpus ${corp:-?}"
    else
        status=1
        artifact="$(sed -n 's/.*Test unit written to \(.*\)$/\1/p' "$log" | tail -n 1)"
        line="$t: CRASH (exit $rc) after ${execs:-?} execs, input ${artifact:-?}"
        grep -m 1 -A 1 "panicked at" "$log" >&2 || grep -m 3 -E "^==[0-9]+== ERROR|SUMMARY" "$log" >&2 || true
        if [ -n "$artifact" ] && [ -f "$artifact" ]; then
            echo "$t: crashing input (hex, first 512 bytes): $(head -c 512 "$artifact" | od -An -v -tx1 | tr -d ' \n')" >&2
        fi
    fi
    summary+=("$line")
done

echo "== summary"
printf '%s\n' "${summary[@]}"
exit "$status"
