#!/usr/bin/env bash
# The fourth device run of session 11, as one command on the H200:
#   tests/data/record_session11d.sh OUT
# GPT small's TF32 gain, timed in one process (time_ab.py --matmul-precision: regions with TF32
# off and on, alternating, 15 rounds of 50 steps, in two processes), after recording the
# program on the same host (its timing processes of 11c ran further apart than TF32 gains).
# Needs brrr-trace's dependency msgspec as a wheel in .whl/ (the device reaches no index).
set -uo pipefail
out="$(realpath "$1")"
export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
  --target /tmp/site .whl/*.whl
export PYTHONPATH="$(pwd):/tmp/site"
traces=/tmp/session11d
mkdir -p "$traces"
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader
lscpu | grep -E "Model name" || true
cd tests/data/realcode
timeout 90 python3 -m brrr_trace record -o "$traces/gpt_small.record.json.gz" --wait 20 --steps 10 \
  -- gpt.py --size small --device cuda --steps 36 > "$traces/gpt_small.log" 2>&1 \
  || echo "failed: gpt_small record"
tail -n 1 "$traces/gpt_small.log"
for run in 1 2; do
  timeout 90 python3 time_ab.py gpt --size small --matmul-precision highest high --warmup 20 \
    --region-steps 50 --rounds 15 2>/dev/null | grep '^BENCH' > "$traces/gpt_tf32.ab$run.txt" \
    || echo "failed: time_ab $run"
  wc -c "$traces/gpt_tf32.ab$run.txt"
done
tar czf "$out/session11d_traces.tgz" -C "$traces" .
ls -la "$out"
