#!/usr/bin/env bash
# The second device run of session 11, as one command on the H200:
#   tests/data/record_session11b.sh OUT
# `brrr-trace record` now also times each optimizer.step() of the later wait steps unprofiled
# (brrr_record.unprofiled_optimizer_step_ns), and the analysis calibrates the profiler's cost
# inside the optimizer's steps on that. On one host: the three fused-optimizer pairs recorded
# with it and timed unprofiled: the small per-parameter Adam (record_small.py,
# time_small_pairs.py), GPT small's AdamW and the AMP transformer's AdamW under a GradScaler
# (record --wait 20 --steps 10, time_pairs.py --fixes fused-adamw, alternating processes).
# Needs brrr-trace's dependency msgspec as a wheel in .whl/ (the device reaches no index).
set -uo pipefail
out="$(realpath "$1")"
export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
  --target /tmp/site .whl/*.whl
export PYTHONPATH="$(pwd):/tmp/site"
traces=/tmp/session11b
mkdir -p "$traces"
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader
lscpu | grep -E "Model name" || true
cd tests/data
timeout 90 python3 record_small.py optimizer_foreach_false "$traces/optimizer_foreach_false.record.json.gz" \
  > "$traces/optimizer_foreach_false.log" 2>&1 || echo "failed: small record"
tail -n 1 "$traces/optimizer_foreach_false.log"
timeout 150 python3 time_small_pairs.py --out "$traces/small_pairs.json" --rounds 3 \
  --only unfused-optimizer --budget-s 120 2>&1 | tail -2
cd realcode
# (The run of 14:42 UTC named the first program gpt_small.py, which does not exist: no GPT
# small record trace came of it.)
for program in "gpt_small gpt.py --size small" "amp_transformer amp_transformer.py"; do
  read -r name script extra <<< "$program"
  # shellcheck disable=SC2086
  timeout 90 python3 -m brrr_trace record -o "$traces/$name.record.json.gz" --wait 20 --steps 10 \
    -- "$script" $extra --device cuda --steps 36 > "$traces/$name.log" 2>&1 \
    || echo "failed: $name record"
  tail -n 1 "$traces/$name.log"
done
timeout 300 python3 time_pairs.py --out "$traces/pairs.json" --only gpt_small,amp_transformer \
  --fixes fused-adamw --rounds 3 --budget-s 260 --timeout 60 2> "$traces/pairs.err" | tail -n 4
tar czf "$out/session11b_traces.tgz" --exclude=work-pairs -C "$traces" .
ls -la "$out"
