#!/usr/bin/env bash
# The device run of session 9, as one command on the H200:
#   tests/data/record_session9.sh OUT
# Does removing a logging .item() gain what host-sync now estimates? Four real-code programs
# log their loss with .item() every 10 steps (the ViT from a library, GPT small, the LSTM, the
# AMP transformer). On one host: `brrr-trace record --wait 20 --steps 10` of each (a window of
# 10 steps holds one logging step), then time_ab.py, which switches log_every between 10 and
# 100000 region by region in one warmed-up process.
# Needs brrr-trace's dependency msgspec as a wheel in .whl/ (the device reaches no index).
set -uo pipefail
out="$(realpath "$1")"
export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
  --target /tmp/site .whl/*.whl
export PYTHONPATH="$(pwd):/tmp/site"
traces=/tmp/session9
mkdir -p "$traces"
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader
lscpu | grep -E "Model name" || true
cd tests/data/realcode
lib="$(python3 -c 'import record_real, pathlib; print(record_real.install_library(pathlib.Path("/tmp/s9-lib")))')"
export PYTHONPATH="$lib:$PYTHONPATH"
programs="use_library gpt rnn amp_transformer"
for name in $programs; do
  extra=(); [ "$name" = gpt ] && extra=(--size small)
  timeout 75 python3 -m brrr_trace record -o "$traces/$name.record.json.gz" --wait 20 --steps 10 \
    -- "$name.py" --device cuda --steps 36 "${extra[@]}" > "$traces/$name.log" 2>&1 \
    || echo "failed: $name record"
  tail -n 1 "$traces/$name.log"
done
for name in $programs; do
  extra=(); [ "$name" = gpt ] && extra=(--size small)
  timeout 60 python3 time_ab.py "$name" --log-every 10 100000 --warmup 20 --region-steps 50 \
    --rounds 10 "${extra[@]}" 2>/dev/null | grep '^BENCH' > "$traces/$name.ab.txt" \
    || echo "failed: $name time_ab"
  wc -c "$traces/$name.ab.txt"
done
tar czf "$out/session9_traces.tgz" -C "$traces" .
ls -la "$out"
