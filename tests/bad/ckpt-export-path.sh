#!/bin/sh
# --export paths: an empty name is a usage error before any step (exit 2; was
# a full run, then "cannot rename .tmp to : ..." and exit 5), and an export
# into the --run-dir that this run creates is accepted (was refused: "directory
# RUN does not exist", exit 5) while a directory below it that nobody creates
# is still refused before training. The export carries the model config
# (config_json): hpt-generate needs no --model for it (was: "the file carries
# no model config", exit 2) and refuses a --model that differs (exit 2).
. "$HPT_SRC/tests/helpers/lib.sh"
need_corpus
T="$TRAIN --model tiny --data $CORPUS --steps 1 --batch 2 --seq-len 32 --metrics none"
expect_error 2 "\-\-export '': expected a file name" $T --export ""
grep -q "^step" "$WORK/out.$$" && fail "training ran before --export '' was refused"
$T --quiet --run-dir "$WORK/new/" --export "$WORK/new/model.h5" > "$WORK/o" 2>&1 ||
  { cat "$WORK/o"; fail "--export into the run directory being created: refused"; }
[ -s "$WORK/new/model.h5" ] && [ -s "$WORK/new/config.json" ] || fail "no export or config.json"
"$HPT_BUILD/src/hpt-generate" "$WORK/new/model.h5" --tokenizer "$CORPUS" --prompt "The" \
  --max-new-tokens 2 --ids > "$WORK/g" 2>&1 || { cat "$WORK/g"; fail "hpt-generate on the export without --model"; }
grep -q "^generated:" "$WORK/g" || fail "hpt-generate printed no tokens"
expect_error 2 "\-\-model small does not match the config of $WORK/new/model.h5: hidden_size" \
  "$HPT_BUILD/src/hpt-generate" "$WORK/new/model.h5" --model small --tokenizer "$CORPUS" --prompt "The"
expect_error 5 "\-\-export $WORK/new2/sub/model.h5: directory $WORK/new2/sub does not exist" \
  $T --run-dir "$WORK/new2" --export "$WORK/new2/sub/model.h5"
[ ! -e "$WORK/new2" ] || fail "the run directory was created for a refused run"
# a place where no file can be created although access() says yes to root
# (/proc): refused before training (was: a whole run, then exit 5)
expect_error 5 "\-\-export /proc/version: cannot create /proc/version.tmp" $T --export /proc/version
grep -q "^step" "$WORK/out.$$" && fail "training ran before --export /proc/version was refused"
pass "--export '' and /proc/version refused; --export into a new --run-dir works and carries its config"
