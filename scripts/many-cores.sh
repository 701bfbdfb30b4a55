#!/usr/bin/env bash
# The many-core measurement (issue 23): the lab's lock experiments on a
# machine with many CPUs, with herdless's counters off and on, written to
# one results folder.
#
#   scripts/many-cores.sh build [DIR]      static lab binaries into DIR (default
#                                          target/many-cores), stripped and xz-compressed:
#                                          for a machine that cannot build (nothing to fetch)
#   scripts/many-cores.sh run DIR OUT      on the many-core machine: run them, write
#                                          OUT/<experiment>-<stats|nostats>.json and OUT/many-cores.txt
#   scripts/many-cores.sh [OUT]            both, on this machine (OUT default target/many-cores-results)
#
# EXPERIMENTS (default "locks rwsem herd async": the many-core targets of
# issues 23 and 25) picks the experiments; the run
# names the machine (cores, CPU model, kernel) in every table and file.
# Afterwards, on any machine with the repository:
#   cargo run --release -p herdless-lab -- render OUT/locks-nostats.json --report report/
#   cargo run --release -p herdless-lab -- summary OUT/locks-nostats.json
# A machine with fewer than 8 CPUs runs the 2-core rows instead (the
# quick suite scales its thread counts to the machine).
set -euo pipefail
cd "$(dirname "$0")/.."
target=x86_64-unknown-linux-gnu
experiments=${EXPERIMENTS:-locks rwsem herd async}

build() {
    local dir=$1
    mkdir -p "$dir"
    for stats in stats nostats; do
        local features=()
        [ "$stats" = nostats ] && features=(--no-default-features)
        RUSTFLAGS="-C target-feature=+crt-static" \
            cargo build --release --target "$target" -p herdless-lab "${features[@]}"
        strip -o "$dir/herdless-lab-$stats" "target/$target/release/herdless-lab"
        xz -f -T0 -6 "$dir/herdless-lab-$stats"
    done
    ls -l "$dir"
}

run() {
    local dir=$1 out=$2
    mkdir -p "$out"
    local bin
    bin=$(mktemp -d)
    for stats in stats nostats; do
        xz -dc "$dir/herdless-lab-$stats.xz" >"$bin/herdless-lab-$stats"
        chmod +x "$bin/herdless-lab-$stats"
    done
    {
        echo "many-cores.sh on $(nproc) CPUs: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2-)"
        echo "kernel $(uname -r); started $(date -u +%FT%TZ)"
        # Counters off first (the figures), then on (what the counters cost).
        for exp in $experiments; do
            for stats in nostats stats; do
                echo
                echo "#### $exp, herdless counters: $stats"
                "$bin/herdless-lab-$stats" run "$exp" --json "$out/$exp-$stats.json" || echo "(exit $?)"
            done
        done
        echo
        echo "finished $(date -u +%FT%TZ)"
    } 2>&1 | tee "$out/many-cores.txt"
    rm -rf "$bin"
}

case ${1:-} in
build) build "${2:-target/many-cores}" ;;
run)
    [ $# -eq 3 ] || { echo "usage: $0 run DIR OUT" >&2; exit 2; }
    run "$2" "$3"
    ;;
-h | --help) sed -n '2,20p' "$0"; exit 0 ;;
*)
    build target/many-cores
    run target/many-cores "${1:-target/many-cores-results}"
    ;;
esac
