#!/bin/sh
# Bad input: hpt-generate --top-p outside (0, 1] (or not a number) exits 2
# before anything is loaded.
. "$HPT_SRC/tests/helpers/lib.sh"
GEN="$HPT_BUILD/src/hpt-generate"
for p in 0 -0.5 1.5; do
  expect_error 2 "\-\-top-p $p: must be in \(0, 1\]" "$GEN" "$WORK/nope" --prompt "The horse" --top-p "$p"
done
expect_error 2 "\-\-top-p 'x': not a finite number" "$GEN" "$WORK/nope" --prompt "The horse" --top-p x
pass "--top-p outside (0, 1] is refused"
