#!/usr/bin/env bash
# The second device run of session 6: why removing the CNN's per-step .item() gains more than
# the GPU's time in its trace. The A/B of time_ab.py again, with the GPU's SM clock sampled
# every 50 ms beside it, and once with the batches made by 4 worker processes.
#   tests/data/record_session6b.sh OUT
set -uo pipefail
out="$(realpath "$1")"
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=timestamp,clocks.sm,utilization.gpu,power.draw --format=csv,nounits \
  -lms 50 > "$out/clocks.csv" &
sampler=$!
cd tests/data/realcode
timeout 150 python3 time_ab.py cnn --log-every 1 50 --rounds 8 > "$out/cnn_item_ab.txt" 2>/dev/null
timeout 150 python3 time_ab.py cnn --log-every 1 50 --rounds 8 --workers 4 --pin-memory \
  > "$out/cnn_item_ab_workers.txt" 2>/dev/null
kill "$sampler"
python3 - "$out" <<'PY'
import csv, json, statistics, sys
from datetime import datetime
out = sys.argv[1]
rows = []
for r in csv.reader(open(f"{out}/clocks.csv")):
    try:
        t = datetime.strptime(r[0].strip(), "%Y/%m/%d %H:%M:%S.%f").timestamp()
        rows.append((t, float(r[1]), float(r[2])))
    except (ValueError, IndexError):
        pass
for name in ("cnn_item_ab", "cnn_item_ab_workers"):
    line = [l for l in open(f"{out}/{name}.txt") if l.startswith("BENCH ")][-1]
    bench = json.loads(line[6:])
    for side, per in bench["seconds_per_step"].items():
        clocks = [c for side2, a, b in bench["regions"] if side2 == side for t, c, u in rows if a <= t <= b]
        util = [u for side2, a, b in bench["regions"] if side2 == side for t, c, u in rows if a <= t <= b]
        print(name, side, "ms/step", [round(x * 1e3, 1) for x in per],
              "median SM MHz", statistics.median(clocks) if clocks else None,
              "util %", statistics.median(util) if util else None, "samples", len(clocks))
PY
