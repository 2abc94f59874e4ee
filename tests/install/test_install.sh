#!/bin/sh
# A staged install (meson install --destdir), used as a user would: the
# README's example built with pkg-config, and it, the installed braid-bench
# and the installed engines (braid-infer, braid-train) run under the
# installed braidrun -- all without LD_LIBRARY_PATH.  pkg-config is pointed at the stage by redefining the
# prefix, so the rpath it gives names the staged libdir.
#   test_install.sh BUILD_DIR README.md
set -eu
build=$1 readme=$2
stage=$(mktemp -d /tmp/braid-stage-XXXXXX)
trap 'rm -rf "$stage"' EXIT
unset LD_LIBRARY_PATH BRAID_PLUGIN_PATH

meson install -C "$build" --destdir "$stage" --no-rebuild --quiet
prefix=$(meson introspect "$build" --buildoptions |
         /usr/bin/python3 -c 'import json,sys; print([o["value"] for o in json.load(sys.stdin) if o["name"] == "prefix"][0])')
root=$stage$prefix
pc=$(find "$root" -name braid.pc | head -n1)
[ -n "$pc" ] || { echo "FAIL: no braid.pc installed under $root"; exit 1; }
for f in bin/braidrun bin/braid-bench bin/braid-info bin/braid-torchrun \
         include/braid/braid.h; do
  [ -e "$root/$f" ] || { echo "FAIL: $f not installed"; exit 1; }
done

# The example between the README's marker and the end of its code block.
awk '/<!-- example: tests\/install -->/ { on = 1; next }
     on && /^```c/ { code = 1; next }
     code && /^```/ { exit }
     code { print }' "$readme" > "$stage/example.c"
[ -s "$stage/example.c" ] || { echo "FAIL: no example found in $readme"; exit 1; }
export PKG_CONFIG_PATH=$(dirname "$pc")
flags=$(pkg-config --define-variable=prefix="$root" --cflags --libs braid)
echo "pkg-config: $flags"
cc -o "$stage/example" "$stage/example.c" $flags

out=$("$root/bin/braidrun" -n 2 "$stage/example")
echo "$out"
echo "$out" | grep -q "rank 1 of 2: x\[3\] = 8" ||
  { echo "FAIL: the example's sum is not in its output"; exit 1; }
"$root/bin/braidrun" -n 2 "$root/bin/braid-bench" -b 8 -e 64 -n 2 -w 1 -c 1 |
  grep -q "# Wrong values: 0" ||
  { echo "FAIL: the installed braid-bench did not run clean"; exit 1; }
# The installed braid-info lists the installed plugins.
"$root/bin/braid-info" | grep -q "available.*$root" ||
  { echo "FAIL: the installed braid-info finds no installed plugin"; exit 1; }

# The engines (built where OpenBLAS, cJSON and PCRE2 are; engine/meson.build)
# find libbraid through their rpath too: braid-infer's tiny preset, and
# braid-train's for two steps, saving a checkpoint that braid-infer samples
# from.
if [ -x "$build/engine/braid-infer" ]; then
  for f in bin/braid-infer bin/braid-train; do
    [ -x "$root/$f" ] || { echo "FAIL: $f not installed"; exit 1; }
  done
  out=$("$root/bin/braidrun" -n 2 "$root/bin/braid-infer" --preset tiny \
        --prompt-ids 1,2,3 -g 4 2>&1) ||
    { echo "$out"; echo "FAIL: the installed braid-infer did not run"; exit 1; }
  echo "$out" | grep -q '^\[0\] decode: 3 tokens' ||
    { echo "$out"; echo "FAIL: the installed braid-infer decoded nothing"; exit 1; }
  out=$("$root/bin/braidrun" -n 2 "$root/bin/braid-train" --preset tiny \
        --data "$readme" --steps 2 --batch 2 --seq 16 --save "$stage/ckpt" 2>&1) ||
    { echo "$out"; echo "FAIL: the installed braid-train did not run"; exit 1; }
  [ -f "$stage/ckpt/model.safetensors" ] ||
    { echo "$out"; echo "FAIL: the installed braid-train saved no checkpoint"; exit 1; }
  out=$("$root/bin/braid-infer" --model "$stage/ckpt" --prompt "braid" -g 4 2>&1) ||
    { echo "$out"; echo "FAIL: the installed braid-infer cannot load the checkpoint"; exit 1; }
  echo "installed engines: ok"
else
  echo "install: engines not built here (no OpenBLAS, cJSON or PCRE2): not checked"
fi
echo "install: ok"
