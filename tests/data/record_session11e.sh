#!/usr/bin/env bash
# The fifth device run of session 11, as one command on the H200:
#   tests/data/record_session11e.sh OUT
# A launch's host time with the GPU busy and idle, unprofiled (launch_pace.py), in three
# processes, with 500 and with 2000 launches a round (the second fills more of the queue).
set -uo pipefail
out="$(realpath "$1")"
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader
lscpu | grep -E "Model name" || true
cd tests/data
for run in 1 2 3; do
  timeout 60 python3 launch_pace.py --launches 500 --rounds 20 | grep '^BENCH' >> "$out/launch_pace.txt"
done
timeout 60 python3 launch_pace.py --launches 2000 --rounds 10 | grep '^BENCH' >> "$out/launch_pace.txt"
python3 - "$out/launch_pace.txt" <<'PY'
import json, sys
for line in open(sys.argv[1]):
    r = json.loads(line[6:])
    print(r["launches"], "busy", round(r["busy_median_us"], 2), "idle", round(r["idle_median_us"], 2))
PY
