#!/usr/bin/env bash
# Each real-code program profiled as usual (shapes + stacks) while line_samples.py samples which
# of its lines is running, every 100 µs: the independent check of idle ownership
# (benchmarks/idle_samples.py). Run on the H200 from the repository root:
#   tests/data/realcode/record_samples.sh OUT_DIR
set -uo pipefail
out="$(realpath "$1")"; mkdir -p "$out"
cd "$(dirname "$0")"
site="$(python -c 'import record_real, pathlib; print(record_real.install_library(pathlib.Path("'"$out"'/../work-samples")))')"
export PYTHONPATH="$(realpath ../../..):$site:${PYTHONPATH:-}" PYTHONUNBUFFERED=1
while read -r name script args; do
  timeout 120 python line_samples.py "$out/$name.samples.json" --interval-us 100 -- \
    "$script" --device cuda --steps 8 $args --profile "$out/$name.json" > "$out/$name.log" 2>&1 \
    || { echo "$name failed"; tail -5 "$out/$name.log"; }
  gzip -9 "$out/$name.json" "$out/$name.samples.json"
done <<'LIST'
gpt_small gpt.py --size small
cnn cnn.py
rnn rnn.py
amp_transformer amp_transformer.py
hooks hooks.py
use_library use_library.py
tiny_mlp tiny_mlp.py
gpt_medium gpt.py --size medium
LIST
