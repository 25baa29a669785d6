#!/bin/sh
# configure's package metadata: no placeholder bug-report address (the
# project publishes none; AC_INIT once named https://example.invalid/...).
. "$HPT_SRC/tests/helpers/lib.sh"
h="$HPT_BUILD/hpt_config.h"
[ -f "$h" ] || fail "$h missing"
grep -E '^#define PACKAGE_BUGREPORT' "$h" || fail "no PACKAGE_BUGREPORT in $h"
grep -qiE '^#define PACKAGE_BUGREPORT ".*(example|\.invalid|placeholder)' "$h" &&
  fail "PACKAGE_BUGREPORT is a placeholder"
grep -qi 'example\.invalid' "$HPT_SRC/configure.ac" && fail "configure.ac still names example.invalid"
pass "no placeholder bug-report address"
