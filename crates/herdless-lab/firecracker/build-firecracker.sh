#!/usr/bin/env bash
# Builds Firecracker and its two example UFFD handlers (uffd_on_demand_handler,
# uffd_fault_all_handler) from a Firecracker source tree, for the lab's
# `firecracker` experiment. Nothing of Firecracker is kept in this repository.
#
#   build-firecracker.sh SOURCE OUT_DIR
#
# SOURCE: a checkout of https://github.com/firecracker-microvm/firecracker
#   (`git clone`), or a bare git directory holding it (its HEAD is extracted
#   into OUT_DIR/src first, leaving out blobs the copy lacks: a partial mirror
#   can miss test-only binaries).
# OUT_DIR: where the binaries go (OUT_DIR/bin/{firecracker,uffd_on_demand_handler,
#   uffd_fault_all_handler}); the cargo target directory is OUT_DIR/target.
#
# Environment:
#   MICRO_HTTP   a checkout (or bare git directory) of
#                https://github.com/firecracker-microvm/micro-http, for a host
#                that cannot reach github.com: Firecracker depends on it by git
#                URL, and the build is pointed at it with a cargo [patch] on the
#                command line (the source tree stays unmodified). A bare git
#                directory is extracted at the commit Cargo.lock pins.
#   TOOLCHAIN    the rustup toolchain to build with (default: the one the
#                source's rust-toolchain.toml pins, installed when missing, with
#                a fallback to `stable` if it cannot be).
#   JOBS         cargo -j (default 2).
#
# Needs: rustup/cargo, a C compiler, libclang (the examples' userfaultfd-sys
# runs bindgen) and libseccomp (Firecracker's build script links it). On
# Debian/Ubuntu, run as root, the script installs what is missing:
#   apt-get install clang libclang-dev libseccomp-dev
# Re-running is cheap (cargo is incremental; an extracted tree is reused).
set -euo pipefail

usage() { sed -n '2,32p' "$0" | sed 's/^# \{0,1\}//'; exit 2; }
[ $# -eq 2 ] || usage
src=$1
out=$(mkdir -p "$2" && cd "$2" && pwd)
jobs=${JOBS:-2}

is_bare_git() { [ ! -e "$1/Cargo.toml" ] && git --git-dir="$1" rev-parse --verify -q HEAD >/dev/null 2>&1; }

# Extracts REV of the bare git directory GIT into DIR, leaving out paths whose
# blobs the object store lacks (listed on stderr).
extract() {
    local git=$1 rev=$2 dir=$3 missing
    mkdir -p "$dir"
    missing=$(git --git-dir="$git" ls-tree -r "$rev" | while read -r _ type sha path; do
        [ "$type" = blob ] && ! git --git-dir="$git" cat-file -e "$sha" 2>/dev/null && printf '%s\n' "$path"
    done || true)
    if [ -n "$missing" ]; then
        printf 'build-firecracker: the git directory lacks these blobs; left out:\n%s\n' "$missing" >&2
        git --git-dir="$git" ls-tree -r --name-only "$rev" | grep -vxF -f <(printf '%s\n' "$missing") |
            xargs -d '\n' git --git-dir="$git" archive "$rev" -- | tar -x -C "$dir"
        # Keep the tree's shape: empty placeholders for what was left out.
        while read -r path; do mkdir -p "$dir/$(dirname "$path")"; : >"$dir/$path"; done <<<"$missing"
    else
        git --git-dir="$git" archive "$rev" | tar -x -C "$dir"
    fi
}

if is_bare_git "$src"; then
    if [ ! -f "$out/src/Cargo.toml" ]; then
        echo "build-firecracker: extracting $(git --git-dir="$src" rev-parse HEAD) into $out/src"
        extract "$src" HEAD "$out/src"
    fi
    src=$out/src
fi
src=$(cd "$src" && pwd)
[ -f "$src/src/firecracker/examples/uffd/on_demand_handler.rs" ] ||
    { echo "build-firecracker: $src is not a Firecracker source tree" >&2; exit 1; }

# System packages: libclang for bindgen, libseccomp for Firecracker's build.rs.
need=()
ls /usr/lib/llvm-*/lib/libclang.so* >/dev/null 2>&1 || need+=(clang libclang-dev)
[ -e /usr/include/seccomp.h ] || need+=(libseccomp-dev)
if [ ${#need[@]} -gt 0 ]; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
        DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${need[@]}"
    else
        echo "build-firecracker: install ${need[*]} first" >&2; exit 1
    fi
fi
export LIBCLANG_PATH=${LIBCLANG_PATH:-$(dirname "$(ls /usr/lib/llvm-*/lib/libclang.so* | sort -V | tail -1)")}

# micro_http: Firecracker's git dependency, patched to a local copy if given.
patch=()
if [ -n "${MICRO_HTTP:-}" ]; then
    mh=$MICRO_HTTP
    if is_bare_git "$mh"; then
        rev=$(grep -A2 '^name = "micro_http"' "$src/Cargo.lock" | sed -n 's/.*#\([0-9a-f]\{40\}\)".*/\1/p')
        [ -n "$rev" ] || { echo "build-firecracker: no micro_http commit in Cargo.lock" >&2; exit 1; }
        [ -f "$out/micro-http/Cargo.toml" ] || extract "$mh" "$rev" "$out/micro-http"
        mh=$out/micro-http
    fi
    patch=(--config "patch.\"https://github.com/firecracker-microvm/micro-http\".micro_http.path=\"$(cd "$mh" && pwd)\"")
fi

# The toolchain the source pins (rust-toolchain.toml), else stable.
toolchain=${TOOLCHAIN:-$(sed -n 's/^channel *= *"\(.*\)"/\1/p' "$src/rust-toolchain.toml" 2>/dev/null || true)}
toolchain=${toolchain:-stable}
if ! rustup run "$toolchain" rustc --version >/dev/null 2>&1; then
    rustup toolchain install "$toolchain" --profile minimal ||
        { echo "build-firecracker: cannot install $toolchain; using stable" >&2; toolchain=stable; }
fi

started=$SECONDS
(cd "$src" && CARGO_TARGET_DIR="$out/target" nice -n 19 cargo "+$toolchain" "${patch[@]}" build \
    --release -j "$jobs" --target x86_64-unknown-linux-gnu -p firecracker --bin firecracker \
    --example uffd_on_demand_handler --example uffd_fault_all_handler)
echo "build-firecracker: built in $((SECONDS - started)) s with $toolchain"
built=$out/target/x86_64-unknown-linux-gnu/release
mkdir -p "$out/bin"
for f in firecracker examples/uffd_on_demand_handler examples/uffd_fault_all_handler; do
    cp -f "$built/$f" "$out/bin/$(basename "$f").tmp" && mv -f "$out/bin/$(basename "$f").tmp" "$out/bin/$(basename "$f")"
done
"$out/bin/firecracker" --version | head -1
echo "build-firecracker: HERDLESS_FIRECRACKER=$out/bin/firecracker HERDLESS_FC_HANDLERS_DIR=$out/bin"
