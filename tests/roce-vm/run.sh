#!/usr/bin/env bash
# run.sh BUILD_DIR [CMD...]: the real-verbs lane.  Boots a small QEMU VM on
# Debian's own kernel (linux-image-amd64, which ships rdma_rxe), brings up
# Soft-RoCE (rxe0), and runs CMD there, or the lane's suite (suite.sh: the
# roce transport's unit test, then the multi-process collectives over
# oneshot@roce and twoshot@roce).  CMD runs in the source tree, as root,
# with the host's userland and the build tree at their host paths, e.g.
#     tests/roce-vm/run.sh build ibv_devinfo -v
#     tests/roce-vm/run.sh build build/tests/unit/roce/test_roce \
#         build/plugins/transports/roce/libbraid-roce.so --require -n 8
# Exit status: CMD's (or the suite's); 77 (skip, reason printed) when no VM
# can start here: no qemu, or no cached image and no way to fetch one.
#
# How: image.sh caches the kernel and a busybox initramfs (~20 MB) under
# BRAID_ROCE_VM_CACHE (default $XDG_CACHE_HOME/braid-roce-vm, else
# ~/.cache/braid-roce-vm); it is reused offline and rebuilt only with
# BRAID_ROCE_VM_REFRESH=1 or when init.sh changes.  The guest mounts the
# host's / read-only over virtio-9p and chroots into it (no root image to
# build), with its own tmpfs /tmp, /run, /dev/shm; the build tree is shared
# read-write.  The VM has no network card at all.
#
# Accelerator: TCG by default.  On the nested-KVM (kvm_pvm) dev machines
# `-cpu host` aborts and KVM guests run far slower than TCG;
# BRAID_ROCE_VM_ACCEL=kvm is for hosts with real VMX/SVM nesting.
#
# Knobs: BRAID_ROCE_VM_CACHE, BRAID_ROCE_VM_REFRESH=1, BRAID_ROCE_VM_QEMU
# (the qemu-system-x86_64 binary), BRAID_ROCE_VM_ACCEL
# (tcg|kvm), BRAID_ROCE_VM_SMP (2), BRAID_ROCE_VM_MEM (2G),
# BRAID_ROCE_VM_TIMEOUT (seconds, 1200), BRAID_ROCE_VM_VERBOSE=1 (print the
# guest's kernel log), BRAID_ROCE_VM_MP_ARGS (test_colls options).
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)
SRC=$(cd "$HERE/../.." && pwd -P)
skip() { echo "roce-vm: SKIP: $*"; exit 77; }
die()  { echo "roce-vm: $*" >&2; exit 1; }

[ $# -ge 1 ] || die "usage: run.sh BUILD_DIR [CMD...]"
[ -d "$1" ] || die "no build directory $1"
BUILD=$(cd "$1" && pwd -P)
shift
[ -f "$BUILD/plugins/transports/roce/libbraid-roce.so" ] ||
  die "$BUILD has no plugins/transports/roce/libbraid-roce.so (build it first)"
for p in "$SRC" "$BUILD"; do
  case "$p" in *[[:space:]]*) die "paths with spaces are not supported: $p" ;; esac
done

QEMU=${BRAID_ROCE_VM_QEMU:-$(command -v qemu-system-x86_64 || true)}
if [ -z "$QEMU" ] || [ ! -x "$QEMU" ]; then
  skip "qemu-system-x86_64 not found (apt-get install qemu-system-x86)"
fi
[ "$(uname -m)" = x86_64 ] || skip "the lane boots an amd64 kernel; this is $(uname -m)"

CACHE=${BRAID_ROCE_VM_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/braid-roce-vm}
mkdir -p "$CACHE" 2>/dev/null || skip "cannot create the cache $CACHE"
CACHE=$(cd "$CACHE" && pwd -P)
t_start=$(date +%s%N)
bash "$HERE/image.sh" "$CACHE" # exits 77 with its reason when it cannot
IMG=$(cd "$CACHE/current" && pwd -P)
t_image=$(date +%s%N)

