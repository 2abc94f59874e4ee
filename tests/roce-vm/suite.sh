#!/usr/bin/env bash
# suite.sh BUILD_DIR: the roce-vm lane's default suite, run inside the VM
# with rxe0 up (guest.sh):
#   1. the roce transport's unit test, 4 ranks, on the GID it picks
#      (IPv4-mapped RoCE v2), then 2 ranks on the fe80:: RoCE v2 GID chosen
#      through BRAID_ROCE_GID_INDEX, with RDMA WRITEs cut to 4 KiB so that
#      the larger puts take several batches of writes;
#   2. the multi-process collectives over verbs, forced onto the lowhop
#      all-reduces: oneshot@roce and twoshot@roce on 2 and 4 ranks
#      (skipped, with a message, while braidrun or test_colls is not built).
# BRAID_ROCE_VM_MP_ARGS: test_colls options (default --quick).
# UCX (the ucx plugin, which serves the collectives not forced onto roce)
# is kept off rxe0 with UCX_TLS=^ib unless UCX_TLS is set: UCX 1.13's IB
# transports over Soft-RoCE abort in their endpoint teardown (a wireup
# assertion in braid_finalize), which is not what this lane tests.
set -uo pipefail
BUILD=${1:?usage: suite.sh BUILD_DIR}
PLUGIN=$BUILD/plugins/transports/roce/libbraid-roce.so
failed=()

step() {
  local name=$1 t0 rc
  shift
  echo "=== $name"
  t0=$(date +%s%N)
  "$@"
  rc=$?
  local ms=$((($(date +%s%N) - t0) / 1000000))
  printf -- '--- %s: %s (%d.%01d s)\n' "$name" \
    "$([ $rc = 0 ] && echo ok || echo "FAILED, exit $rc")" \
    $((ms / 1000)) $((ms % 1000 / 100))
  [ $rc = 0 ] || failed+=("$name")
}

# The GID table as the transport sees it.  rxe has 1024 entries: read them
# with builtins, a fork per entry costs minutes under TCG.
port=/sys/class/infiniband/rxe0/ports/1
zero=0000:0000:0000:0000:0000:0000:0000:0000
ll_v2=
for f in "$port"/gids/*; do
  read -r g <"$f" 2>/dev/null || continue
  [ "$g" = "$zero" ] && continue
  i=${f##*/}
  read -r type <"$port/gid_attrs/types/$i" 2>/dev/null || type='?'
  echo "rxe0 GID $i: $g ($type)"
  if [ -z "$ll_v2" ] && [ "$type" = "RoCE v2" ] && [[ $g == fe80* ]]; then
    ll_v2=$i
  fi
done

export BRAID_TIMEOUT=${BRAID_TIMEOUT:-120}
step "unit: roce transport, 4 ranks" \
  "$BUILD/tests/unit/roce/test_roce" "$PLUGIN" --require -n 4
if [ -n "$ll_v2" ]; then
  step "unit: roce transport, 2 ranks, BRAID_ROCE_GID_INDEX=$ll_v2 (fe80:: v2), 4 KiB writes" \
    env BRAID_ROCE_GID_INDEX="$ll_v2" BRAID_ROCE_MAX_WRITE=4k \
    "$BUILD/tests/unit/roce/test_roce" "$PLUGIN" --require -n 2 --iters 20 \
    --puts-only
else
  echo "roce-vm: no fe80:: RoCE v2 GID on rxe0"; failed+=("gid table")
fi

braidrun=$BUILD/tools/braidrun
colls=$BUILD/tests/mp/test_colls
if [ -x "$braidrun" ] && [ -x "$colls" ]; then
  read -r -a mp_args <<<"${BRAID_ROCE_VM_MP_ARGS:---quick}"
  export UCX_TLS=${UCX_TLS:-^ib}
  for algo in oneshot twoshot; do
    for n in 2 4; do
      step "mp: BRAID_ALGO=allreduce:$algo@roce braidrun -n $n test_colls ${mp_args[*]}" \
        env BRAID_ALGO="allreduce:$algo@roce" \
        "$braidrun" -n "$n" "$colls" "${mp_args[@]}"
    done
  done
else
  echo "roce-vm: SKIP mp: $([ -x "$braidrun" ] || echo "$braidrun") $([ -x "$colls" ] || echo "$colls") not built"
fi

if [ ${#failed[@]} -gt 0 ]; then
  printf 'roce-vm: FAILED: %s\n' "${failed[@]}"
  exit 1
fi
echo "roce-vm: all passed"
