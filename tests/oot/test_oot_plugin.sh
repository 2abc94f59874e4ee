#!/usr/bin/env bash
# Builds plugins/example out of tree against the *installed* headers (found
# with pkg-config), renamed so it cannot be confused with the in-tree build,
# loads it through BRAID_PLUGIN_PATH and runs a broadcast forced onto it.
# usage: test_oot_plugin.sh BUILD_DIR SOURCE_DIR BRAIDRUN BCAST_CHECK
set -euo pipefail
build=$1 src=$2 braidrun=$3 check=$4
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

meson install -C "$build" --no-rebuild --destdir "$tmp/stage" >/dev/null
pc=$(dirname "$(find "$tmp/stage" -name braid.pc | head -n1)")
[ -n "$pc" ] || { echo "FAIL: braid.pc was not installed"; exit 1; }
export PKG_CONFIG_PATH=$pc PKG_CONFIG_SYSROOT_DIR=$tmp/stage
cflags=$(pkg-config --cflags braid)
echo "pkg-config --cflags braid: $cflags"
case "$cflags" in *"$tmp/stage"*) ;; *) echo "FAIL: cflags do not point at the install"; exit 1;; esac

mkdir -p "$tmp/plugins"
sed -E -e 's/\.name( +)= "example"/.name\1= "oot"/' \
    -e 's/\.name( +)= "linear"/.name\1= "ootlinear"/' \
    "$src/plugins/example/example.c" > "$tmp/oot.c"
grep -q '"oot"' "$tmp/oot.c" && grep -q '"ootlinear"' "$tmp/oot.c" ||
  { echo "FAIL: could not rename the example plugin"; exit 1; }
cc -std=c11 -Wall -Wextra -Werror -fPIC -shared -fvisibility=hidden $cflags \
   "$tmp/oot.c" -o "$tmp/plugins/libbraid-oot.so"

out=$(BRAID_PLUGIN_PATH=$tmp/plugins BRAID_ALGO="broadcast:ootlinear" \
      "$braidrun" -n 3 "$check")
echo "$out"
[ "$(grep -c '0 wrong elements, broadcast ran ootlinear@' <<<"$out")" = 3 ] ||
  { echo "FAIL: the out-of-tree plugin did not run on every rank"; exit 1; }
echo "PASS: out-of-tree plugin built against installed headers and used"
