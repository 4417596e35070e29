#!/usr/bin/env bash
# The device run of session 6, as one command on the H200:
#   tests/data/record_session6.sh OUT
# The nine small before/after pairs timed again, set-up cancelled and the sides interleaved
# (time_small_pairs.py), and the CNN's logging .item() fix timed inside one process
# (realcode/time_ab.py), since its processes differ by more than the fix gains.
set -uo pipefail
out="$(realpath "$1")"
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader
echo "cores: $(nproc); torch threads: $(python3 -c 'import torch; print(torch.get_num_threads())')"
(cd tests/data/realcode && timeout 150 python3 time_ab.py cnn --log-every 1 50 --rounds 8 \
  > "$out/cnn_item_ab.txt" 2> "$out/cnn_item_ab.err"; tail -c 600 "$out/cnn_item_ab.txt")
timeout 400 python3 tests/data/time_small_pairs.py --out "$out/small_pairs.json" --rounds 2 \
  --budget-s 330 2>&1 | tail -14
ls -la "$out"
