#!/bin/sh
# Bad environment: healthy checkpoints on a file system without lock
# support (NFS without lockd, Lustre without flock), read without
# HDF5_USE_FILE_LOCKING=FALSE. HDF5 1.10+ locks a file on open and fails
# with ENOLCK there; hpt-ckpt called such checkpoints "not a readable HDF5
# file, or truncated" and verify "damaged or unreadable" (issue 33), with
# the real cause (errno 37) only in parentheses. Now the cause comes first
# with the fix, the status is 5 (I/O), never 3, and no checkpoint that was
# not read is called damaged. The no-lock file system is the LD_PRELOAD
# shim of tests/metrics/metrics-nolock.sh (tests/helpers/metrics-nolock-shim.c); HDF5 and
# hpt-ckpt are the real ones.
. "$HPT_SRC/tests/helpers/lib.sh"
export ASAN_OPTIONS="$ASAN_OPTIONS:verify_asan_link_order=0"
CKPT="$HPT_BUILD/src/hpt-ckpt"
CC=${CC:-cc}
command -v "$CC" > /dev/null || { echo "SKIP: no C compiler for the shim"; exit 77; }
"$CC" -shared -fPIC -o "$WORK/nolock.so" "$HPT_SRC/tests/helpers/metrics-nolock-shim.c" -ldl || fail "shim build"
unset HDF5_USE_FILE_LOCKING
tiny_ckpts "$WORK/c" --steps 10 20
F="$WORK/c/step_00000020/checkpoint.h5"
NOLOCK="not read: its file system does not support file locks, which HDF5 takes on open \(HDF5: unable to lock file, errno = 37.*\); set HDF5_USE_FILE_LOCKING=FALSE"
# not_damaged: the last output names no checkpoint damaged, truncated or unreadable
not_damaged() {
  grep -qiE "damaged|truncated|unreadable|not a readable" "$WORK/out.$$" &&
    fail "$1: a checkpoint that was not read is called damaged"
  return 0
}
expect_error 5 "checkpoint.h5: $NOLOCK" env LD_PRELOAD="$WORK/nolock.so" "$CKPT" verify "$F"
not_damaged "verify FILE"
expect_error 5 "c: 2 of 2 checkpoints not read, so not verified: its file system does not support file locks; set HDF5_USE_FILE_LOCKING=FALSE" \
  env LD_PRELOAD="$WORK/nolock.so" "$CKPT" verify "$WORK/c"
not_damaged "verify DIR"
[ "$(grep -cE "step_000000[12]0/checkpoint.h5: $NOLOCK" "$WORK/out.$$")" = 2 ] ||
  fail "verify DIR: not one line with the cause per checkpoint"
expect_error 5 "c: 2 checkpoints not read, so not verified: its file system does not support file locks" \
  env LD_PRELOAD="$WORK/nolock.so" "$CKPT" list --verify "$WORK/c"
not_damaged "list --verify"
[ "$(grep -cE "^ +[12]0 .* not read \(no file locks\)" "$WORK/out.$$")" = 2 ] ||
  fail "list --verify: the status of both is not 'not read (no file locks)'"
# info DIR takes the newest readable one: it must not pass step 20 by for 10
expect_error 5 "step_00000020/checkpoint.h5: $NOLOCK" env LD_PRELOAD="$WORK/nolock.so" "$CKPT" info "$WORK/c"
grep -q "step_00000010" "$WORK/out.$$" && fail "info DIR went past step 20 to step 10"
# the fix the message names works there
HDF5_USE_FILE_LOCKING=FALSE LD_PRELOAD="$WORK/nolock.so" "$CKPT" verify "$WORK/c" > "$WORK/v" 2>&1 ||
  { cat "$WORK/v"; fail "verify with HDF5_USE_FILE_LOCKING=FALSE without locks"; }
[ "$(grep -c ': ok$' "$WORK/v")" = 2 ] || { cat "$WORK/v"; fail "verify with HDF5_USE_FILE_LOCKING=FALSE: not both ok"; }
pass "no file locks: the cause and HDF5_USE_FILE_LOCKING=FALSE named first, exit 5, nothing called damaged"
