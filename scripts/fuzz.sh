#!/usr/bin/env bash
# Runs every fuzz target of the given packages for FUZZTIME each. A target's
# output is shown only when it fails. Go's fuzzing engine sometimes ends a
# run with "context deadline exceeded" and no failing input, when a worker
# is slow to stop on a loaded machine: that is the engine's timeout, not a
# finding, so such a target is run again, up to three times in all; a real
# failure (a failing input written to testdata) fails at once.
set -euo pipefail
GO=${GO:-go}
FUZZTIME=${FUZZTIME:-10s}
log=$(mktemp)
trap 'rm -f "$log"' EXIT
for pkg in "$@"; do
  for t in $($GO test -list '^Fuzz' "$pkg" | grep '^Fuzz'); do
    echo "fuzz $pkg $t ($FUZZTIME)"
    for try in 1 2 3; do
      if $GO test -run '^$' -fuzz "^$t\$" -fuzztime "$FUZZTIME" "$pkg" >"$log" 2>&1; then
        break
      fi
      if [ "$try" != 3 ] && grep -q 'context deadline exceeded' "$log" && ! grep -q 'Failing input written' "$log"; then
        echo "fuzz $pkg $t: the engine timed out stopping its workers (no failing input); once more"
        continue
      fi
      cat "$log"
      exit 1
    done
  done
done
echo "fuzz: all targets ran $FUZZTIME without a failure"
