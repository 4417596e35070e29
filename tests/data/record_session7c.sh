#!/usr/bin/env bash
# The third device run of session 7, as one command on the H200:
#   tests/data/record_session7c.sh OUT
# `brrr-trace record` of GPT small and the tiny MLP (20 unprofiled wait steps, then 10 recorded),
# and their pairs timed unprofiled in the same call: the calibrated estimates against the gains
# on their own host. Needs brrr-trace's dependency msgspec as a wheel in .whl/ (the device
# machine reaches no index).
set -uo pipefail
out="$(realpath "$1")"
export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
  --target /tmp/site .whl/*.whl
export PYTHONPATH="$(pwd):/tmp/site"
traces=/tmp/session7c
mkdir -p "$traces"
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader
lscpu | grep -E "Model name" || true
cd tests/data/realcode
while read -r name script args; do
  timeout 150 python3 -m brrr_trace record -o "$traces/$name.record.json.gz" --wait 20 --steps 10 \
    -- "$script" --device cuda --steps 36 $args > "$traces/$name.log" 2>&1 || echo "failed: $name"
  tail -n 2 "$traces/$name.log"
done <<'LIST'
gpt_small gpt.py --size small
tiny_mlp tiny_mlp.py
LIST
tar czf "$out/session7c_traces.tgz" -C "$traces" .
timeout 330 python3 time_pairs.py --out "$out/pairs_session7c.json" --rounds 2 \
  --only gpt_small,tiny_mlp --budget-s 250 2>&1 | tail -8
ls -la "$out"
