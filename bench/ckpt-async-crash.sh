#!/bin/sh
# More kill -9 trials of asynchronous saves than the test suite runs:
# tests/ckpt/ckpt-async-crash.sh with N kills (default 200) and no time budget.
# Usage (from a configured build directory):
#   bench/ckpt-async-crash.sh BUILD_DIR [N]
set -eu
B=${1:?usage: bench/ckpt-async-crash.sh BUILD_DIR [N]}
N=${2:-200}
cd "$B"
make check HPT_CORPUS="${HPT_CORPUS:-$B/tests/corpus}" TESTS="tests/ckpt/ckpt-async-crash.sh" \
  HPT_ASYNC_CRASH_POINTS="$N" HPT_ASYNC_CRASH_SECONDS=1000000000
tail -3 tests/ckpt/ckpt-async-crash.log
