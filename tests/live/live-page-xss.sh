#!/bin/sh
# The live page shows markup in a run's name and an event's detail as text
# (tooltips, state line, events, alerts): tests/live/page-xss.js against the
# stand-in server. Skipped (77) without node, chromium or playwright-core.
. "$HPT_SRC/tests/helpers/lib.sh"
command -v node >/dev/null 2>&1 || { echo "SKIP: node missing (setup.sh installs it)"; exit 77; }
[ -x "${HPT_CHROMIUM:-/usr/bin/chromium}" ] || { echo "SKIP: chromium missing (setup.sh installs it)"; exit 77; }
[ -d "$HPT_SRC/node_modules/playwright-core" ] || { echo "SKIP: playwright-core missing (npm ci in $HPT_SRC)"; exit 77; }
[ -f "$HPT_BUILD/share/live/echarts.min.js" ] || fail "share/live/echarts.min.js not built"
node "$HPT_SRC/tests/live/page-xss.js" || fail "live page, markup in file-derived text"
pass "live page, markup in file-derived text"
