#!/bin/sh
# The live view end to end (issue 13): the real hpt-live following a real
# 2-rank hpt-train run, the page in headless chromium (tests/live/e2e.js:
# waiting state, live points within 2 s, nonfinite alert, kill -9 -> writer
# stopped with every flushed point, a resume adds a segment, page values
# equal h5py, --on-alert ran once). Skipped (77) when hpt-live is not built
# (configure without libmicrohttpd) or node, chromium or playwright-core
# is missing.
. "$HPT_SRC/tests/helpers/lib.sh"
LIVE=${HPT_LIVE_BIN:-$HPT_BUILD/src/hpt-live}
[ -x "$LIVE" ] || { echo "SKIP: hpt-live not built ($LIVE)"; exit 77; }
command -v node >/dev/null 2>&1 || { echo "SKIP: node missing (setup.sh installs it)"; exit 77; }
[ -x "${HPT_CHROMIUM:-/usr/bin/chromium}" ] || { echo "SKIP: chromium missing (setup.sh installs it)"; exit 77; }
[ -d "$HPT_SRC/node_modules/playwright-core" ] || { echo "SKIP: playwright-core missing (npm ci in $HPT_SRC)"; exit 77; }
need_corpus
"$PYTHON" -c "import h5py, numpy" || fail "python3-h5py missing (setup.sh installs it)"
HPT_LIVE_BIN="$LIVE" HPT_CORPUS="$CORPUS" node "$HPT_SRC/tests/live/e2e.js" "$WORK" || {
  for f in "$WORK"/train*.out; do echo "== $f"; tail -20 "$f"; done; fail "live end to end"; }
pass "live end to end"
