#!/bin/bash
# tracekit measure on the H200, every job in one device call (run from the repo root; OUT = where results go).
# Usage: OUT=/some/dir bash captures/h200/measure/run_measure.sh [JOB ...]   (no JOB: all, in the order below)
# Uses the tracekit copy in .device/tk-measure (git archive HEAD tracekit pyproject.toml), run from the models
# folder so that `python3 -m tracekit` cannot pick up the working-tree tracekit/.
export PYTHONUNBUFFERED=1
R=/tmp/tk_measure
rm -rf $R && mkdir -p $R
T0=$(date +%s)
export PYTHONPATH=$PWD/.device/tk-measure${PYTHONPATH:+:$PYTHONPATH}
cd captures/h200/models
TK="python3 -m tracekit measure"
now() { date +%s.%N; }
left() { echo $(( ${BUDGET:-400} - ($(date +%s) - T0) )); }
# floor of an eager run's JSON, passed to its compiled twin (same computation; a capture made after the
# compiled twin's CUDA graphs were recorded cannot map its replayed kernels onto ops, so explain costs none)
floor_of() { python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['floor']['us'])" $1 2>/dev/null; }
floor_opt() { local f=$(floor_of $1); [ -n "$f" ] && [ "$f" != None ] && echo "--floor-us $f"; }
job() {   # job NAME BUDGET_S CMD...: CMD under `timeout -s TERM BUDGET` if BUDGET fits in the time left
  local name=$1 budget=$2; shift 2
  if [ "$(left)" -lt "$budget" ]; then echo "=== SKIP $name (budget $budget s, $(left) s left)"; return; fi
  echo "=== $name: $*"
  local t0=$(now)
  timeout -s TERM -k 20 $budget "$@" 2>&1 | grep -v '^USDT:'; local rc=${PIPESTATUS[0]}
  echo "=== $name exit $rc wall $(python3 -c "print(round($(now) - $t0, 2))") s"
}
{
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem,clocks.max.sm,power.limit,power.draw,temperature.gpu --format=csv
python3 -c "import sys, torch, triton; print('python', sys.version.split()[0], 'torch', torch.__version__, 'cuda', torch.version.cuda, 'triton', triton.__version__)"
python3 -c "import pynvml, typer, pandas, orjson; print('nvidia-ml-py', getattr(pynvml, '__version__', '?'), 'typer', typer.__version__, 'pandas', pandas.__version__)"
python3 -c "import tracekit; print('tracekit from', tracekit.__file__)"
JOBS=${*:-llama_eager gpt_eager seed_eager_b1 seed_eager_b128 llama_ro seed_compile_b128 gpt_compile}
for j in $JOBS; do case $j in
  llama_eager) job $j 90 $TK llama_decode.py --step-fn llama_decode:decode_step --tokens-per-step 1 \
      -o $R/llama_decode_eager.json --keep-trace $R/llama_decode_eager.trace -- --iters 3 ;;
  gpt_eager) job $j 90 $TK gpt_train.py --step-fn gpt_train:train_step --tokens-per-step 8192 \
      -o $R/gpt_train_eager.json --keep-trace $R/gpt_train_eager.trace -- --iters 3 ;;
  seed_eager_b1) job $j 60 $TK ../measure/seed_step.py --step-fn seed_step:step -o $R/seed_eager_b1.json -- --batch 1 ;;
  seed_eager_b128) job $j 60 $TK ../measure/seed_step.py --step-fn seed_step:step -o $R/seed_eager_b128.json -- --batch 128 ;;
  seed_compile_b128) job $j 90 $TK ../measure/seed_step.py --step-fn seed_step:step -o $R/seed_compile_b128.json $(floor_opt $R/seed_eager_b128.json) \
      -- --batch 128 --compile default ;;
  llama_ro) job $j 120 $TK llama_decode.py --step-fn llama_decode:decode_step --tokens-per-step 1 \
      -o $R/llama_decode_reduce_overhead.json $(floor_opt $R/llama_decode_eager.json) -- --iters 3 --compile reduce-overhead ;;
  gpt_compile) job $j 100 $TK gpt_train.py --step-fn gpt_train:train_step --tokens-per-step 8192 \
      -o $R/gpt_train_compile.json $(floor_opt $R/gpt_train_eager.json) -- --iters 3 --compile ;;
esac; done
nvidia-smi --query-gpu=clocks.sm,clocks.mem,power.draw,temperature.gpu --format=csv
echo "=== sizes"; du -a $R | sort -k2
for f in $R/*.md; do echo; cat $f; done
tar czf $OUT/measure.tgz -C $R .
echo "total $(( $(date +%s) - T0 )) s"
} 2>&1 | tee $OUT/log.txt
