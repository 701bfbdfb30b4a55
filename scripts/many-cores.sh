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
# - EXPERIMENTS (default "locks rwsem herd async epoll futex-wake": the
#   many-core targets of issues 23 and 25, and the tables of seeds 003 and
#   004 whose contention needs 8–32 CPUs), counters off then on:
#   <exp>-<nostats|stats>.json;
# - STATS_PAIRS (default 3) alternating pairs, counters off then on, of the
#   STATS_TABLES (default "mutex notify_all queue read/write": the mutex,
#   `notify_all` and bounded-queue tables, and the rwsem's; entries as `run --table` takes them, without spaces) of the
#   `locks` and `rwsem` experiments (issue 23: what the counters cost, read
#   from each pair's `compare`, the peers' B/A showing the drift between
#   the two runs): stats-cost-<n>-<nostats|stats>.json and
#   stats-cost-<n>.txt;
# - SWEEPS (default none; stop 45 swept `spinask=2`, rare threads asking,
#   now the default, and two experiments it then removed: every thread
#   paced, `spinask=3,askgap=50|200|500`, and a task asking 500 µs after
#   its first wake in vain, `taskaskgap=500`; README "Stop 45 on 16
#   cores"), each entry
#   VARIABLE=VALUE@EXPERIMENT[:TABLE[+TABLE...]] (no spaces): the
#   experiment (its tables whose title contains a TABLE) with counters off, run with the
#   variable set and then without it: sweep-<n>-tuned.json,
#   sweep-<n>-default.json and their `compare`, sweep-<n>.txt. The
#   variables: HERDLESS_MUTEX_TUNING (`mutex/spin.rs`),
#   HERDLESS_RWSEM_TUNING (`rwsem/tuning.rs`: spin, handoff, intent=0), HERDLESS_CONDVAR_FANOUT
#   (`condvar/cascade.rs`), HERDLESS_CONDVAR_BROADCAST=0 (the cascade instead of
#   `condvar/broadcast.rs`); SWEEP_STATS=stats runs them with counters on;
#   BIN=<cfg> runs the experimental build of CFGS named <cfg> instead
#   (counters off);
# - CFGS (default "herdless_forget_passers": the futex bucket forgets a
#   waiter that went ahead or was passed when it leaves, `futex/bucket.rs`;
#   read by `build`): experimental builds, counters off, one `--cfg` each:
#   herdless-lab-nostats-<cfg> (stop 41 also built `herdless_acquire_cas`,
#   since removed: `mutex/raw.rs` says what it measured);
# - TABLES (default "restore:s3": issue 24's S3 restore table, where the S3
#   server, the client and the handler have cores of their own; entries
#   EXPERIMENT:TEXT, TEXT without spaces, as `run --table` takes it),
#   counters off: <exp>-<text>.json (it needs userfaultfd: run as root;
#   where it is refused, each cell records the error).
# - CPUS (default: every CPU): a CPU list the lab runs on (`taskset -c`),
#   e.g. one CPU of each core as the header's SMT siblings show, or two
#   siblings of each of fewer cores: the lab then sizes its thread counts
#   and herdless its spinning to those CPUs, as on a smaller machine (the
#   slowest thread's share with and without SMT siblings, README "On 16
#   cores"); `one-per-core` computes the first of each core's siblings.
# The run names the machine (cores, CPU model, kernel) in every table and
# file. On a lent machine that sends back only a few files, write OUT
# outside its return folder and pack it there afterwards (stop 36's device
# command: `... run DIR /tmp/res > $OUT/log.txt 2>&1; tar czf
# $OUT/res.tgz -C /tmp/res .`), and bound the run with `timeout` so the
# packing happens: the lab's tables are in the log either way.
# Afterwards, on any machine with the repository:
#   cargo run --release -p herdless-lab -- render OUT/locks-nostats.json --report report/
#   cargo run --release -p herdless-lab -- summary OUT/locks-nostats.json
# A machine with fewer than 8 CPUs runs the 2-core rows instead (the
# quick suite scales its thread counts to the machine).
set -euo pipefail
cd "$(dirname "$0")/.."
target=x86_64-unknown-linux-gnu
experiments=${EXPERIMENTS-locks rwsem herd async epoll futex-wake}
stats_pairs=${STATS_PAIRS:-3}
tables=${TABLES-restore:s3}
stats_tables=${STATS_TABLES-mutex notify_all queue read/write}
sweeps=${SWEEPS-}
sweep_stats=${SWEEP_STATS:-nostats}
cfgs=${CFGS-herdless_forget_passers}
# CPUS=one-per-core: the first CPU of each core's SMT siblings.
if [ "${CPUS:-}" = one-per-core ]; then
    CPUS=$(cat /sys/devices/system/cpu/cpu[0-9]*/topology/thread_siblings_list |
        sed 's/[,-].*//' | sort -un | paste -sd,)
