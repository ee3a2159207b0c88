#!/bin/bash
# The serving (issue 22) and module-tree (issue 23) captures on one H200, in one device call.
# Usage (repo root of the device copy): OUT=/some/dir bash <scripts>/serving/run_h200.sh
#   <scripts> holds serving/ and modules/ (this folder and its sibling); TK_DIR = a frozen tracekit copy
#   (git archive of the commit named in README.md), WHEELS = msgspec/orjson cp312 wheels.
#   PARTS: which of 'serving modules' to run (both by default).
#   SERVE_ARGS, MODULE_ARGS_gpt, MODULE_ARGS_llama: extra script arguments (the CPU check's tiny sizes).
# Results: $OUT/serving.tar, $OUT/modules.tar, $OUT/capture_log.txt, $OUT/nvidia-smi.txt.
export PYTHONUNBUFFERED=1
S=$(cd "$(dirname "$0")" && pwd)            # .../serving
M=$S/../modules
W=/tmp/tk_results
rm -rf $W && mkdir -p $W/serving $W/modules
T0=$(date +%s)
left() { echo $(( ${BUDGET_S:-450} - ($(date +%s) - T0) )); }
job() {
  local name=$1 budget=$2; shift 2
  if [ "$(left)" -lt "$budget" ]; then echo "=== SKIP $name (budget $budget s, $(left) s left)"; return; fi
  echo "=== $name: $*"
  local t0=$(date +%s.%N)
  timeout -s TERM -k 20 $budget "$@"; local rc=$?
  echo "=== $name exit $rc wall $(python3 -c "print(round($(date +%s.%N) - $t0, 2))") s"
}
{
nvidia-smi > $OUT/nvidia-smi.txt 2>&1
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem,power.draw --format=csv
uname -r
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site ${WHEELS:?}/*.whl 2>&1 | tail -2
export PYTHONPATH=${TK_DIR:?}:/tmp/site
python3 -c "import sys, torch, transformers; print('python', sys.version.split()[0], 'torch', torch.__version__, 'cuda', torch.version.cuda, 'cudnn', torch.backends.cudnn.version(), 'transformers', transformers.__version__, 'gpu', torch.cuda.get_device_name(0))"
cd $S        # run from the scripts' folder: the repo root's tracekit/ must not shadow the frozen copy
python3 -c "import tracekit, msgspec, orjson; print('tracekit from', tracekit.__file__, 'msgspec', msgspec.__version__, 'orjson', orjson.__version__)"
if [[ " ${PARTS:-serving modules} " == *" serving "* ]]; then
# A: the serving engine with its own profiler sessions (capture traces, steady-state window, mixed)
job serve 150 python3 serve_decode.py --out $W/serving $SERVE_ARGS
# A, item 4: the same engine under tracekit capture, no profiler of its own; the graphs are captured
# before the 45 warm-up iterations (4 decode, 1 prefill, 40 timed decode) (side sessions -> graph_capture_G.json.gz); 30 iterations
# recorded: the 20 of the window and the 10 of the mixed plan
job serve_tkcapture 150 python3 -m tracekit capture serve_decode.py -o $W/serving/serve_decode_tkcapture \
    --step-fn serve_decode:engine_iteration --warmup 45 --steps 30 -- --no-profile --out $W/serving/noprofile $SERVE_ARGS
fi
cd $M
if [[ " ${PARTS:-serving modules} " == *" modules "* ]]; then
# B: the user's own profiler, with_modules + with_stack; without the stack if the trace is over 3 MB
for model in gpt llama; do
  name=$([ $model = gpt ] && echo gpt_train || echo llama_decode)
  job modules_$model 120 python3 gpt_modules.py --model $model --out $W/modules/$name $(eval echo \$MODULE_ARGS_$model)
  size=$(stat -c %s $W/modules/$name/trace.json.gz 2>/dev/null || echo 0)
  echo "=== $name trace.json.gz $size B"
  if [ "$size" -gt 3000000 ]; then
    job modules_${model}_nostack 120 python3 gpt_modules.py --model $model --no-stack --out $W/modules/${name}_nostack $(eval echo \$MODULE_ARGS_$model)
  fi
done
fi
ls -laR $W
} 2>&1 | tee $OUT/capture_log.txt
tar -C $W -cf $OUT/serving.tar serving
tar -C $W -cf $OUT/modules.tar modules
ls -la $OUT
