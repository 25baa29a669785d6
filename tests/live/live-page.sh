#!/bin/sh
# The live page (share/live) in headless chromium against a stand-in server
# speaking hpt-live's HTTP/JSON contract (tests/live/fixture-server.js;
# checks in tests/live/page.js). Skipped (77) without node, chromium or
# npm's playwright-core; the page's ECharts comes from the build tree.
. "$HPT_SRC/tests/helpers/lib.sh"
command -v node >/dev/null 2>&1 || { echo "SKIP: node missing (setup.sh installs it)"; exit 77; }
[ -x "${HPT_CHROMIUM:-/usr/bin/chromium}" ] || { echo "SKIP: chromium missing (setup.sh installs it)"; exit 77; }
[ -d "$HPT_SRC/node_modules/playwright-core" ] || { echo "SKIP: playwright-core missing (npm ci in $HPT_SRC)"; exit 77; }
[ -f "$HPT_BUILD/share/live/echarts.min.js" ] || fail "share/live/echarts.min.js not built"
node "$HPT_SRC/tests/live/page.js" || fail "live page"
pass "live page"
