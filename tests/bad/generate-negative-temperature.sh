#!/bin/sh
# Bad input: a negative hpt-generate --temperature exits 2 before anything
# is loaded (0 is greedy; a top-k below 0 is refused the same way).
. "$HPT_SRC/tests/helpers/lib.sh"
GEN="$HPT_BUILD/src/hpt-generate"
expect_error 2 "\-\-temperature -0.5: must be >= 0 \(0 = greedy\)" \
  "$GEN" "$WORK/nope" --prompt "The horse" --temperature -0.5
expect_error 2 "\-\-top-k -1: must be an integer >= 0" "$GEN" "$WORK/nope" --prompt "The horse" --top-k -1
# not a number, inf (was "not a number"): the shared parser's message
expect_error 2 "\-\-temperature 'inf': not a finite number" \
  "$GEN" "$WORK/nope" --prompt "The horse" --temperature inf
pass "a negative or infinite temperature is refused"
