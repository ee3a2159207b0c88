#!/bin/bash
# Issue 24 items 5 and 6 on the H200, every job in one device call. Usage (from the repo root):
#   OUT=/some/dir TK_NEW=DIR TK_OLD=DIR [WHEELS=DIR] bash captures/h200/measure2/run.sh [JOB ...]
# WHEELS: orjson and msgspec wheels (pip download ... --python-version 3.12), installed into /tmp/site when
# python3 lacks them (the H100 machine did).
# TK_NEW / TK_OLD: folders holding a `tracekit/` (git archive of the fixed commit and of the commit before
# it, carried to the device under .device/); the jobs run from this folder, so the working-tree tracekit
# cannot shadow them. Each measure run is also told apart by its JSON's tracekit path in the log.
export PYTHONUNBUFFERED=1
HERE=$(cd "$(dirname "$0")" && pwd)
TK_NEW=$(cd "$TK_NEW" && pwd); TK_OLD=$(cd "$TK_OLD" && pwd)
SITE=
if [ -n "$WHEELS" ] && ! python3 -c "import orjson, msgspec" 2>/dev/null; then
  python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site "$WHEELS"/*.whl && SITE=:/tmp/site
fi
R=/tmp/tk_measure2
rm -rf $R && mkdir -p $R
T0=$(date +%s)
cd "$HERE"
now() { date +%s.%N; }
left() { echo $(( ${BUDGET:-450} - ($(date +%s) - T0) )); }
job() {   # job NAME BUDGET_S CMD...: CMD under `timeout` if BUDGET fits in the time left
  local name=$1 budget=$2; shift 2
  if [ "$(left)" -lt "$budget" ]; then echo "=== SKIP $name (budget $budget s, $(left) s left)"; return; fi
  echo "=== $name: $*"
  local t0=$(now)
  case $1 in                  # new/old ARGS: tracekit measure from TK_NEW/TK_OLD (timeout runs no function)
    new) set -- env PYTHONPATH=$TK_NEW$SITE python3 -m tracekit measure "${@:2}" ;;
    old) set -- env PYTHONPATH=$TK_OLD$SITE python3 -m tracekit measure "${@:2}" ;; esac
  timeout -s TERM -k 20 $budget "$@" 2>&1 | grep -v -e '^USDT:' -e 'Execution Trace Observer'; local rc=${PIPESTATUS[0]}
  echo "=== $name exit $rc wall $(python3 -c "print(round($(now) - $t0, 2))") s"
}
DEC="decode.py --step-fn decode:step --tokens-per-step 1"
TRN="train.py --step-fn train:step --tokens-per-step 8192 --profile-steps 3"
{
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem,clocks.max.sm,power.limit,power.draw,temperature.gpu --format=csv
python3 -c "import sys, torch, triton; print('python', sys.version.split()[0], 'torch', torch.__version__, 'cuda', torch.version.cuda, 'triton', triton.__version__)"
python3 -c "import pynvml, importlib.metadata as m; print('nvidia-ml-py', m.version('nvidia-ml-py'))"
PYTHONPATH=$TK_NEW python3 -c "import tracekit; print('new tracekit from', tracekit.__file__)"
PYTHONPATH=$TK_OLD python3 -c "import tracekit; print('old tracekit from', tracekit.__file__)"
echo "TEARDOWN_CUPTI=${TEARDOWN_CUPTI-unset}"
JOBS=${*:-decode_plain_a decode_new_1 decode_old_1 decode_new_2 decode_old_2 decode_new_3 decode_module_new decode_module_old
       train_plain_a train_new_1 train_old_1 train_new_2 train_plain_b decode_plain_b}
for j in $JOBS; do case $j in
  decode_plain_*) job $j 90 python3 decode.py --plain $R/$j.json ;;
  decode_new_*) job $j 60 new $DEC -o $R/$j.json ;;
  decode_old_*) job $j 60 old $DEC -o $R/$j.json ;;
  decode_module_new) job $j 60 new decode.py --tokens-per-step 1 -o $R/$j.json -- --module ;;
  decode_module_old) job $j 60 old decode.py --tokens-per-step 1 -o $R/$j.json -- --module ;;
  train_plain_*) job $j 60 python3 train.py --plain $R/$j.json ;;
  train_new_1) job $j 90 new $TRN -o $R/$j.json --keep-trace $R/$j.trace ;;
  train_new_*) job $j 90 new $TRN -o $R/$j.json ;;
  train_old_*) job $j 90 old $TRN -o $R/$j.json ;;
esac; done
nvidia-smi --query-gpu=clocks.sm,clocks.mem,power.draw,temperature.gpu --format=csv
echo "=== sizes"; du -a $R | sort -k2
tar czf $OUT/measure2.tgz -C $R .
echo "total $(( $(date +%s) - T0 )) s"
} 2>&1 | tee $OUT/log.txt
