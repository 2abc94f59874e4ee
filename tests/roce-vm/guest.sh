#!/usr/bin/env bash
# guest.sh BUILD_DIR [CMD...]: runs inside the roce-vm guest (the host's
# userland, chrooted).  Brings up Soft-RoCE, then runs CMD, or the lane's
# suite (suite.sh) when there is none, in the source tree.
#
# rxe0 sits on dummy0, a netdev without any wire: every RoCE packet loops
# back inside the guest kernel, which is all one VM needs to run many ranks.
# dummy0 gets an IPv4 address, so that its GID table has the IPv4-mapped
# RoCE v2 entry real clusters use (the transport prefers it), besides the
# fe80:: link-local ones; and a 9000-byte MTU, so that RoCE runs at its
# 4096-byte MTU (fewer packets for the software ICRC in TCG).
set -euo pipefail
BUILD=${1:?usage: guest.sh BUILD_DIR [CMD...]}
shift
SRC=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd -P)
ADDR=10.66.0.1

ulimit -l unlimited # registered memory is locked memory
ip link set lo up
ip link show dummy0 >/dev/null 2>&1 || ip link add dummy0 type dummy
ip link set dummy0 mtu 9000 up
ip addr add "$ADDR/24" dev dummy0
rdma link add rxe0 type rxe netdev dummy0

# GIDs appear asynchronously after the address: wait for ours (5 s at most).
gids=/sys/class/infiniband/rxe0/ports/1/gids
want=0000:0000:0000:0000:0000:ffff:0a42:0001
for _ in $(seq 50); do
  grep -qx "$want" "$gids"/* 2>/dev/null && break
  sleep 0.1
done
grep -qx "$want" "$gids"/* 2>/dev/null ||
  echo "roce-vm: warning: the IPv4-mapped GID of $ADDR did not appear"
echo "roce-vm: rxe0 up on dummy0 ($ADDR) $(cut -d" " -f1 /proc/uptime) s after boot; kernel $(uname -r), $(nproc) vCPUs"

cd "$SRC"
export BRAID_ROCE_VM=1
if [ $# -eq 0 ]; then
  exec bash "$SRC/tests/roce-vm/suite.sh" "$BUILD"
fi
exec "$@"
