#!/usr/bin/env bash
# The third device run of session 8, as one command on the H200:
#   tests/data/record_session8c.sh OUT
# 1. The two small pairs whose estimates are 2-2.6x their gain on one host (host-sync,
#    unfused-optimizer), timed per step unprofiled, under the profiler with shapes, and with
#    shapes and stacks (time_small_pairs.py --profiled): what the profiler adds to their steps.
# 2. The hooks and AMP programs, whose `brrr-trace record` traces needed the profiler-cost
#    model scaled past its bound of 4: a plain --profile trace, a record trace, and a record
#    trace without the line mode (--no-exact-ops), 2 steps each, on one host.
# Needs brrr-trace's dependency msgspec as a wheel in .whl/ (the device reaches no index).
set -uo pipefail
out="$(realpath "$1")"
export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
  --target /tmp/site .whl/*.whl
export PYTHONPATH="$(pwd):/tmp/site"
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader
cd tests/data
for mode in none shapes stack; do
  flag=(); [ "$mode" != none ] && flag=(--profiled "$mode")
  timeout 100 python3 time_small_pairs.py --out "$out/small_profiled_$mode.json" --rounds 1 \
    --only host-sync,unfused-optimizer --budget-s 80 "${flag[@]}" 2>&1 | tail -2
done
cd realcode
traces=/tmp/session8c
mkdir -p "$traces"
for name in hooks amp_transformer; do
  timeout 60 python3 "$name.py" --device cuda --steps 10 --profile "$traces/$name.json.gz" \
    > "$traces/$name.log" 2>&1 || echo "failed: $name plain"
  timeout 90 python3 -m brrr_trace record -o "$traces/$name.record.json.gz" --wait 7 --steps 2 \
    -- "$name.py" --device cuda --steps 10 >> "$traces/$name.log" 2>&1 || echo "failed: $name record"
  timeout 90 python3 -m brrr_trace record -o "$traces/$name.noexact.json.gz" --wait 7 --steps 2 \
    --no-exact-ops -- "$name.py" --device cuda --steps 10 >> "$traces/$name.log" 2>&1 \
    || echo "failed: $name noexact"
done
tar czf "$out/session8c_traces.tgz" -C "$traces" .
ls -la "$out"
