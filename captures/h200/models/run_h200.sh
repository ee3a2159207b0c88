#!/bin/bash
# Captures the model bundles on one H200 in one device call (run from the repo root; OUT = where results go).
# Usage: OUT=/some/dir bash captures/h200/models/run_h200.sh [JOB ...]   (no JOB: all, in the order below)
# Uses the frozen tracekit copy in .device/tk (git archive f4c278f tracekit pyproject.toml).
export PYTHONUNBUFFERED=1
M=captures/h200/models
B=/tmp/tk_models
rm -rf $B && mkdir -p $B
T0=$(date +%s)
python3 -c "import orjson" 2>/dev/null || { python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .device/wheels/*.whl && export PYTHONPATH=/tmp/site; }
export PYTHONPATH=$PWD/.device/tk${PYTHONPATH:+:$PYTHONPATH}
# run from the scripts folder: `python3 -m` puts the cwd first on sys.path, and the repo root holds the
# working-tree tracekit/, which would shadow the frozen copy
cd $M && M=.
TK="python3 -m tracekit capture"
now() { date +%s.%N; }
left() { echo $(( 520 - ($(date +%s) - T0) )); }
# job NAME BUDGET_S CMD...: runs CMD under `timeout -s TERM BUDGET` if BUDGET fits in the time left.
job() {
  local name=$1 budget=$2; shift 2
  if [ "$(left)" -lt "$budget" ]; then echo "=== SKIP $name (budget $budget s, $(left) s left)"; return; fi
  echo "=== $name: $*"
  local t0=$(now)
  timeout -s TERM -k 20 $budget "$@"; local rc=$?
  local t1=$(now)
  echo "=== $name exit $rc wall $(python3 -c "print(round($t1 - $t0, 2))") s"
}
{
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem --format=csv
uname -r
python3 -c "import sys, torch, triton, torchvision; print('python', sys.version.split()[0], 'torch', torch.__version__, 'cuda', torch.version.cuda, 'cudnn', torch.backends.cudnn.version(), 'triton', triton.__version__, 'torchvision', torchvision.__version__)"
python3 -c "import typer, rich, orjson, pandas, networkx; print('deps ok: typer', typer.__version__, 'orjson', orjson.__version__, 'pandas', pandas.__version__, 'networkx', networkx.__version__)"
ncu --version | tail -1
python3 -c "import tracekit; print('tracekit from', tracekit.__file__)"
JOBS=${*:-gpt_eager llama_eager resnet50 sdpa lowp_mm gpt_compile llama_ro ovh llama_ro_fromstart ncu}
for j in $JOBS; do case $j in
  gpt_eager)   job $j 90  $TK $M/gpt_train.py -o $B/gpt_train_eager --step-fn gpt_train:train_step --warmup 2 --steps 3 -- --iters 6 ;;
  gpt_compile) job $j 200 $TK $M/gpt_train.py -o $B/gpt_train_compile --step-fn gpt_train:train_step --warmup 2 --steps 3 -- --iters 6 --compile ;;
  llama_eager) job $j 90  $TK $M/llama_decode.py -o $B/llama_decode_eager --step-fn llama_decode:decode_step --warmup 2 --steps 3 -- --iters 6 ;;
  llama_ro)    job $j 150 $TK $M/llama_decode.py -o $B/llama_decode_reduce_overhead --step-fn llama_decode:decode_step --warmup 4 --steps 3 -- --iters 8 --compile reduce-overhead ;;
  llama_ro_fromstart) job $j 120 $TK $M/llama_decode.py -o $B/llama_decode_reduce_overhead_fromstart --step-fn llama_decode:decode_step --warmup 0 --steps 4 -- --iters 5 --compile reduce-overhead ;;
  resnet50)    job $j 90  $TK $M/resnet50_infer.py -o $B/resnet50_infer --warmup 2 --steps 3 -- --iters 6 ;;
  sdpa)        job $j 90  $TK $M/sdpa.py -o $B/sdpa_backends --step-fn sdpa:step --warmup 8 --steps 8 ;;
  lowp_mm)     job $j 60  $TK $M/lowp_mm.py -o $B/lowp_mm --step-fn lowp_mm:step --warmup 2 --steps 6 ;;
  ovh)
    job ovh_plain 60 python3 $M/gpt_train.py --iters 22
    job ovh_no_et 80 $TK $M/gpt_train.py -o $B/ovh_no_et --no-et --step-fn gpt_train:train_step --warmup 2 --steps 20 -- --iters 22
    job ovh_et    80 $TK $M/gpt_train.py -o $B/ovh_et --step-fn gpt_train:train_step --warmup 2 --steps 20 -- --iters 22
    ls -la $B/ovh_no_et $B/ovh_et; rm -rf $B/ovh_no_et $B/ovh_et ;;
  ovh_rep)   # ET overhead again, 3 interleaved repetitions each of gpt_train eager (22 calls, 20 recorded) and
             # 2 of llama_decode eager (52 calls, 50 recorded); bundles deleted after their sizes are listed
    for r in 1 2 3; do
      job ovh_plain_$r 60 python3 $M/gpt_train.py --iters 22
      job ovh_no_et_$r 80 $TK $M/gpt_train.py -q -o $B/ovh_no_et --no-et --step-fn gpt_train:train_step --warmup 2 --steps 20 -- --iters 22
      job ovh_et_$r 80 $TK $M/gpt_train.py -q -o $B/ovh_et --step-fn gpt_train:train_step --warmup 2 --steps 20 -- --iters 22
      ls -l $B/ovh_no_et/*.gz $B/ovh_et/*.gz; rm -rf $B/ovh_no_et $B/ovh_et
    done
    for r in 1 2; do
      job ovh_llama_plain_$r 60 python3 $M/llama_decode.py --iters 52
      job ovh_llama_no_et_$r 80 $TK $M/llama_decode.py -q -o $B/ovh_no_et --no-et --step-fn llama_decode:decode_step --warmup 2 --steps 50 -- --iters 52
      job ovh_llama_et_$r 80 $TK $M/llama_decode.py -q -o $B/ovh_et --step-fn llama_decode:decode_step --warmup 2 --steps 50 -- --iters 52
      ls -l $B/ovh_no_et/*.gz $B/ovh_et/*.gz; rm -rf $B/ovh_no_et $B/ovh_et
    done ;;
  ncu)
    job ncu 150 ncu --clock-control none --nvtx --nvtx-include "regex:decode_ncu.*/" \
      --metrics dram__bytes_read.sum,dram__bytes_write.sum,gpu__time_duration.sum --csv \
      python3 $M/llama_decode.py --iters 4 --nvtx-step 3 > $B/ncu_raw.txt 2>&1
    grep -v '^"' $B/ncu_raw.txt | tail -15; grep '^"' $B/ncu_raw.txt > $B/llama_decode_eager_ncu.csv
    echo "ncu csv lines: $(wc -l < $B/llama_decode_eager_ncu.csv)"; cp $B/llama_decode_eager_ncu.csv $OUT/ ;;
esac; done
echo "=== sizes"; du -a $B | sort -k2 | grep -v '/kernels/'
for b in $B/*/; do n=$(basename $b); et=$b/et.json.gz
  if [ -f $et ] && [ $(stat -c %s $et) -gt 10000000 ]; then echo "DROP $n/et.json.gz ($(stat -c %s $et) bytes > 10 MB)"; rm $et; fi
done
cd $B
tar czf $OUT/gpt.tgz gpt_train_* 2>/dev/null
tar czf $OUT/llama.tgz llama_decode_*/ 2>/dev/null
tar czf $OUT/other.tgz resnet50_infer sdpa_backends lowp_mm 2>/dev/null
ls -la $OUT
echo "total $(( $(date +%s) - T0 )) s"
} 2>&1 | tee $OUT/log.txt
