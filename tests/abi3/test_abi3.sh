#!/usr/bin/env bash
# The ABI-3 example plugin (built from the frozen fixtures in this folder)
# loads through the adapter, is listed as adapted, and its linear broadcast
# runs on every rank of a 3-rank job over this build's ABI-4 transports.
# usage: test_abi3.sh PLUGIN_DIR BRAIDRUN BRAID_INFO BCAST_CHECK
set -euo pipefail
dir=$1 braidrun=$2 info=$3 check=$4
export BRAID_PLUGIN_PATH=$dir

listing=$("$info")
echo "$listing" | grep -E '^(example|plugin) '
grep -Eq '^example +1\.0 +available +'"$dir"'/libbraid-example\.so \(ABI 3, adapted\)' \
  <<<"$listing" || { echo "FAIL: braid-info does not list the ABI-3 example as adapted"; exit 1; }

out=$(BRAID_DEBUG=info BRAID_ALGO="broadcast:linear" "$braidrun" -n 3 "$check" 2>&1)
echo "$out" | grep -E 'wrong elements|ABI 3' | head -n 8
grep -q "plugin 'example' was built for ABI 3: loaded through the ABI-3 adapter" <<<"$out" ||
  { echo "FAIL: the loader did not say it adapted the plugin"; exit 1; }
[ "$(grep -c '0 wrong elements, broadcast ran linear@' <<<"$out")" = 3 ] ||
  { echo "FAIL: the ABI-3 linear broadcast did not run correctly on every rank"; exit 1; }
echo "PASS: ABI-3 example plugin adapted and run"
