#!/usr/bin/env bash
# Builds the lab's bare-metal Firecracker guest (entry.S, guest.c, balloon.c, guest.ld)
# into one static ELF, with the gcc and ld of the machine (x86-64 only).
#
#   build-guest.sh [OUT]    (default: <workspace>/target/fc-guest/herdless-lab-guest.elf)
#
# Give the result to the lab: HERDLESS_FC_GUEST=OUT. Not part of CI's build:
# the experiment skips without it.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=${1:-$here/../../../../target/fc-guest/herdless-lab-guest.elf}
mkdir -p "$(dirname "$out")"
out=$(cd "$(dirname "$out")" && pwd)/$(basename "$out")
[ "$(uname -m)" = x86_64 ] || { echo "build-guest: an x86-64 host is needed" >&2; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cflags=(-std=c11 -O2 -Wall -Wextra -Werror -ffreestanding -fno-pic -fno-pie -fno-stack-protector
    -fno-asynchronous-unwind-tables -mno-red-zone -mgeneral-regs-only -mcmodel=small)
gcc "${cflags[@]}" -c "$here/guest.c" -o "$work/guest.o"
gcc "${cflags[@]}" -c "$here/balloon.c" -o "$work/balloon.o"
gcc "${cflags[@]}" -c "$here/console.c" -o "$work/console.o"
gcc -c "$here/entry.S" -o "$work/entry.o"
ld -nostdlib -static -no-pie --no-warn-rwx-segments -z noexecstack -T "$here/guest.ld" \
    -o "$work/guest.elf" "$work/entry.o" "$work/guest.o" "$work/balloon.o" "$work/console.o"
mv -f "$work/guest.elf" "$out.tmp"
mv -f "$out.tmp" "$out"
echo "$out"
