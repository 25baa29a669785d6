#!/bin/sh
# Bad input: a truncated config.json is refused, naming the file.
. "$HPT_SRC/tests/helpers/lib.sh"
printf '{"hidden_size": 64, "intermediate_size": ' > "$WORK/c.json"
expect_error 2 "c.json: malformed JSON" "$TRAIN" --model "$WORK/c.json" --data "$WORK" --steps 1
