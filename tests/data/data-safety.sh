#!/bin/sh
# hpt-data never destroys data: it refuses an input that is one of its own
# outputs (and the input survives); a failed rerun (bad --tokenizer, a
# vocabulary too small or too large, a --val-fraction leaving no training
# line) leaves the previous dataset byte-for-byte and inode-for-inode as it
# was; a good rerun replaces it and removes the old set's stale shards.
# SentencePiece's errors are reported in hpt-data's terms, naming the file.
. "$HPT_SRC/tests/helpers/lib.sh"
need_corpus
D="$WORK/d"
TEXT="$WORK/text.txt"
head -n 3000 "$CORPUS/corpus.txt" > "$TEXT"
run() { "$DATA_TOOL" --threads 2 "$@"; }

# Names, inodes, sizes and checksums of everything in $D (hidden files too).
snapshot() {
  (cd "$D" && ls -A | LC_ALL=C sort | while read -r f; do
     printf '%s %s %s\n' "$f" "$(stat -c '%i %s' "$f")" "$(md5sum < "$f")"
   done)
}
unchanged() { # WHAT: $D must equal $WORK/before
  snapshot > "$WORK/after"
  diff "$WORK/before" "$WORK/after" || fail "$1 changed the existing dataset in $D"
  echo "PASS: dataset unchanged after $1"
}

# A dataset with several train shards (so a later run has stale ones).
run --input "$TEXT" --out "$D" --vocab-size 400 --shard-tokens 20000 > "$WORK/log0" 2>&1 ||
  { cat "$WORK/log0"; fail "first hpt-data run"; }
[ -f "$D/train_000003.bin" ] || fail "expected 4+ train shards with --shard-tokens 20000"
snapshot > "$WORK/before"

# 1. The input is an output of $D: refused (exit 2, naming it), kept intact.
expect_error 2 "corpus.txt: refusing to use this input: it is corpus.txt, one of the outputs" \
  run --input "$D/corpus.txt" --out "$D" --vocab-size 500
unchanged "--input $D/corpus.txt"
ln -s "$D/corpus.txt" "$WORK/link.txt"
expect_error 2 "link.txt: refusing to use this input: it is corpus.txt" \
  run --input "$WORK/link.txt" --out "$D" --vocab-size 500
expect_error 2 "train_000000.bin: refusing to use this input" \
  run --input "$D/train_000000.bin" --out "$D"
unchanged "an input linked to or inside $D"

# 2 and 3. Failing reruns leave the dataset as it was, with clear messages.
cp "$TEXT" "$WORK/not-a-model.model"
expect_error 3 "^hpt-data: --tokenizer .*not-a-model.model: not a SentencePiece model" \
  run --input "$TEXT" --out "$D" --tokenizer "$WORK/not-a-model.model"
run --input "$TEXT" --out "$D" --tokenizer "$WORK/not-a-model.model" 2> "$WORK/err" > /dev/null &&
  fail "a text file was accepted as a tokenizer"
! grep -qE '[[:space:]]$' "$WORK/err" || fail "error message ends with whitespace"
unchanged "a bad --tokenizer"
expect_error 3 "^hpt-data: --tokenizer .*typo.model: cannot open tokenizer model" \
  run --input "$TEXT" --out "$D" --tokenizer "$WORK/typo.model"
unchanged "a missing --tokenizer"
expect_error 3 "text.txt: vocabulary 300 is too small for this text: it needs at least 3[0-9][0-9] pieces.*use --vocab-size >= 3[0-9][0-9]$" \
  run --input "$TEXT" --out "$D" --vocab-size 300
unchanged "--vocab-size 300 (too small)"
expect_error 3 "text.txt: vocabulary 60000 is too large for this text: .*use --vocab-size <= [0-9]+" \
  run --input "$TEXT" --out "$D" --vocab-size 60000
unchanged "--vocab-size 60000 (too large)"
expect_error 3 "text.txt: 3000 non-empty lines; val_fraction 0.9999999 leaves none for training" \
  run --input "$TEXT" --out "$D" --val-fraction 0.9999999
unchanged "--val-fraction 0.9999999"
if command -v flock > /dev/null; then
  expect_error 5 "another hpt-data run is writing this output directory" \
    flock "$D" "$DATA_TOOL" --input "$TEXT" --out "$D" --force
  unchanged "a run while $D is locked"
fi
[ ! -e "$D/.prep-tmp" ] || fail "staging directory left behind"
run --input "$TEXT" --out "$D" --vocab-size 400 --shard-tokens 20000 > "$WORK/log1" 2>&1 ||
  { cat "$WORK/log1"; fail "rerun after the failures"; }
