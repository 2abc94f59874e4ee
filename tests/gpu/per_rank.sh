#!/bin/sh
# Runs one rank of a job whose ranks share a GPU.  NCCL refuses two ranks of
# one communicator on one GPU of one host ("Duplicate GPU detected"), so
# each rank claims a host of its own (NCCL_HOSTID) and NCCL connects them
# through its socket transport on the loopback interface, as if they were
# on different machines.  A test set-up, not a way to run: on one GPU a
# single rank is the real case.
export NCCL_HOSTID="braid-gpu-test-rank-${BRAID_RANK:-0}"
export NCCL_NET="${NCCL_NET:-Socket}"
export NCCL_SOCKET_IFNAME="${NCCL_SOCKET_IFNAME:-lo}"
exec "$@"
