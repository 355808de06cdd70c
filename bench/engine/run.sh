#!/usr/bin/env bash
# bench/engine/run.sh — build and run the engine benchmarks (`make bench-engine`).
# Installs liblmdb-dev and libsqlite3-dev if their headers are missing, builds
# build-bench/ (release, -Dbench=true) with meson and ninja from PATH, runs
# bench-engine (key/value engine) then bench-objects (object layer, Test 1
# model) and prints their Markdown tables. Arguments before `--` go to
# bench-engine, those after it to bench-objects, e.g.
# `bash bench/engine/run.sh --json engine.json -- --json objects.json --large`
# (see README.md). `bash bench/engine/run.sh --procs [ARGS]` runs bench-procs
# (several processes on one store) instead, with ARGS.
set -euo pipefail
cd "$(dirname "$0")/../.."

# Run a command quietly; show its output only if it fails.
quiet() {
    local out
    if ! out=$("$@" 2>&1); then
        printf '%s\n' "$out" >&2
        echo "bench/engine: failed: $*" >&2
        return 1
    fi
}

have_header() { echo "#include <$1>" | "${CC:-cc}" -E -x c - >/dev/null 2>&1; }

missing=()
have_header lmdb.h || missing+=(liblmdb-dev)
have_header sqlite3.h || missing+=(libsqlite3-dev)
if ((${#missing[@]})); then
    echo "bench/engine: installing ${missing[*]}" >&2
    sudo=()
    if [ "$(id -u)" -ne 0 ]; then
        command -v sudo >/dev/null || {
            echo "bench/engine: need root or sudo to install ${missing[*]}" >&2
            exit 1
        }
        sudo=(sudo)
    fi
    install=("${sudo[@]}" env DEBIAN_FRONTEND=noninteractive
             apt-get install -y -qq --no-install-recommends "${missing[@]}")
    # Try without `apt-get update` first: the package lists may be fresh.
    "${install[@]}" >/dev/null 2>&1 || {
        quiet "${sudo[@]}" apt-get update -qq
        quiet "${install[@]}"
    }
fi

if [ ! -f build-bench/build.ninja ]; then
    rm -rf build-bench
    quiet meson setup build-bench -Dbench=true --buildtype=release
fi
quiet ninja -C build-bench bench/engine/bench-engine bench/engine/bench-objects \
    bench/engine/bench-procs

# Stores go to .bench-tmp/ in the repository (local disk; the programs refuse
# tmpfs), each run in a fresh subdirectory that it removes at the end.
mkdir -p .bench-tmp
if [ "${1:-}" = "--procs" ]; then # several processes on one store
    shift
    exec ./build-bench/bench/engine/bench-procs --dir .bench-tmp "$@"
fi

engine_args=() objects_args=()
while (($#)); do
    if [ "$1" = "--" ]; then
        shift
        objects_args=("$@")
        break
    fi
    engine_args+=("$1")
    shift
done

./build-bench/bench/engine/bench-engine --dir .bench-tmp "${engine_args[@]}"
echo
exec ./build-bench/bench/engine/bench-objects --dir .bench-tmp "${objects_args[@]}"
