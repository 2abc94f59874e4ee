#!/bin/sh
# torch.distributed all_reduce, braid backend next to Gloo (torch_allreduce.py),
# for each rank count given (default 2 and 4), through braid-torchrun.
#   bench/torch_allreduce.sh [BUILD_DIR] [RANKS...] -- [torch_allreduce.py options]
# e.g. bench/torch_allreduce.sh build 2 4 -- -b 8 -e 64M -f 4 -r 5
set -eu
here=$(cd "$(dirname "$0")" && pwd)
build=${1:-build}
[ $# -gt 0 ] && shift
ranks=""
while [ $# -gt 0 ] && [ "$1" != "--" ]; do ranks="$ranks $1"; shift; done
[ $# -gt 0 ] && shift
[ -n "$ranks" ] || ranks="2 4"
export PYTHONPATH="$build/bindings/python${PYTHONPATH:+:$PYTHONPATH}"
[ -f "$build/bindings/python/braid/distributed.py" ] || {
  echo "torch_allreduce.sh: no braid package in $build/bindings/python" >&2
  exit 1; }
for n in $ranks; do
  /usr/bin/python3 "$here/../tools/braid-torchrun" --nproc_per_node "$n" \
    "$here/torch_allreduce.py" "$@" 2>&1 |
    grep -v -e '^\*\*\*' -e 'OMP_NUM_THREADS' -e '^WARNING:torch' -e '^$'
done
