#!/usr/bin/env bash
# The first device run of session 12, as one command on the H200:
#   tests/data/record_session12.sh OUT [NAME...]   (NAME: gpt_tf32, cnn_item, cnn_workers; all)
# Three fixes of the real programs recorded and timed in the same process (time_ab.py --record):
# the estimate from the trace and the gain timed after it share one process's host pace, which
# differed between processes by more than these fixes gain (record_session11d.sh, cnn_phases.py).
# Two processes each: GPT small's TF32 (session 11's record_session11f.sh, not run then), the
# CNN's `.item()` each step against every 50, and the CNN's DataLoader 0 -> 4 workers (pinned).
# Needs brrr-trace's dependency msgspec as a wheel in .whl/ (the device reaches no index).
set -uo pipefail
out="$(realpath "$1")"
shift
names="${*:-gpt_tf32 cnn_item cnn_workers}"
export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
  --target /tmp/site .whl/*.whl
export PYTHONPATH="$(pwd):/tmp/site"
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader
lscpu | grep -E "Model name" || true
cd tests/data/realcode
ab() {  # name run timeout program [time_ab flags...]
  local name="$1" run="$2" limit="$3"
  shift 3
  timeout "$limit" python3 time_ab.py "$@" --record "$out/$name.p$run.record.json.gz" \
    2>"$out/$name.p$run.err" | grep '^BENCH' > "$out/$name.p$run.ab.txt" \
    || echo "failed: $name process $run"
  tail -n 2 "$out/$name.p$run.err"
  wc -c "$out/$name.p$run.ab.txt"
}
wanted() { [[ " $names " == *" $1 "* ]]; }
for run in 1 2; do
  wanted gpt_tf32 && ab gpt_tf32 "$run" 110 gpt --size small --matmul-precision highest high \
    --warmup 20 --region-steps 50 --rounds 12
  wanted cnn_item && ab cnn_item "$run" 110 cnn --log-every 1 50 --warmup 20 --region-steps 50 \
    --rounds 8
  wanted cnn_workers && ab cnn_workers "$run" 110 cnn --workers 0 4 --warmup 20 \
    --region-steps 100 --rounds 6
done
# The device hands back at most 8 files: one archive per fix.
cd "$out"
for name in $names; do
  tar cf "$name.tar" "$name".p* && rm -f "$name".p*
done
ls -la "$out"
