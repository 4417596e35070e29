#!/usr/bin/env bash
# The sixth device run of session 11, as one command on the H200:
#   tests/data/record_session11f.sh OUT
# GPT small recorded and its TF32 gain timed in the same process (time_ab.py --record): the
# estimate from the trace and the gain after it share one process's host pace, which differed
# between processes by more than TF32 gains (record_session11d.sh). Two processes.
# Needs brrr-trace's dependency msgspec as a wheel in .whl/ (the device reaches no index).
# Not run as such: record_session12.sh ran the same (its gpt_tf32 part) in session 12.
set -uo pipefail
out="$(realpath "$1")"
export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
  --target /tmp/site .whl/*.whl
export PYTHONPATH="$(pwd):/tmp/site"
cd tests/data/realcode
for run in 1 2; do
  timeout 100 python3 time_ab.py gpt --size small --matmul-precision highest high \
    --record "$out/gpt_small.p$run.record.json.gz" --warmup 20 --region-steps 50 --rounds 12 \
    2>/dev/null | grep '^BENCH' > "$out/gpt_tf32.p$run.ab.txt" || echo "failed: process $run"
  wc -c "$out/gpt_tf32.p$run.ab.txt"
done
ls -la "$out"
