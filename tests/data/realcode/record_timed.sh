#!/usr/bin/env bash
# `brrr-trace record` of every real-code program with 7 unprofiled wait steps first, so that each
# trace carries the program's own step time (brrr_record.unprofiled_step_ns) to measure the
# profiler's cost against. Run on the H200 from the repository root:
#   tests/data/realcode/record_timed.sh OUT_DIR
set -uo pipefail
out="$(realpath "$1")"; mkdir -p "$out"
cd "$(dirname "$0")"
site="$(python -c 'import record_real, pathlib; print(record_real.install_library(pathlib.Path("'"$out"'/../work-timed")))')"
export PYTHONPATH="$(realpath ../../..):$site:${PYTHONPATH:-}" PYTHONUNBUFFERED=1
while read -r name script args; do
  timeout 120 python -m brrr_trace record -o "$out/$name.json.gz" --wait "${WAIT:-7}" --steps 2 -- \
    "$script" --device cuda --steps "$(( ${WAIT:-7} + 3 ))" $args > "$out/$name.log" 2>&1 || echo "$name failed"
  python -c "import gzip,json,sys; print(sys.argv[1], json.load(gzip.open(sys.argv[2]))['brrr_record'].get('unprofiled_step_ns'))" "$name" "$out/$name.json.gz"
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
