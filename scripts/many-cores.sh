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
# What it runs, in this order (each list can be set in the environment):
# - EXPERIMENTS (default "locks rwsem herd async": the many-core targets of
#   issues 23 and 25), counters off then on: <exp>-<nostats|stats>.json;
# - STATS_PAIRS (default 3) alternating pairs, counters off then on, of the
#   mutex tables and the rwsem (issue 23: what the counters cost, read from
#   each pair's `compare`, the peers' B/A showing the drift between the two
#   runs): stats-cost-<n>-<nostats|stats>.json and stats-cost-<n>.txt;
# - TUNINGS (default "rare=0": the mutex's rare-thread rule off, to set
#   against the default runs above), each a HERDLESS_MUTEX_TUNING value
#   (`mutex/spin.rs`): `locks` with counters off under it, interleaved with
#   a default run: locks-tuning-<n>.json and locks-default-<n>.json;
# - TABLES (default "restore:s3": issue 24's S3 restore table, where the S3
#   server, the client and the handler have cores of their own; entries
#   EXPERIMENT:TEXT, TEXT without spaces, as `run --table` takes it),
#   counters off: <exp>-<text>.json (it needs userfaultfd: run as root;
#   where it is refused, each cell records the error).
# The run names the machine (cores, CPU model, kernel) in every table and
# file.
# Afterwards, on any machine with the repository:
#   cargo run --release -p herdless-lab -- render OUT/locks-nostats.json --report report/
#   cargo run --release -p herdless-lab -- summary OUT/locks-nostats.json
# A machine with fewer than 8 CPUs runs the 2-core rows instead (the
# quick suite scales its thread counts to the machine).
set -euo pipefail
cd "$(dirname "$0")/.."
target=x86_64-unknown-linux-gnu
experiments=${EXPERIMENTS:-locks rwsem herd async}
stats_pairs=${STATS_PAIRS:-3}
tables=${TABLES:-restore:s3}
tunings=${TUNINGS-rare=0}

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
        # What the counters cost: alternating pairs, each compared.
        for n in $(seq 1 "$stats_pairs"); do
            for stats in nostats stats; do
                echo
                echo "#### counters' cost, pair $n, herdless counters: $stats"
                "$bin/herdless-lab-$stats" run locks rwsem --table mutex --table 'read/write' \
                    --json "$out/stats-cost-$n-$stats.json" || echo "(exit $?)"
            done
            "$bin/herdless-lab-nostats" compare "$out/stats-cost-$n-nostats.json" \
                "$out/stats-cost-$n-stats.json" >"$out/stats-cost-$n.txt" || echo "(exit $?)"
        done
        # The mutex under each tuning, each run beside a default one.
        local n=0
        for tuning in $tunings; do
            n=$((n + 1))
            echo
            echo "#### locks, HERDLESS_MUTEX_TUNING=$tuning (locks-tuning-$n.json), then the default"
            HERDLESS_MUTEX_TUNING=$tuning "$bin/herdless-lab-nostats" run locks \
                --json "$out/locks-tuning-$n.json" || echo "(exit $?)"
            "$bin/herdless-lab-nostats" run locks --json "$out/locks-default-$n.json" || echo "(exit $?)"
        done
        for spec in $tables; do
            local exp=${spec%%:*} table=${spec#*:}
            local name=${table//[^A-Za-z0-9]/_}
            echo
            echo "#### $exp, tables \"$table\", herdless counters: nostats"
            "$bin/herdless-lab-nostats" run "$exp" --table "$table" \
                --json "$out/$exp-$name.json" || echo "(exit $?)"
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
-h | --help) sed -n "2,/^set -euo/p" "$0" | sed "\$d"; exit 0 ;;
*)
    build target/many-cores
    run target/many-cores "${1:-target/many-cores-results}"
    ;;
esac
