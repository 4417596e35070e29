#!/usr/bin/env bash
# The device run of 2026-12-01 (session 4), as one command on the H200:
#   tests/data/record_session4.sh OUT
# DDP traces, truth traces kept (slimmed) for the idle-ownership check, the profiler's cost per
# mode; packed in at most 8 files of <= 16 MiB, as the device tool returns them.
set -uo pipefail
out="$1"; work="$(mktemp -d)"
export PYTHONUNBUFFERED=1
tests/data/ddp/record_ddp.sh "$work/ddp"
tar -C "$work" -czf "$out/ddp.tgz" ddp
(cd tests/data/realcode && python record_real.py --out "$work/truth" --truth-only --budget-s 200 --timeout 120) 2>&1 | tail -3
for f in "$work"/truth/*.truth-trace.json.gz; do
  python tests/data/realcode/slim_trace.py "$f" "${f%.truth-trace.json.gz}.truth-slim.json.gz" && rm "$f"
done
ls -la "$work/truth"
t="$work/truth"
tar -C "$t" -czf "$out/truth-a.tgz" $(cd "$t" && ls gpt_small.* cnn.* tiny_mlp.* hooks.* rnn.* measurements.json)
tar -C "$t" -czf "$out/truth-b.tgz" $(cd "$t" && ls amp_transformer.* use_library.*)
tar -C "$t" -czf "$out/truth-c.tgz" $(cd "$t" && ls gpt_medium.*)
(cd tests/data/realcode && timeout 270 python profiler_modes.py --out "$out/profiler_modes.json" --rounds 1 --repeats 5) 2>&1 | tail -30
ls -la "$out"
