#!/usr/bin/env bash
# The third device run of session 11, as one command on the H200:
#   tests/data/record_session11c.sh OUT
# GPT small recorded by the recorder that times its optimizer's steps (11b's GPT record failed
# on a wrong script name), then its TF32 and fused-AdamW pairs timed unprofiled on the same host
# in alternating processes (TF32 read 1.28x of its gain from the record-timed traces).
# Needs brrr-trace's dependency msgspec as a wheel in .whl/ (the device reaches no index).
set -uo pipefail
out="$(realpath "$1")"
export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
  --target /tmp/site .whl/*.whl
export PYTHONPATH="$(pwd):/tmp/site"
traces=/tmp/session11c
mkdir -p "$traces"
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader
lscpu | grep -E "Model name" || true
cd tests/data/realcode
timeout 90 python3 -m brrr_trace record -o "$traces/gpt_small.record.json.gz" --wait 20 --steps 10 \
  -- gpt.py --size small --device cuda --steps 36 > "$traces/gpt_small.log" 2>&1 \
  || echo "failed: gpt_small record"
tail -n 1 "$traces/gpt_small.log"
timeout 330 python3 time_pairs.py --out "$traces/pairs.json" --only gpt_small \
  --fixes tf32,fused-adamw --rounds 3 --budget-s 290 --timeout 60 2> "$traces/pairs.err" | tail -n 4
tar czf "$out/session11c_traces.tgz" --exclude=work-pairs -C "$traces" .
ls -la "$out"
