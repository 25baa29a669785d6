# tests/helpers/hang-lib.sh — shared by the hang watchdog tests (sourced after
# tests/helpers/lib.sh): run a job with one stalled rank and check that it ends.
export OMP_NUM_THREADS=1
HM="$HPT_BUILD/src/hpt-metrics"
HOST=$(hostname)

# stall_job N R STEP ARGS...: N ranks, world rank R stalls before step
# STEP, --collective-timeout 5; sets ST (mpiexec's status), ELAPSED (s);
# output in $WORK/out, run directory $WORK/run. Fails when the job is still
# running after 170 s or leaves a rank behind.
stall_job() {
  local n=$1 r=$2 s=$3; shift 3
  local t0=$(date +%s)
  ST=0
  timeout -s KILL 170 "$MPIEXEC" -n "$n" "$TRAIN" --model tiny --data "$CORPUS" --steps 50 \
    --batch 2 --seq-len 32 --eval-interval 0 --run-dir "$WORK/run" --collective-timeout 5 \
    --fault-stall-rank "$r" --fault-stall-step "$s" "$@" > "$WORK/out" 2>&1 || ST=$?
  ELAPSED=$(( $(date +%s) - t0 ))
  cat "$WORK/out"
  if grep -qE "AddressSanitizer|runtime error:" "$WORK/out"; then fail "sanitizer report"; fi
  # a killed rank may still be tearing down when mpiexec returns (a stopped
  # one, killed last, under load): give it 10 s to be gone
  n=0
  while pgrep -f "run-dir $WORK/run" > /dev/null && [ "$n" -lt 20 ]; do sleep 0.5; n=$((n + 1)); done
  if pgrep -f "run-dir $WORK/run" > /dev/null; then
    pgrep -af "run-dir $WORK/run"; ps -o pid,stat,etime,cmd -p "$(pgrep -d, -f "run-dir $WORK/run")" || true
    pkill -9 -f "run-dir $WORK/run"; fail "a rank is still running 10 s after the job ended"
  fi
  [ "$ST" -ne 137 ] || fail "the job was still running after 170 s (not ended by the watchdog)"
}

# check_hang N R: status 6 within the bound, one line naming rank R and
# its host, a dump from every rank, hpt-metrics hang naming R.
check_hang() {
  local n=$1 r=$2
  [ "$ST" -eq 6 ] || fail "exit status $ST, expected 6 (hang)"
  # 5 s timeout + start-up and a few steps on a loaded machine: generous
  [ "$ELAPSED" -lt 120 ] || fail "the job took ${ELAPSED}s to end"
  grep -E "^hpt-train: hang: .*suspect: rank $r on $HOST " "$WORK/out" ||
    fail "no hang line naming rank $r on $HOST"
  [ "$(grep -c '^hpt-train: hang:' "$WORK/out")" -eq 1 ] || fail "hang line printed more than once"
  local i=0
  while [ $i -lt "$n" ]; do
    [ -s "$WORK/run/hang/rank-$(printf %05d $i).json" ] || fail "no dump of rank $i"
    i=$((i + 1))
  done
  "$HM" hang "$WORK/run" > "$WORK/report" || { cat "$WORK/report"; fail "hpt-metrics hang failed"; }
  cat "$WORK/report"
  grep -q "suspects: rank $r on $HOST (not in a communication call" "$WORK/report" ||
    fail "hpt-metrics hang does not name rank $r on $HOST"
}
