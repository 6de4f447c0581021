#!/usr/bin/env bash
# Runs every herald test on a fresh Debian machine: formatting, lints, unit, corpus, property
# and integration tests, and a bounded fuzz run. Installs what it needs with apt-get when missing.
# Usage: ./scripts/test.sh            (FUZZ_SECONDS=N sets seconds per fuzz target, default 20)
set -euo pipefail
cd "$(dirname "$0")/.."

# Debian packages the tests need: a C++ compiler for libFuzzer, SIPp, Kamailio (with its tls
# module; openssl makes the test certificates) and baresip (a real phone) as real peers
# of the integration tests, iproute2 for the network namespaces of tests/netns_phones.rs,
# Chromium to render `herald bench report` pages and, headless, to run the browser phones of
# tests/browser_ws.rs (JsSIP is vendored in tests/browser_support: no npm at test time),
# python3 for scripts/module_cycles.py, coturn for its STUN client (turnutils_stunclient: the
# real peer of tests/stun_peer.rs; Debian has no stuntman-client), nftables for the masquerading
# router between a phone and herald in tests/nat_traversal.rs, valgrind (callgrind) for the
# instructions-per-call check (scripts/instructions-check.sh).
need_pkgs=()
command -v c++ >/dev/null 2>&1 || need_pkgs+=(g++)
command -v sipp >/dev/null 2>&1 || need_pkgs+=(sip-tester)
command -v baresip >/dev/null 2>&1 || need_pkgs+=(baresip)
command -v ip >/dev/null 2>&1 || need_pkgs+=(iproute2)
command -v kamailio >/dev/null 2>&1 && [ -x /usr/sbin/kamailio ] || need_pkgs+=(kamailio)
[ -f /usr/lib/x86_64-linux-gnu/kamailio/modules/tls.so ] || need_pkgs+=(kamailio-tls-modules)
command -v openssl >/dev/null 2>&1 || need_pkgs+=(openssl)
command -v python3 >/dev/null 2>&1 || need_pkgs+=(python3)
command -v chromium >/dev/null 2>&1 || need_pkgs+=(chromium)
command -v turnutils_stunclient >/dev/null 2>&1 || need_pkgs+=(coturn)
command -v redis-server >/dev/null 2>&1 || need_pkgs+=(redis-server)
command -v nft >/dev/null 2>&1 || need_pkgs+=(nftables)
command -v valgrind >/dev/null 2>&1 || need_pkgs+=(valgrind)
if [ ${#need_pkgs[@]} -gt 0 ]; then
    echo "== installing ${need_pkgs[*]}"
    if [ "$(id -u)" -ne 0 ]; then SUDO=sudo; else SUDO=; fi
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need_pkgs[@]}"
fi
# The Debian package starts a system Kamailio on port 5060; the tests run their own instances.
if command -v systemctl >/dev/null 2>&1; then systemctl stop kamailio >/dev/null 2>&1 || true; fi
pkill -x kamailio >/dev/null 2>&1 || true

# The RFC 4475 / RFC 5118 corpus lives beside the repository (../shared), as in CI.
if [ -z "${HERALD_TORTURE_DIR:-}" ] && [ ! -d ../shared/testdata/sip-torture ]; then
    echo "error: ../shared/testdata/sip-torture not found; set HERALD_TORTURE_DIR" >&2
    exit 2
fi

# A run that compiles everything once gains nothing from incremental caches, which add to the
# target directory's size on disk (a CI host ran out of disk, stop 37). A caller may set it.
export CARGO_INCREMENTAL="${CARGO_INCREMENTAL:-0}"
echo "== disk free where the build goes"
df -h "${CARGO_TARGET_DIR:-target}" 2>/dev/null || df -h .

echo "== import cycles between modules (docs/design/architecture.md)"
python3 scripts/module_cycles.py
echo "== cargo fmt --check"
cargo fmt --all -- --check
echo "== cargo clippy --all-targets -- -D warnings"
cargo clippy --workspace --all-targets -- -D warnings
echo "== cargo test"
cargo test --workspace
du -sh "${CARGO_TARGET_DIR:-target}" 2>/dev/null || true
echo "== bounded fuzz run"
./scripts/fuzz.sh "${FUZZ_SECONDS:-20}"
echo "== instructions per call against bench/instructions-baseline.txt (callgrind)"
./scripts/instructions-check.sh
echo "== all tests passed"
