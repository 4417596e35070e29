#!/usr/bin/env bash
# The first device run of session 8, as one command on the H200:
#   tests/data/record_session8.sh OUT
# 1. The "before" side of the nine small pairs profiled again, and the pairs timed unprofiled in
#    the same call (their traces and times so far came from different calls, perhaps hosts):
#    the two pairs furthest off (host-sync, unfused-optimizer) first, three processes a side.
# 2. Where the CNN's step time goes with and without its per-step .item() (cnn_phases.py), with
#    the batches made in the main process and by 4 workers.
set -uo pipefail
out="$(realpath "$1")"
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,driver_version --format=csv,noheader
lscpu | grep -E "Model name|^CPU\(s\)" || true
cd tests/data
before=fp32_matmul,elementwise_chain,item_in_loop,pageable_copy,dataloader_slow
before=$before,optimizer_foreach_false,manual_attention,cpu_tensor_each_step,misaligned_matmul
timeout 90 python3 record_fixtures.py --device cuda --scale full --out /tmp/s8 --only "$before" \
  --repeats 1 > /tmp/s8.log 2>&1 || echo "record_fixtures failed"
tail -n 3 /tmp/s8.log
tar czf "$out/session8_small.tgz" -C /tmp/s8 .
timeout 160 python3 time_small_pairs.py --out "$out/small_pairs_s8a.json" --rounds 3 \
  --only host-sync,unfused-optimizer --budget-s 110 2>&1 | tail -3
timeout 170 python3 time_small_pairs.py --out "$out/small_pairs_s8b.json" --rounds 2 \
  --only fp32-matmul,pageable-memcpy,dataloader-stall,manual-attention,cpu-to-device,misaligned-shape,unfused-elementwise \
  --budget-s 120 2>&1 | tail -8
cd realcode
timeout 55 python3 cnn_phases.py --rounds 6 > "$out/cnn_phases.txt" 2>/dev/null || echo "cnn_phases failed"
timeout 55 python3 cnn_phases.py --rounds 6 --workers 4 --pin-memory > "$out/cnn_phases_workers.txt" \
  2>/dev/null || echo "cnn_phases workers failed"
python3 - "$out" <<'PY'
import json, statistics, sys
for name in ("cnn_phases", "cnn_phases_workers"):
    try:
        line = [l for l in open(f"{sys.argv[1]}/{name}.txt") if l.startswith("BENCH ")][-1]
    except (OSError, IndexError):
        continue
    for side, per in json.loads(line[6:])["seconds_per_step"].items():
        print(name, side, {k: round(statistics.median(v) * 1e3, 2) for k, v in per.items()})
PY
ls -la "$out"
