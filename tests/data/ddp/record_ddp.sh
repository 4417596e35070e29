#!/usr/bin/env bash
# Record the two-rank DDP traces of this folder on one machine (run on the H200 device):
#   tests/data/ddp/record_ddp.sh OUT_DIR
# Two processes share the one GPU, so the backend is gloo (NCCL refuses two ranks on one device).
# Runs: balanced; rank 1 late by 15 ms a step; rank 0 late by 8 ms a step.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
out="$1"
mkdir -p "$out"
for run in balanced:1:0 rank1-late-15ms:1:15 rank0-late-8ms:0:8; do
  IFS=: read -r name late_rank late_ms <<< "$run"
  python -m torch.distributed.run --standalone --nproc_per_node 2 "$here/ddp_train.py" \
    --trace-dir "$out/$name" --late-rank "$late_rank" --late-ms "$late_ms" \
    > "$out/$name.log" 2>&1 || { echo "ddp $name failed"; tail -20 "$out/$name.log"; }
done
