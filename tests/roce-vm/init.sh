#!/bin/busybox sh
# /init of the roce-vm initramfs (busybox only).  Loads the modules, mounts
# the host's / read-only over virtio-9p as the new root (every host binary
# and library then runs unchanged in the guest), mounts the source and build
# trees at their host paths, and runs the lane's start script from the run
# directory (a read-write 9p share) as a chroot.  Its exit status goes to
# run-dir/rc; then the VM powers off.  The command's output goes to the
# second serial port (run.sh's stdout), the kernel's to the first (a log).
/bin/busybox --install -s /bin
export PATH=/bin

mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev

die() {
  echo "roce-vm init: $*"
  echo "$*" >/run-dir/initfail 2>/dev/null
  sync
  poweroff -f
}

while read -r ko; do
  insmod "/$ko" || echo "roce-vm init: insmod $ko failed"
done </modules.order

P9=trans=virtio,version=9p2000.L,msize=512000
mount -t 9p -o $P9 braidrun /run-dir || die "cannot mount the run directory"
mount -t 9p -o $P9,ro,cache=loose hostroot /newroot || die "cannot mount the host root"
R=/newroot
mount -t proc proc $R/proc
mount -t sysfs sysfs $R/sys
mount -t devtmpfs devtmpfs $R/dev
mkdir -p $R/dev/pts $R/dev/shm
mount -t devpts devpts $R/dev/pts
mount -t tmpfs tmpfs $R/dev/shm
for d in /tmp /run /var/tmp; do mount -t tmpfs tmpfs $R$d; done
mkdir -p $R/run/braid-vm
mount --bind /run-dir $R/run/braid-vm
# Source and build trees at their host paths (after the tmpfs mounts, so a
# tree under /tmp stays visible): read-only source, writable build.
SRC=$(cat /run-dir/src)
BUILD=$(cat /run-dir/build)
mkdir -p "$R$SRC" "$R$BUILD" 2>/dev/null # exist already unless in a tmpfs
mount -t 9p -o $P9,ro,cache=loose src "$R$SRC" || die "cannot mount $SRC"
mount -t 9p -o $P9,cache=mmap build "$R$BUILD" || die "cannot mount $BUILD"

stty -F /dev/ttyS1 raw -echo 2>/dev/null # no CR added to the output
chroot $R /bin/bash /run/braid-vm/start </dev/null >/dev/ttyS1 2>&1
echo $? >/run-dir/rc
sync
umount "$R$BUILD" 2>/dev/null
poweroff -f