RUN=$(mktemp -d "${TMPDIR:-/tmp}/braid-roce-vm.XXXXXX")
trap 'rm -rf "$RUN"' EXIT
echo "$SRC" >"$RUN/src"
echo "$BUILD" >"$RUN/build"
{
  echo '#!/bin/bash'
  printf 'exec env -i HOME=/tmp TERM=dumb LANG=C.UTF-8 PATH=%q ' \
    /usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
  for v in BRAID_TIMEOUT BRAID_DEBUG BRAID_ROCE_VM_MP_ARGS UCX_TLS \
           ASAN_OPTIONS UBSAN_OPTIONS LSAN_OPTIONS; do
    [ -z "${!v:-}" ] || printf '%s=%q ' "$v" "${!v}"
  done
  printf '%q ' bash "$HERE/guest.sh" "$BUILD" "$@"
  echo
} >"$RUN/start"

# shellcheck disable=SC2054 # commas are qemu's option syntax
case "${BRAID_ROCE_VM_ACCEL:-tcg}" in
  kvm) ACCEL=(-accel kvm -cpu host) ;;
  tcg) ACCEL=(-accel tcg,thread=multi -cpu max) ;;
  *)   die "BRAID_ROCE_VM_ACCEL must be tcg or kvm" ;;
esac
SMP=${BRAID_ROCE_VM_SMP:-2}
MEM=${BRAID_ROCE_VM_MEM:-2G}
TIMEOUT=${BRAID_ROCE_VM_TIMEOUT:-1200}
echo "roce-vm: booting Linux $(cat "$IMG/kver") (${BRAID_ROCE_VM_ACCEL:-tcg}, $SMP vCPUs, $MEM)"

set +e
timeout -k 10 "$TIMEOUT" "$QEMU" "${ACCEL[@]}" -smp "$SMP" -m "$MEM" \
  -machine pc -nodefaults -no-user-config -no-reboot \
  -display none -monitor none -nic none \
  -kernel "$IMG/vmlinuz" -initrd "$IMG/initrd.cpio" \
  -append "console=ttyS0 panic=-1 quiet loglevel=4 mitigations=off" \
  -serial "file:$RUN/console.log" -serial stdio \
  -virtfs "local,path=/,mount_tag=hostroot,security_model=none,readonly=on,multidevs=remap" \
  -virtfs "local,path=$RUN,mount_tag=braidrun,security_model=none" \
  -virtfs "local,path=$SRC,mount_tag=src,security_model=none,readonly=on,multidevs=remap" \
  -virtfs "local,path=$BUILD,mount_tag=build,security_model=none,multidevs=remap" \
  </dev/null 2>"$RUN/qemu.err"
qrc=$?
set -e
t_end=$(date +%s%N)

if [ "${BRAID_ROCE_VM_VERBOSE:-0}" = 1 ]; then
  echo "----- guest kernel log -----"
  cat "$RUN/console.log"
fi
secs() { local ms=$((($2 - $1) / 1000000)); printf '%d.%d' $((ms / 1000)) $((ms % 1000 / 100)); }
timing="image $(secs "$t_start" "$t_image") s, VM $(secs "$t_image" "$t_end") s"
if [ -s "$RUN/initfail" ]; then
  echo "roce-vm: the guest's init failed: $(cat "$RUN/initfail"); kernel log tail:"
  tail -n 30 "$RUN/console.log"
  exit 1
fi
if [ ! -s "$RUN/rc" ]; then
  if [ ! -s "$RUN/console.log" ]; then # qemu itself did not start a guest
    skip "qemu could not start a VM (exit $qrc): $(head -c 400 "$RUN/qemu.err")"
  fi
  echo "roce-vm: the VM ended without a result (qemu exit $qrc; 124 = over" \
       "BRAID_ROCE_VM_TIMEOUT=${TIMEOUT}s); kernel log tail:"
  tail -n 30 "$RUN/console.log"
  cat "$RUN/qemu.err"
  exit 1
fi
rc=$(cat "$RUN/rc")
echo "roce-vm: exit $rc ($timing)"
exit "$rc"
