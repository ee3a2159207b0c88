#!/bin/bash
# tracekit calibrate on the H200, in one device call (run from the repo root; OUT = where results go).
# Usage: OUT=/some/dir bash captures/h200/calibrate/run.sh
# Writes $OUT/h200-calibrated.toml (the spec), $OUT/h200-calibrated.json (every figure, how it was
# measured, the comparison with the builtin h200 spec) and $OUT/calibrate_log.txt (everything printed).
# Uses the working tree's tracekit (it travels with the call; python3 -m puts the repo root first on
# sys.path) and orjson from .device/wheels when python3 lacks it. Installs nothing else.
export PYTHONUNBUFFERED=1
: "${OUT:?set OUT to the folder for the results}"
mkdir -p "$OUT"
python3 -c "import orjson" 2>/dev/null || { python3 -m pip install -q --no-index --no-deps --no-compile \
  --target /tmp/site .device/wheels/*.whl && export PYTHONPATH=/tmp/site; }
{
echo "=== $(date -u +%FT%TZ) before"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem,clocks.max.sm,power.limit,power.draw,temperature.gpu --format=csv
python3 -c "import sys, torch; print('python', sys.version.split()[0], 'torch', torch.__version__, 'cuda', torch.version.cuda)"
echo "=== calibrate --device cuda"
t0=$(date +%s.%N)
timeout -s TERM -k 20 300 python3 -m tracekit calibrate --device cuda -o "$OUT/h200-calibrated.toml" \
  --id h200-calibrated --format json > "$OUT/h200-calibrated.json"
echo "=== calibrate exit $? wall $(python3 -c "print(round($(date +%s.%N) - $t0, 1))") s"
echo "=== $(date -u +%FT%TZ) after"
nvidia-smi --query-gpu=clocks.sm,clocks.mem,power.draw,temperature.gpu,clocks_event_reasons.active --format=csv
echo "=== the spec loads through --spec (explain of a committed H200 trace)"
python3 -m tracekit explain captures/h200/seed_eager_b128.json.gz --spec "$OUT/h200-calibrated.toml" 2>&1 | head -12
} 2>&1 | tee "$OUT/calibrate_log.txt"
