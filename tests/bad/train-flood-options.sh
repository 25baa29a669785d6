#!/bin/sh
# Bad input: --event-window negative or not a number, and --fault-anomaly
# malformed (no range, reversed, step 0, a kind it cannot force, junk after
# the range), beyond --steps or without a metrics file (it would force
# nothing), or given twice (the second would replace the first) are
# refused with exit 2, naming the option and the rule.
. "$HPT_SRC/tests/helpers/lib.sh"
need_corpus
t() { "$TRAIN" --model tiny --data "$CORPUS" --steps 10 "$@"; }
expect_error 2 "\-\-event-window -1: must be >= 0 steps" t --event-window -1
expect_error 2 "\-\-event-window 'ten': not an integer" t --event-window ten
form="expected KIND:A-B, KIND grad_norm_spike or throughput_drop, steps 1 <= A <= B"
for bad in throughput_drop throughput_drop:9-5 throughput_drop:0-5 slow_rank:1-5 throughput_drop:5-x \
    throughput_drop:-1-5 " throughput_drop:1-5" throughput_drop:1-5, :1-5; do
  expect_error 2 "\-\-fault-anomaly '$bad': $form" t --run-dir "$WORK/r" --fault-anomaly "$bad"
done
expect_error 2 "\-\-fault-anomaly 'throughput_drop:11-12': step 11 is beyond \-\-steps 10" \
  t --run-dir "$WORK/r" --fault-anomaly throughput_drop:11-12
expect_error 2 "\-\-fault-anomaly needs the metrics file" t --fault-anomaly throughput_drop:1-2
expect_error 2 "\-\-fault-anomaly needs the metrics file" t --run-dir "$WORK/r" --metrics none \
  --fault-anomaly grad_norm_spike:1-2
expect_error 2 "\-\-fault-anomaly 'grad_norm_spike:3-4': given twice \(after 'throughput_drop:1-2'\)" \
  t --run-dir "$WORK/r" --fault-anomaly throughput_drop:1-2 --fault-anomaly grad_norm_spike:3-4
[ ! -e "$WORK/r" ] || fail "a refused run created its run directory"
pass "bad --event-window and --fault-anomaly values are refused"
