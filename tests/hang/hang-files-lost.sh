#!/bin/sh
# Hang watchdog when its files cannot be written: RUN_DIR/hang deleted
# during the run (re-created: dumps, summary), replaced by a file, or on a
# full disk (summary.txt's write fails with ENOSPC,
# tests/helpers/metrics-nospace-shim.c). In every case the job still ends with status 6 and the hang line
# reaches stderr; where a file cannot be written a warning names it and the
# cause, and no empty summary.txt is left (issue 33: no line, no dumps, an
# empty summary and no warning). 2 ranks, rank 1 stalls before step 3.
. "$HPT_SRC/tests/helpers/lib.sh"
. "$HPT_SRC/tests/helpers/hang-lib.sh"
need_corpus
# start the stall job in the background; once the watchdog's heartbeat is
# there (it starts before step 1; the stall fires 5 s after step 3 began),
# do "$@" to RUN_DIR/hang
lose_dir() {
  rm -rf "$WORK/run"
  stall_job_st 2 1 3 > "$WORK/log" 2>&1 &
  local pid=$! i=0
  while [ ! -e "$WORK/run/hang/hb-00000.json" ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i + 1)); done
  [ -e "$WORK/run/hang/hb-00000.json" ] || { wait $pid; cat "$WORK/log"; fail "no heartbeat within 60 s"; }
  "$@"
  wait $pid || { cat "$WORK/log"; fail "stall_job failed"; }
  cat "$WORK/log"
  ST=$(sed -n 's/^ST=//p' "$WORK/log")
}
# stall_job in a subshell: its status comes back through the log
stall_job_st() { stall_job "$@"; echo "ST=$ST"; }

rm_dir() { rm -rf "$WORK/run/hang"; }
# (the running job's watchdog may re-create the directory between the rm
# and the file's creation: rename a file into place until it holds)
file_dir() {
  i=0
  until [ -f "$WORK/run/hang" ]; do
    rm -rf "$WORK/run/hang"
    echo in-the-way > "$WORK/run/hang.tmp" && mv -T "$WORK/run/hang.tmp" "$WORK/run/hang" 2>/dev/null || true
    i=$((i + 1)); [ $i -lt 200 ] || fail "could not replace RUN_DIR/hang by a file"
  done
}

lose_dir rm_dir
[ "$ST" = 6 ] || fail "deleted: exit status $ST, expected 6"
grep -q "^hpt-train: hang: .*suspect: rank 1 on $HOST" "$WORK/log" || fail "deleted: no hang line naming rank 1"
grep -q "^suspects: 1@$HOST" "$WORK/run/hang/summary.txt" || fail "deleted: RUN_DIR/hang not re-created with a summary naming rank 1"
[ -s "$WORK/run/hang/rank-00000.json" ] || fail "deleted: no dump of rank 0 in the re-created RUN_DIR/hang"

lose_dir file_dir
[ "$ST" = 6 ] || fail "replaced by a file: exit status $ST, expected 6"
grep -q "^hpt-train: hang: rank .*aborting the job" "$WORK/log" || fail "replaced by a file: no hang line"
grep -q "^hpt-train: warning: rank [01]: cannot write $WORK/run/hang/.*: Not a directory" "$WORK/log" ||
  fail "replaced by a file: no warning naming the path and the cause"

# a full disk: the summary cannot be written
rm -rf "$WORK/run"
"${CC:-cc}" -shared -fPIC -o "$WORK/nospace.so" "$HPT_SRC/tests/helpers/metrics-nospace-shim.c" -ldl ||
  { echo "SKIP: cannot build the ENOSPC shim"; exit 77; }
export ASAN_OPTIONS="${ASAN_OPTIONS:-}:verify_asan_link_order=0"
LD_PRELOAD="$WORK/nospace.so" HPT_TEST_NOSPACE=/summary.txt stall_job_st 2 1 3 > "$WORK/log" 2>&1 || true
cat "$WORK/log"
ST=$(sed -n 's/^ST=//p' "$WORK/log")
[ "$ST" = 6 ] || fail "disk full: exit status $ST, expected 6"
grep -q "^hpt-train: hang: .*suspect: rank 1 on $HOST" "$WORK/log" || fail "disk full: no hang line"
grep -q "^hpt-train: warning: rank [01]: cannot write $WORK/run/hang/summary.txt: No space left on device" \
  "$WORK/log" || fail "disk full: no warning naming summary.txt and ENOSPC"
[ ! -e "$WORK/run/hang/summary.txt" ] || [ -s "$WORK/run/hang/summary.txt" ] ||
  fail "disk full: an empty summary.txt was left"
pass "hang files lost: deleted (re-created), replaced by a file, disk full: exit 6, the line, warnings"
