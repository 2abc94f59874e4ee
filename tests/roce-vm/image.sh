#!/usr/bin/env bash
# image.sh CACHE_DIR: makes CACHE_DIR/current/{vmlinuz,initrd.cpio} for the
# roce-vm lane, from Debian's own packages only:
#   - the kernel of linux-image-amd64 (it ships rdma_rxe, Soft-RoCE);
#   - busybox from busybox-static, for the initramfs' /init.
# The initramfs holds busybox, the handful of modules the lane needs (with
# their dependencies, loaded in order by /init) and init.sh; everything
# else comes from the host's / over virtio-9p at run time.
#
# Reuses an existing image unless BRAID_ROCE_VM_REFRESH=1 (then it asks apt
# for the current kernel and rebuilds if it changed).  Exit status: 0 ready,
# 77 when the image cannot be made here (no apt, no network, no tools: the
# reason is printed), 1 on a real failure.
set -euo pipefail

CACHE=${1:?usage: image.sh CACHE_DIR}
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)
# Soft-RoCE and what it needs (crc32 for its ICRC through the crypto API:
# without it `rdma link add` fails with ENOENT), the 9p root, a netdev.
MODULES="virtio_pci 9pnet_virtio 9p dummy crc32_generic rdma_rxe ib_uverbs"

skip() { echo "roce-vm: SKIP: $*"; exit 77; }
log()  { echo "roce-vm: $*" >&2; }

# The image depends on the kernel and on init.sh: a new init.sh is a new
# image, never a stale one.
init_sum=$(sha256sum "$HERE/init.sh" | cut -c1-12)

if [ "${BRAID_ROCE_VM_REFRESH:-0}" != 1 ] && [ -f "$CACHE/current/ready" ] &&
   [ "$(cat "$CACHE/current/init.sum" 2>/dev/null)" = "$init_sum" ]; then
  exit 0
fi

for tool in apt-get apt-cache dpkg-deb depmod modprobe cpio; do
  command -v "$tool" >/dev/null 2>&1 ||
    skip "no cached VM image and no '$tool' to build one" \
         "(apt-get install kmod cpio; or set BRAID_ROCE_VM_CACHE to a" \
         "directory holding an image)"
done

mkdir -p "$CACHE"
exec 9>"$CACHE/.lock"
flock 9 # one build at a time; the others then find it ready

kpkg=$(apt-cache depends linux-image-amd64 2>/dev/null |
       awk '/Depends: linux-image-[0-9]/ { print $2; exit }')
[ -n "$kpkg" ] ||
  skip "apt-cache does not know linux-image-amd64 (run apt-get update)"
kver=${kpkg#linux-image-}
name="$kver-$init_sum"
if [ -f "$CACHE/$name/ready" ]; then
  ln -sfn "$name" "$CACHE/current"
  exit 0
fi

log "building a VM image for kernel $kver in $CACHE/$name"
work=$(mktemp -d "$CACHE/.build.XXXXXX")
trap 'rm -rf "$work"' EXIT
( cd "$work" && apt-get download -q "$kpkg" busybox-static ) >"$work/apt.log" 2>&1 ||
  skip "cannot download $kpkg and busybox-static (no network?):" \
       "$(tail -n 2 "$work/apt.log" | tr '\n' ' ')"
dpkg-deb -x "$work"/linux-image-*.deb "$work/k"
dpkg-deb -x "$work"/busybox-static_*.deb "$work/bb"
depmod -b "$work/k" "$kver"

root="$work/initrd"
mkdir -p "$root"/{bin,dev,proc,sys,newroot,run-dir}
cp "$work/bb/bin/busybox" "$root/bin/busybox"
cp "$HERE/init.sh" "$root/init"
chmod 755 "$root/init" "$root/bin/busybox"

# Modules with their dependencies, in load order (modprobe prints them
# dependencies first).  Compressed ones are unpacked here, so that /init
# needs nothing but busybox insmod.
: >"$root/modules.order"
# shellcheck disable=SC2086 # one argument per module
modprobe -d "$work/k" -S "$kver" --show-depends -a $MODULES |
  awk '$1 == "insmod" { print $2 }' | awk '!seen[$0]++' |
  while read -r ko; do
    rel=${ko#"$work/k/"}
    out="$root/$rel"
    mkdir -p "$(dirname "$out")"
    case "$ko" in
      *.ko.xz)  xz -dc "$ko" >"${out%.xz}";   rel=${rel%.xz} ;;
      *.ko.zst) zstd -qdc "$ko" >"${out%.zst}"; rel=${rel%.zst} ;;
      *.ko.gz)  gzip -dc "$ko" >"${out%.gz}";  rel=${rel%.gz} ;;
      *)        cp "$ko" "$out" ;;
    esac
    echo "$rel" >>"$root/modules.order"
  done
[ -s "$root/modules.order" ] || { log "no modules resolved for $MODULES"; exit 1; }

mkdir -p "$work/out"
( cd "$root" && find . | cpio -o -H newc --quiet ) >"$work/out/initrd.cpio"
cp "$work/k/boot/vmlinuz-$kver" "$work/out/vmlinuz"
echo "$kver" >"$work/out/kver"
echo "$init_sum" >"$work/out/init.sum"
cp "$root/modules.order" "$work/out/"
touch "$work/out/ready"
rm -rf "${CACHE:?}/$name"
mv "$work/out" "$CACHE/$name"
ln -sfn "$name" "$CACHE/current"
# Older images of this cache are dead weight (~20 MB each).
for old in "$CACHE"/*/ready; do
  d=$(dirname "$old")
  [ -L "$d" ] || [ "$(basename "$d")" = "$name" ] || rm -rf "$d"
done
log "image ready: $CACHE/$name ($(du -sh "$CACHE/$name" | cut -f1))"
