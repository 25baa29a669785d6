#!/bin/sh
# configure --with-nccl=DIR where DIR is laid out as a Python wheel's
# nvidia/nccl: only a versioned lib/libnccl.so.2 (no libnccl.so for -lnccl
# to find), with include/nccl.h or without it (then NCCL_CFLAGS names the
# directory of a carried nccl.h) — the GPU machine's NCCL (issue 34). Without a header
# and NCCL_CFLAGS it fails loudly. Needs this machine's CUDA
# toolkit with NCCL (skips otherwise); three configure runs, ~1-2 minutes.
. "$HPT_SRC/tests/helpers/lib.sh"
grep -q "define HAVE_CUDA 1" "$HPT_BUILD/hpt_config.h" || { echo "SKIP: built without CUDA"; exit 77; }
cuda=$(sed -n 's/^CUDA_DIR = //p; s/^CUDA_CFLAGS = -I\(.*\)\/include$/\1/p' "$HPT_BUILD/Makefile" | head -n 1)
cuda=${cuda:-/usr/local/cuda}
lib=""; for l in lib lib64; do [ -e "$cuda/$l/libnccl.so.2" ] && lib="$cuda/$l/libnccl.so.2" && break; done
[ -n "$lib" ] && [ -f "$cuda/include/nccl.h" ] || { echo "SKIP: no libnccl.so.2 and nccl.h under $cuda"; exit 77; }
wheel="$WORK/site-packages/nvidia/nccl" hdr="$WORK/carried"
mkdir -p "$wheel/lib" "$wheel/include" "$hdr"
ln -s "$lib" "$wheel/lib/libnccl.so.2"
cp "$cuda/include/nccl.h" "$wheel/include/" && cp "$cuda/include/nccl.h" "$hdr/"
[ ! -e "$wheel/lib/libnccl.so" ] || fail "the fake wheel has an unversioned libnccl.so"
args=$(cd "$HPT_BUILD" && ./config.status --config)
# configure runs out of tree from a copy of what it reads: a source tree
# configured in place (CI's build) refuses a second, out-of-tree configure
src="$WORK/src"
mkdir -p "$src/lib" && cp "$HPT_SRC/configure" "$HPT_SRC/Makefile.in" "$HPT_SRC/hpt_config.h.in" "$src/" &&
  cp -R "$HPT_SRC/build-aux" "$src/" && cp "$HPT_SRC/lib/model.c" "$src/lib/" || fail "copying configure's inputs"
conf() { # NAME ARGS...: configure in $WORK/NAME
  mkdir -p "$WORK/$1" && (cd "$WORK/$1" && shift && eval "\"$src/configure\" $args" '"$@"') \
    >"$WORK/$1.out" 2>&1
}
# 1. the wheel with its header: found, linked by the versioned file, rpath
conf with-header --with-cuda="$cuda" --with-nccl="$wheel" ||
  { tail -20 "$WORK/with-header.out"; fail "configure --with-nccl=$wheel (versioned library) failed"; }
grep -q "define HAVE_NCCL 1" "$WORK/with-header/hpt_config.h" || fail "HAVE_NCCL not defined"
grep -E "^NCCL_LIBS = .*-Wl,-rpath,$wheel/lib .*$wheel/lib/libnccl\.so\.2\$" "$WORK/with-header/Makefile" ||
  { grep '^NCCL_LIBS' "$WORK/with-header/Makefile"; fail "NCCL_LIBS does not link $wheel/lib/libnccl.so.2 by path with an rpath"; }
# 2. the wheel without its header: NCCL_CFLAGS names the carried one
rm "$wheel/include/nccl.h"
conf no-header --with-cuda="$cuda" --with-nccl="$wheel" NCCL_CFLAGS="-I$hdr" ||
  { tail -20 "$WORK/no-header.out"; fail "configure --with-nccl=$wheel NCCL_CFLAGS=-I$hdr failed"; }
grep -q "define HAVE_NCCL 1" "$WORK/no-header/hpt_config.h" || fail "HAVE_NCCL not defined (header from NCCL_CFLAGS)"
grep -q "^NCCL_CFLAGS = *-I$hdr" "$WORK/no-header/Makefile" || fail "NCCL_CFLAGS not kept"
# 3. the wheel without its header and no NCCL_CFLAGS: refused, naming DIR
conf no-flags --with-cuda="$cuda" --with-nccl="$wheel" && fail "configure --with-nccl=DIR without a header succeeded"
grep -q "with-nccl=$wheel given but NCCL" "$WORK/no-flags.out" ||
  { tail -5 "$WORK/no-flags.out"; fail "no message naming --with-nccl=DIR"; }
pass "configure --with-nccl=DIR: a wheel's versioned libnccl.so.2 (with or without its header), without a header and NCCL_CFLAGS refused"