grep -q "up to date" "$WORK/log1" || { cat "$WORK/log1"; fail "the kept dataset is not up to date"; }
unchanged "an up-to-date rerun"

# Every line longer than SentencePiece's max_sentence_length.
"$PYTHON" -c "print(('word ' * 14000 + '\n') * 3, end='')" > "$WORK/long.txt"
expect_error 3 "long.txt: no usable line to train the tokenizer: every line is longer than 65536 bytes" \
  run --input "$WORK/long.txt" --out "$WORK/long" --vocab-size 300 --val-fraction 0
[ -z "$(ls -A "$WORK/long")" ] || fail "a failed first run left files in $WORK/long"

# A good rerun (a copy of the input is fine) replaces the dataset and
# removes the old set's extra shards.
cp "$D/corpus.txt" "$WORK/copy.txt"
run --input "$WORK/copy.txt" --out "$D" --vocab-size 500 > "$WORK/log2" 2>&1 ||
  { cat "$WORK/log2"; fail "good rerun"; }
cmp -s "$WORK/copy.txt" "$D/corpus.txt" || fail "corpus.txt of the rerun differs from its input"
[ -f "$D/train_000000.bin" ] && [ -f "$D/val_000000.bin" ] || fail "new shards missing"
[ ! -e "$D/train_000001.bin" ] || fail "stale train_000001.bin of the old set left in $D"
grep -q '"vocab_size":500' "$D/prep.json" || fail "prep.json does not describe the new run"
[ ! -e "$D/.prep-tmp" ] || fail "staging directory left behind after success"
# --tokenizer may be the dataset's own model; corpus.txt is then stale.
run --input "$TEXT" --out "$D" --tokenizer "$D/tokenizer.model" > "$WORK/log3" 2>&1 ||
  { cat "$WORK/log3"; fail "--tokenizer $D/tokenizer.model"; }
[ ! -e "$D/corpus.txt" ] || fail "corpus.txt kept although no tokenizer was trained"
[ -s "$D/tokenizer.model" ] || fail "tokenizer.model lost"

# 4. Help: -h works, corpus.txt is listed, the vocabulary advice is there.
"$DATA_TOOL" -h > "$WORK/h1" 2>&1 || fail "-h exit status"
"$DATA_TOOL" --help > "$WORK/h2" 2>&1 || fail "--help exit status"
cmp -s "$WORK/h1" "$WORK/h2" || fail "-h and --help differ"
grep -q "corpus.txt .*written only when a tokenizer is" "$WORK/h1" || fail "--help does not list corpus.txt"
grep -q "real text needs more" "$WORK/h1" || fail "--help does not say real text needs a larger vocabulary"
# a failed first run (an empty input) leaves no empty output directory;
# a failed rerun keeps an existing one (above)
: > "$WORK/empty.txt"
expect_error 3 "empty.txt: no non-empty line of text" run --input "$WORK/empty.txt" --out "$WORK/new-out"
[ ! -e "$WORK/new-out" ] || fail "the failed first run left $(ls -la "$WORK/new-out")"
# binary input is prepared (SentencePiece takes bytes) but named as not text
"$PYTHON" -c "import random, sys; random.seed(1); sys.stdout.buffer.write(bytes(random.randrange(256) for _ in range(200000)))" > "$WORK/g.bin"
run --input "$WORK/g.bin" --out "$WORK/g-out" --vocab-size 3000 > "$WORK/g.log" 2>&1 ||
  { cat "$WORK/g.log"; fail "hpt-data on binary input"; }
grep -q "warning: .*g.bin does not look like UTF-8 text: [0-9]* of its 200000 bytes are NUL or invalid UTF-8" "$WORK/g.log" ||
  { cat "$WORK/g.log"; fail "no warning for binary input"; }
! grep -q "does not look like UTF-8" "$WORK/log0" || fail "a warning for the real text"
# a --val-fraction that sends most of the text to validation is done, with a warning
run --input "$TEXT" --out "$WORK/v-out" --vocab-size 400 --val-fraction 0.9 > "$WORK/v.log" 2>&1 ||
  { cat "$WORK/v.log"; fail "hpt-data --val-fraction 0.9"; }
grep -q "warning: --val-fraction 0.9 leaves 300 of the 3000 lines (10 %) for training and 2700 for validation" "$WORK/v.log" ||
  { cat "$WORK/v.log"; fail "no warning for --val-fraction 0.9"; }
! grep -q "val-fraction" "$WORK/log0" || fail "a --val-fraction warning for the default"
pass "hpt-data keeps its input and the previous dataset on failure; messages name the file and the fix"
