#!/bin/sh
# A data directory without val*.bin trains without validation (with a
# note); log.tsv and --log-samples' samples.0.tsv are flushed every step,
# so a killed run leaves only whole lines, and the samples of every logged
# step.
. "$HPT_SRC/tests/helpers/lib.sh"
need_corpus
mkdir "$WORK/d" && ln -s "$CORPUS/train_000000.bin" "$WORK/d/train_000000.bin"
"$TRAIN" --model tiny --data "$WORK/d" --steps 3 --batch 2 --seq-len 32 > "$WORK/o" 2>&1 ||
  { cat "$WORK/o"; fail "training without a val shard"; }
grep -q "has no val\*.bin shard: training without validation" "$WORK/o" || fail "no note about validation"
"$TRAIN" --model tiny --data "$CORPUS" --steps 100000 --batch 2 --seq-len 32 --eval-interval 0 \
  --log-samples --run-dir "$WORK/r" > "$WORK/o2" 2>&1 &
pid=$!
i=0
until [ "$(grep -c '^step' "$WORK/o2")" -ge 20 ]; do sleep 0.2; i=$((i + 1)); [ $i -lt 300 ] || break; done
kill -9 $pid; wait $pid 2>/dev/null
rows=$(($(wc -l < "$WORK/r/log.tsv") - 1))
[ "$rows" -ge 20 ] || fail "log.tsv has $rows rows after 20 printed steps"
[ "$(tail -c 1 "$WORK/r/log.tsv" | od -An -c | tr -d ' ')" = '\n' ] || fail "log.tsv ends mid-line"
awk -F'\t' 'NF != 6 { exit 1 }' "$WORK/r/log.tsv" || fail "log.tsv has a partial row"
awk -F'\t' 'NF != 3 { exit 1 }' "$WORK/r/samples.0.tsv" || fail "samples.0.tsv has a partial row"
last=$(tail -n 1 "$WORK/r/log.tsv" | cut -f1)
sampled=$(tail -n 1 "$WORK/r/samples.0.tsv" | cut -f1)
[ "${sampled:-0}" -ge "$last" ] || fail "samples.0.tsv ends at step '${sampled}', log.tsv at $last: not flushed"
pass "no-val directory trains; log.tsv had $rows whole rows after kill -9"
