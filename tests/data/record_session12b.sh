#!/usr/bin/env bash
# The third device run of session 12, as one command on the H200:
#   tests/data/record_session12b.sh OUT
# GPT small's TF32 recorded and timed in the same process again (three processes), now that
# the recorder also times each wait step's backward passes (brrr_record.unprofiled_backward_ns);
# and the AMP transformer and the tiny MLP recorded (`brrr-trace record --wait 20 --steps 10`)
# for the same timing of their backward.
# Needs brrr-trace's dependency msgspec as a wheel in .whl/ (the device reaches no index).
set -uo pipefail
out="$(realpath "$1")"
export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
  --target /tmp/site .whl/*.whl
export PYTHONPATH="$(pwd):/tmp/site"
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader
lscpu | grep -E "Model name" || true
work=/tmp/session12b
mkdir -p "$work"
cd tests/data/realcode
for run in 1 2 3; do
  timeout 110 python3 time_ab.py gpt --size small --matmul-precision highest high \
    --warmup 20 --region-steps 50 --rounds 12 --record "$work/gpt_tf32.p$run.record.json.gz" \
    2>"$work/gpt_tf32.p$run.err" | grep '^BENCH' > "$work/gpt_tf32.p$run.ab.txt" \
    || echo "failed: gpt_tf32 process $run"
  wc -c "$work/gpt_tf32.p$run.ab.txt"
done
for program in amp_transformer tiny_mlp; do
  timeout 110 python3 -m brrr_trace record -o "$work/$program.record.json.gz" --wait 20 \
    --steps 10 -- "$program.py" --device cuda --steps 36 > "$work/$program.log" 2>&1 \
    || echo "failed: $program record"
  tail -n 1 "$work/$program.log"
done
# The device hands back at most 8 files.
cd "$work"
tar cf "$out/gpt_tf32.tar" gpt_tf32.p*
tar cf "$out/recorded.tar" amp_transformer.* tiny_mlp.*
ls -la "$out"
