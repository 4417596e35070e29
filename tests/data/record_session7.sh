#!/usr/bin/env bash
# The device run of session 7, as one command on the H200:
#   tests/data/record_session7.sh OUT
# Is the profiler's cost a property of the program, or of the process that recorded it? The
# same programs profiled for 10 steps instead of 2, and GPT small (and its TF32 fix) profiled
# for 2 steps in three processes each; then the GPT small and tiny MLP pairs timed again
# unprofiled in the same call, so that each trace has a measured step beside it.
set -uo pipefail
out="$(realpath "$1")"
export PYTHONUNBUFFERED=1
traces=/tmp/session7
mkdir -p "$traces"
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader
cd tests/data/realcode
record() {  # NAME SCRIPT FLAGS...
  local name=$1 script=$2
  shift 2
  timeout 120 python3 "$script" --device cuda "$@" --profile "$traces/$name.json.gz" \
    > /dev/null 2> "$traces/$name.err" || echo "failed: $name"
  tail -n 1 "$traces/$name.err"
}
for spec in "gpt_small gpt.py --size small" \
            "gpt_small.after-tf32 gpt.py --size small --tf32" \
            "gpt_small.after-fused-adamw gpt.py --size small --fused" \
            "gpt_small.after-sdpa gpt.py --size small --sdpa" \
            "tiny_mlp tiny_mlp.py" \
            "tiny_mlp.after-cuda-graphs tiny_mlp.py --graphs" \
            "cnn cnn.py" \
            "cnn.after-dataloader-workers cnn.py --workers 4 --pin-memory"; do
  set -- $spec
  name=$1; shift
  record "$name.steps10" "$@" --steps 12 --profile-active 10
done
for i in 1 2 3; do
  record "gpt_small.p$i" gpt.py --size small --steps 8
  record "gpt_small.after-tf32.p$i" gpt.py --size small --tf32 --steps 8
done
tar czf "$out/session7_traces.tgz" -C "$traces" .
timeout 300 python3 time_pairs.py --out "$out/pairs_session7.json" --rounds 2 \
  --only gpt_small,tiny_mlp --budget-s 240 2>&1 | tail -12
ls -la "$out"
