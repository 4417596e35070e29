#!/usr/bin/env bash
# The second device run of session 8, as one command on the H200:
#   tests/data/record_session8b.sh OUT
# `brrr-trace record --wait 20 --steps 10` of the CNN and the ViT from a library, then their
# pairs timed unprofiled on the same host (time_pairs.py), and the CNN's step split by phase
# with and without its per-step .item() (cnn_phases.py, shorter regions in alternating order).
# Needs brrr-trace's dependency msgspec as a wheel in .whl/ (the device reaches no index).
set -uo pipefail
out="$(realpath "$1")"
export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
  --target /tmp/site .whl/*.whl
export PYTHONPATH="$(pwd):/tmp/site"
traces=/tmp/session8b
mkdir -p "$traces"
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader
lscpu | grep -E "Model name" || true
cd tests/data/realcode
lib="$(python3 -c 'import record_real, pathlib; print(record_real.install_library(pathlib.Path("/tmp/s8b-lib")))')"
while read -r name script args; do
  PYTHONPATH="$lib:$PYTHONPATH" timeout 120 python3 -m brrr_trace record \
    -o "$traces/$name.record.json.gz" --wait 20 --steps 10 \
    -- "$script" --device cuda --steps 36 $args > "$traces/$name.log" 2>&1 || echo "failed: $name"
  tail -n 2 "$traces/$name.log"
done <<'LIST'
cnn cnn.py
use_library use_library.py
LIST
timeout 70 python3 cnn_phases.py --rounds 12 --region-steps 25 > "$traces/cnn_phases.txt" \
  2>/dev/null || echo "cnn_phases failed"
tar czf "$out/session8b_traces.tgz" -C "$traces" .
timeout 280 python3 time_pairs.py --out "$out/pairs_session8b.json" --rounds 3 \
  --only cnn,use_library --budget-s 230 2>&1 | tail -8
ls -la "$out"
