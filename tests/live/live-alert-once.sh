#!/bin/sh
# hpt-live --on-alert: the command runs once per alert and gets no file of
# hpt-live's but stdin/stdout/stderr. A real 1-rank run with an injected NaN
# fires the nonfinite alert: the command's own /proc/PID/fd lists neither
# the metrics file HDF5 holds open nor a socket. The file is then replaced
# by a copy of itself (cp + mv, as a user restoring or moving it would):
# hpt-live reads it again and sees the alert again, but does not run the
# command a second time.
. "$HPT_SRC/tests/helpers/lib.sh"
LIVE="$HPT_BUILD/src/hpt-live"
[ -x "$LIVE" ] || { echo "SKIP: hpt-live not built (no libmicrohttpd)"; exit 77; }
need_corpus
export OMP_NUM_THREADS=1
export ALERTS="$WORK/alerts.txt" FDS="$WORK/fds"
"$LIVE" --port 0 --alert nonfinite \
  --on-alert 'ls -l /proc/$$/fd > "$FDS.$HPT_ALERT_STEP.$$"; echo "$HPT_ALERT_RULE $HPT_ALERT_STEP" >> "$ALERTS"' \
  "$WORK/r" > "$WORK/live.out" 2> "$WORK/live.err" &
LPID=$!
trap 'kill $LPID 2>/dev/null' EXIT
wait_for() { # wait_for SECONDS CMD...: poll until CMD succeeds
  t=$(($1 * 10)); shift
  until "$@"; do
    t=$((t - 1)); [ $t -gt 0 ] || return 1
    sleep 0.1
  done
}
wait_for 60 grep -q "waiting for it" "$WORK/live.err" || { cat "$WORK/live.err"; fail "hpt-live did not start"; }
"$TRAIN" --model tiny --data "$CORPUS" --seq-len 16 --batch 1 --steps 4 --metrics-interval 1 \
  --fault-nan-steps 2 --fault-nan-rank 0 --quiet --run-dir "$WORK/r" > "$WORK/train.out" 2>&1 ||
  { cat "$WORK/train.out"; fail "training run"; }
wait_for 120 test -s "$ALERTS" || { cat "$WORK/live.err"; fail "the nonfinite alert did not run the command"; }
sleep 1
[ "$(wc -l < "$ALERTS")" -eq 1 ] || fail "--on-alert ran $(wc -l < "$ALERTS") times for one alert: $(cat "$ALERTS")"
f=$(ls "$FDS".* | head -1)
cat "$f"
grep -q "metrics.h5" "$f" && fail "the --on-alert command inherited the metrics file: $(grep metrics.h5 "$f")"
grep -q "socket:" "$f" && fail "the --on-alert command inherited a socket: $(grep socket: "$f")"
cp "$WORK/r/metrics.h5" "$WORK/r/copy.h5" && mv "$WORK/r/copy.h5" "$WORK/r/metrics.h5" || fail "replace the file"
two() { [ "$(grep -c "alert nonfinite at step" "$WORK/live.err")" -ge 2 ]; }
wait_for 120 two || { cat "$WORK/live.err"; fail "hpt-live did not read the replaced file's alert"; }
sleep 1
cat "$WORK/live.err"
[ "$(wc -l < "$ALERTS")" -eq 1 ] ||
  fail "--on-alert ran again for the alert read from the replaced file: $(cat "$ALERTS")"
grep -q "read again from a replaced file" "$WORK/live.err" || fail "no message for the alert read again"
pass "--on-alert runs once per alert, with no inherited file"
