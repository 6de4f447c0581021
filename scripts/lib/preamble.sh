# The opening the benchmark scripts share: the tools a script needs, a release herald, and a
# scratch directory that goes away on exit together with the processes the script started.
# Source it from the repository root (`cd "$(dirname "$0")/.."` first); it sources procs.sh.
# shellcheck source=scripts/lib/procs.sh
. scripts/lib/procs.sh

need() { # COMMAND HINT: exit 2 unless COMMAND is on PATH ("COMMAND not found (HINT)")
    command -v "$1" >/dev/null || { echo "$1 not found ($2)" >&2; exit 2; }
}

need_kamailio() { # $KAMAILIO must be an executable
    [ -x "$KAMAILIO" ] || { echo "$KAMAILIO not found (apt-get install kamailio)" >&2; exit 2; }
}

build_herald() { # builds target/release/herald (cargo rebuilds only what changed): HERALD names it
    cargo build --release -j2 --bin herald >&2
    HERALD=target/release/herald
}

herald_or_build() { # $HERALD, or target/release/herald built when $HERALD is not an executable
    [ -x "$HERALD" ] || { cargo build --release -j2 --bin herald >&2; }
}

scratch() { # PIDVAR...: $tmp, a new scratch directory, and $HZ (what procs.sh expects); the
    # variables named are emptied. On exit the processes whose pids they then hold are stopped
    # with all their descendants (Kamailio's children), the script's `on_exit` runs if it defines
    # one, and $tmp is removed; Ctrl-C or SIGTERM exits 130 through the same path.
    HZ=$(getconf CLK_TCK)
    tmp=$(mktemp -d)
    SCRATCH_PIDS="$*"
    local v
    for v in "$@"; do printf -v "$v" '%s' ''; done
    trap scratch_exit EXIT
    trap 'exit 130' INT TERM
}

scratch_exit() {
    local v p all=()
    # Every tree first: a child outlives its stopped parent, re-parented where pgrep -P misses it.
    for v in $SCRATCH_PIDS; do
        p=${!v:-}
        # shellcheck disable=SC2207
        [ -n "$p" ] && all+=($(tree "$p" 2>/dev/null || true))
    done
    stop "${all[@]}"
    if declare -F on_exit >/dev/null; then on_exit; fi
    rm -rf "$tmp"
}

source_rev() { # the commit checked out, "+dirty" when crates/ or src/ differ from it
    local rev
    rev=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
    git diff --quiet HEAD -- crates src 2>/dev/null || rev="$rev+dirty"
    echo "$rev"
}

herald_copy() { # [CARGO-FLAG...]: builds target/release/herald and names a copy of it in $tmp
    # HERALD: someone else's rebuild must not change the binary under a run
    cargo build --release "$@" --bin herald >&2
    cp target/release/herald "$tmp/herald"
    HERALD=$tmp/herald
}
