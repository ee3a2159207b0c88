#!/bin/bash
# Captures the models2 bundles on one H200 in one device call (run from the repo root; OUT = where results go).
# Usage: OUT=/some/dir bash captures/h200/models2/run_h200.sh [JOB ...]   (no JOB: all, in the order below)
# Uses the frozen tracekit copy in .device/tk-m2 (git archive of the commit named in README.md).
export PYTHONUNBUFFERED=1
B=$OUT/bundles
mkdir -p $B
T0=$(date +%s)
export TORCHINDUCTOR_CACHE_DIR=/tmp/inductor_models2     # one compile cache for the capture and the ncu run
python3 -m pip install -q --no-deps --root-user-action=ignore .device/wheels/*.whl 2>&1 | tail -1
export PYTHONPATH=$PWD/${TK_DIR:-.device/tk-m2}
cd captures/h200/models2        # the repo root's tracekit/ must not shadow the frozen copy
TK="python3 -m tracekit capture"
left() { echo $(( 540 - ($(date +%s) - T0) )); }
job() {
  local name=$1 budget=$2; shift 2
  if [ "$(left)" -lt "$budget" ]; then echo "=== SKIP $name (budget $budget s, $(left) s left)"; return; fi
  echo "=== $name: $*"
  local t0=$(date +%s.%N)
  timeout -s TERM -k 20 $budget "$@"; local rc=$?
  echo "=== $name exit $rc wall $(python3 -c "print(round($(date +%s.%N) - $t0, 2))") s"
}
{
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem --format=csv
python3 -c "import sys, torch, torchvision, transformers; print('python', sys.version.split()[0], 'torch', torch.__version__, 'cuda', torch.version.cuda, 'cudnn', torch.backends.cudnn.version(), 'torchvision', torchvision.__version__, 'transformers', transformers.__version__)"
python3 -c "import tracekit; print('tracekit from', tracekit.__file__)"
ncu --version | tail -1
for j in ${*:-resnet50_train vit_train moe_train bert_infer}; do case $j in
  resnet50_train) job $j 120 $TK resnet50_train.py -o $B/resnet50_train --step-fn resnet50_train:train_step --warmup 2 --steps 3 -- --iters 6 ;;
  vit_train)      job $j 120 $TK vit_train.py -o $B/vit_train --step-fn vit_train:train_step --warmup 2 --steps 3 -- --iters 6 ;;
  moe_train)      job $j 120 $TK moe_train.py -o $B/moe_train --step-fn moe_train:train_step --warmup 2 --steps 3 -- --iters 6 ;;
  bert_infer)     job $j 120 $TK bert_infer.py -o $B/bert_infer --warmup 2 --steps 3 -- --iters 6 ;;
  vit_compile)    job $j 200 $TK vit_train.py -o $B/vit_train_compile --step-fn vit_train:train_step --warmup 3 --steps 3 -- --iters 7 --compile ;;
  ncu_vit_compile) # as ncu_* below, for the compiled ViT (its 6th call: the bundle's last profiled step)
    job $j 240 ncu --clock-control none --nvtx --nvtx-include "regex:step_ncu" \
      --metrics dram__bytes_read.sum,dram__bytes_write.sum,gpu__time_duration.sum --csv \
      env TORCHINDUCTOR_COMPILE_THREADS=1 python3 vit_train.py --iters 7 --nvtx-step 5 --compile \
      > $OUT/vit_compile_ncu_raw.txt 2>&1      # no compile worker processes under ncu (one segfaulted)
    grep -v '^"' $OUT/vit_compile_ncu_raw.txt | tail -5; grep '^"' $OUT/vit_compile_ncu_raw.txt | gzip > $OUT/vit_train_compile_ncu.csv.gz
    echo "ncu csv lines: $(zcat $OUT/vit_train_compile_ncu.csv.gz | wc -l)"; rm -f $OUT/vit_compile_ncu_raw.txt ;;
  ncu_*)          # Nsight Compute DRAM counters of every kernel of the 5th call (the bundle's last profiled
                  # step), caches flushed before each kernel: ncu_resnet50_train, ncu_moe_train, ncu_bert_infer
    m=${j#ncu_}
    job $j 200 ncu --clock-control none --nvtx --nvtx-include "regex:step_ncu" \
      --metrics dram__bytes_read.sum,dram__bytes_write.sum,gpu__time_duration.sum --csv \
      python3 $m.py --iters 6 --nvtx-step 4 > $OUT/${m}_ncu_raw.txt 2>&1
    grep -v '^"' $OUT/${m}_ncu_raw.txt | tail -5; grep '^"' $OUT/${m}_ncu_raw.txt | gzip > $OUT/${m}_ncu.csv.gz
    echo "ncu csv lines: $(zcat $OUT/${m}_ncu.csv.gz | wc -l)"; rm -f $OUT/${m}_ncu_raw.txt ;;
esac; done
ls -la $B/*
} 2>&1 | tee $OUT/capture_log.txt
