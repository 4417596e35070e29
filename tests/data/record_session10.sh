#!/usr/bin/env bash
# The device run of session 10, as one command on the H200:
#   tests/data/record_session10.sh OUT
# Does AdamW(fused=True) under a GradScaler gain what brrr-trace estimates? The AMP transformer
# (fp16 autocast, GradScaler, clipping) waits in `scaler.step` every step: a GradScaler reads
# found_inf on the host unless the optimizer is fused, which takes it on the GPU. On one host:
# `brrr-trace record --wait 20 --steps 10` of the AMP transformer with and without --fused and
# of the LSTM, then time_pairs.py for the AMP transformer's fused AdamW and the LSTM's fused Adam
# and TF32 (alternating processes), then time_ab.py for the LSTM's logging .item() with three
# times the rounds of session 9 (its paired regions spread from -0.17 to 1.76 ms a step).
# Needs brrr-trace's dependency msgspec as a wheel in .whl/ (the device reaches no index).
set -uo pipefail
out="$(realpath "$1")"
export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
  --target /tmp/site .whl/*.whl
export PYTHONPATH="$(pwd):/tmp/site"
traces=/tmp/session10
mkdir -p "$traces"
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader
lscpu | grep -E "Model name" || true
cd tests/data/realcode
record() {  # name, output stem, flags...
  local name="$1" stem="$2"; shift 2
  timeout 90 python3 -m brrr_trace record -o "$traces/$stem.record.json.gz" --wait 20 --steps 10 \
    -- "$name.py" --device cuda --steps 36 "$@" > "$traces/$stem.log" 2>&1 \
    || echo "failed: $stem record"
  tail -n 1 "$traces/$stem.log"
}
record amp_transformer amp_transformer
record amp_transformer amp_transformer.after-fused-adamw --fused
record rnn rnn
timeout 330 python3 time_pairs.py --out "$traces/pairs.json" --only amp_transformer,rnn \
  --rounds 4 --budget-s 280 --timeout 60 2> "$traces/pairs.err" | tail -n 5
timeout 70 python3 time_ab.py rnn --log-every 10 100000 --warmup 20 --region-steps 50 \
  --rounds 30 2>/dev/null | grep '^BENCH' > "$traces/rnn.ab.txt" || echo "failed: rnn time_ab"
wc -c "$traces/rnn.ab.txt"
tar czf "$out/session10_traces.tgz" --exclude=work-pairs -C "$traces" .
ls -la "$out"
