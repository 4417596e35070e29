#!/usr/bin/env bash
# The device run of session 5, as one command on the H200:
#   tests/data/record_session5.sh OUT
# Every before/after pair timed with its two sides interleaved (time_pairs.py), and the
# record-timed traces again with 20 unprofiled wait steps (the steady state, not the start-up).
set -uo pipefail
out="$(realpath "$1")"; work="$(mktemp -d)"
export PYTHONUNBUFFERED=1
# first call: all pairs (3 rounds asked, 2 fitted for gpt_small and 1 for the others); second
# call: two more rounds of the others (SECOND=1)
if [ -z "${SECOND:-}" ]; then
  (cd tests/data/realcode && timeout 380 python time_pairs.py --out "$out/pairs.json" --rounds 3 --budget-s 320) 2>&1 | tail -12
else
  (cd tests/data/realcode && timeout 300 python time_pairs.py --out "$out/pairs-2.json" --rounds 2 --budget-s 240 --only cnn,use_library,tiny_mlp) 2>&1 | tail -12
fi
WAIT=20 timeout 190 tests/data/realcode/record_timed.sh "$work/record-timed" 2>&1 | tail -10
tar -C "$work" -czf "$out/record-timed.tgz" record-timed
ls -la "$out"
