#!/bin/sh
# hpt-live with an assets directory that lacks echarts.min.js (a build made
# without `npm ci`) serves anyway, but says at start-up, once, that the page
# will draw no charts and how to get them (was: silent, charts blank, a 404
# in the browser's console); a complete directory gives no warning.
. "$HPT_SRC/tests/helpers/lib.sh"
[ -x "$HPT_BUILD/src/hpt-live" ] || { echo "SKIP: hpt-live not built (no libmicrohttpd)"; exit 77; }
mkdir -p "$WORK/part" "$WORK/full"
cp "$HPT_SRC/share/live/index.html" "$HPT_SRC/share/live/app.js" "$HPT_SRC/share/live/style.css" "$WORK/part/"
cp "$WORK/part/"* "$HPT_BUILD/share/live/echarts.min.js" "$WORK/full/" || fail "no built echarts.min.js"
LIVE=
trap '[ -z "$LIVE" ] || kill $LIVE 2>/dev/null; rm -rf "$WORK"' EXIT
serve() { # NAME ASSETS: start, wait for the URL, stop; stderr in $WORK/NAME.err
  "$HPT_BUILD/src/hpt-live" --port 0 --assets "$2" "$WORK/run" > "$WORK/$1.out" 2> "$WORK/$1.err" &
  LIVE=$!
  for i in $(seq 1 100); do grep -q "token=" "$WORK/$1.out" && break; sleep 0.2; done
  grep -q "token=" "$WORK/$1.out" || { cat "$WORK/$1.err"; fail "$1: no URL printed"; }
  kill $LIVE; wait $LIVE || fail "$1: hpt-live exit status $? after SIGTERM"; LIVE=
}
serve part "$WORK/part"
cat "$WORK/part.err"
grep -q "^hpt-live: warning: $WORK/part/echarts.min.js is missing: the page will draw no charts (build hpt after \`npm ci\` in its source tree" "$WORK/part.err" ||
  fail "no warning naming the missing echarts.min.js"
[ "$(grep -c "warning: .* is missing" "$WORK/part.err")" = 1 ] || fail "warnings for assets that are there"
serve full "$WORK/full"
! grep -q "is missing" "$WORK/full.err" || { cat "$WORK/full.err"; fail "a warning with every asset there"; }
pass "a missing echarts.min.js is named at start-up; none when complete"
