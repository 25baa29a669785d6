#!/bin/sh
# Bad input: --token-file that cannot be read (missing, a directory) -> exit 5
# naming it; one whose first line is no usable token (too short, spaces) ->
# exit 2. Never a server without the token the user asked for.
. "$HPT_SRC/tests/helpers/lib.sh"
LIVE="$HPT_BUILD/src/hpt-live"
[ -x "$LIVE" ] || { echo "SKIP: hpt-live not built (no libmicrohttpd)"; exit 77; }
expect_error 5 "hpt-live: --token-file $WORK/missing: cannot read it: No such file or directory" \
  timeout 60 "$LIVE" --port 0 --token-file "$WORK/missing" "$WORK/run"
mkdir "$WORK/dir"
expect_error 5 "hpt-live: --token-file $WORK/dir: cannot read it: Is a directory" \
  timeout 60 "$LIVE" --port 0 --token-file "$WORK/dir" "$WORK/run"
echo short > "$WORK/short"
expect_error 2 "hpt-live: --token-file $WORK/short: the first line must be a token of 16 to" \
  timeout 60 "$LIVE" --port 0 --token-file "$WORK/short" "$WORK/run"
echo "a token with spaces in it" > "$WORK/spaces"
expect_error 2 "hpt-live: --token-file $WORK/spaces: the first line must be a token" \
  timeout 60 "$LIVE" --port 0 --token-file "$WORK/spaces" "$WORK/run"
: > "$WORK/empty"
expect_error 2 "hpt-live: --token-file $WORK/empty: the first line must be a token .*got 0 characters" \
  timeout 60 "$LIVE" --port 0 --token-file "$WORK/empty" "$WORK/run"
pass "unreadable or unusable token files are refused"
