#!/usr/bin/env bash
# The second device run of session 7, as one command on the H200:
#   tests/data/record_session7b.sh OUT
# GPT small and the tiny MLP profiled for 10 steps (GPT small in two processes), then their
# pairs timed unprofiled in the same call, three processes a side: the traces and the times
# come from one host, since the same fix gained 3.3 ms a step on one device call's host and
# 0.7-1.5 on another's.
set -uo pipefail
out="$(realpath "$1")"
export PYTHONUNBUFFERED=1
traces=/tmp/session7b
mkdir -p "$traces"
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader
lscpu | grep -E "Model name|^CPU\(s\)" || true
cd tests/data/realcode
record() {  # NAME SCRIPT FLAGS...
  local name=$1 script=$2
  shift 2
  timeout 120 python3 "$script" --device cuda "$@" --profile "$traces/$name.json.gz" \
    > /dev/null 2> "$traces/$name.err" || echo "failed: $name"
  tail -n 1 "$traces/$name.err"
}
record gpt_small.steps10 gpt.py --size small --steps 12 --profile-active 10
record gpt_small.steps10.p2 gpt.py --size small --steps 12 --profile-active 10
record tiny_mlp.steps10 tiny_mlp.py --steps 12 --profile-active 10
tar czf "$out/session7b_traces.tgz" -C "$traces" .
timeout 470 python3 time_pairs.py --out "$out/pairs_session7b.json" --rounds 3 \
  --only gpt_small,tiny_mlp --budget-s 400 2>&1 | tail -12
ls -la "$out"