fi
pin=()
[ -n "${CPUS:-}" ] && pin=(taskset -c "$CPUS")

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
    # Experimental builds: counters off, one `--cfg` each, in a target
    # folder of their own (a sweep's BIN=<cfg> runs them).
    local cfg
    for cfg in $cfgs; do
        RUSTFLAGS="-C target-feature=+crt-static --cfg $cfg" CARGO_TARGET_DIR="target/cfg-$cfg" \
            cargo build --release --target "$target" -p herdless-lab --no-default-features
        strip -o "$dir/herdless-lab-nostats-$cfg" "target/cfg-$cfg/$target/release/herdless-lab"
        xz -f -T0 -6 "$dir/herdless-lab-nostats-$cfg"
    done
    ls -l "$dir"
}

run() {
    local dir=$1 out=$2
    mkdir -p "$out"
    local bin
    bin=$(mktemp -d)
    local packed
    for packed in "$dir"/herdless-lab-*.xz; do
        local name=${packed##*/}
        xz -dc "$packed" >"$bin/${name%.xz}"
        chmod +x "$bin/${name%.xz}"
    done
    {
        echo "many-cores.sh on $(nproc) CPUs: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2-)"
        echo "kernel $(uname -r); started $(date -u +%FT%TZ)"
        [ -n "${CPUS:-}" ] && echo "the lab runs on CPUs $CPUS (taskset)"
        # Which CPUs share a core (SMT siblings) and a socket: a spinning
        # thread beside a busy sibling runs slower for the same CPU time
        # (the slowest thread's share, README "On 16 cores").
        local cpu
        for cpu in /sys/devices/system/cpu/cpu[0-9]*; do
            [ -r "$cpu/topology/thread_siblings_list" ] || continue
            echo "  ${cpu##*/}: core siblings $(cat "$cpu/topology/thread_siblings_list"), package $(cat "$cpu/topology/physical_package_id" 2>/dev/null || echo ?)"
        done
        # Counters off first (the figures), then on (what the counters cost).
        for exp in $experiments; do
            for stats in nostats stats; do
                echo
                echo "#### $exp, herdless counters: $stats (t=${SECONDS}s)"
                ${pin[@]+"${pin[@]}"} "$bin/herdless-lab-$stats" run "$exp" --json "$out/$exp-$stats.json" || echo "(exit $?)"
            done
        done
        # What the counters cost: alternating pairs, each compared.
        local stats_filter=() table
        for table in $stats_tables; do stats_filter+=(--table "$table"); done
        for n in $(seq 1 "$stats_pairs"); do
            for stats in nostats stats; do
                echo
                echo "#### counters' cost, pair $n, herdless counters: $stats (t=${SECONDS}s)"
                ${pin[@]+"${pin[@]}"} "$bin/herdless-lab-$stats" run locks rwsem "${stats_filter[@]}" \
                    --json "$out/stats-cost-$n-$stats.json" || echo "(exit $?)"
            done
            ${pin[@]+"${pin[@]}"} "$bin/herdless-lab-nostats" compare "$out/stats-cost-$n-nostats.json" \
                "$out/stats-cost-$n-stats.json" >"$out/stats-cost-$n.txt" || echo "(exit $?)"
        done
        # Each sweep entry: tuned, then the default, then compared.
        local n=0
        for sweep in $sweeps; do
            n=$((n + 1))
            local setting=${sweep%%@*} what=${sweep#*@}
            local exp=${what%%:*} filter=()
            if [ "$what" != "$exp" ]; then
                local table
                IFS=+ read -ra tables_of <<<"${what#*:}"
                for table in "${tables_of[@]}"; do filter+=(--table "$table"); done
            fi
            # BIN=<cfg>: the experimental build instead of a variable.
            local tuned_bin="$bin/herdless-lab-$sweep_stats" tuned_env=("$setting")
            if [ "${setting%%=*}" = BIN ]; then
                tuned_bin="$bin/herdless-lab-nostats-${setting#BIN=}" tuned_env=()
            fi
            echo
            echo "#### sweep $n: $exp ${filter[*]}, $setting (sweep-$n-tuned.json), then the default (t=${SECONDS}s)"
            env ${tuned_env[@]+"${tuned_env[@]}"} ${pin[@]+"${pin[@]}"} "$tuned_bin" run "$exp" "${filter[@]}" \
                --json "$out/sweep-$n-tuned.json" || echo "(exit $?)"
            ${pin[@]+"${pin[@]}"} "$bin/herdless-lab-$sweep_stats" run "$exp" "${filter[@]}" \
                --json "$out/sweep-$n-default.json" || echo "(exit $?)"
            ${pin[@]+"${pin[@]}"} "$bin/herdless-lab-nostats" compare "$out/sweep-$n-default.json" \
                "$out/sweep-$n-tuned.json" >"$out/sweep-$n.txt" || echo "(exit $?)"
        done
        for spec in $tables; do
            local exp=${spec%%:*} table=${spec#*:}
            local name=${table//[^A-Za-z0-9]/_}
            echo
            echo "#### $exp, tables \"$table\", herdless counters: nostats (t=${SECONDS}s)"
            ${pin[@]+"${pin[@]}"} "$bin/herdless-lab-nostats" run "$exp" --table "$table" \
                --json "$out/$exp-$name.json" || echo "(exit $?)"
        done
        echo
        echo "finished $(date -u +%FT%TZ) (t=${SECONDS}s)"
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
