#!/bin/bash
# The inductor bundle and its Nsight Compute counters on one GPU, in one device call.
# Usage (from this folder; OUT = where results go, TK_PATH = the folder holding tracekit/):
#   OUT=/some/dir TK_PATH=/path/to/tracekit-parent bash run_h200.sh
export PYTHONUNBUFFERED=1
export TORCHINDUCTOR_CACHE_DIR=/tmp/inductor_gpt2      # one compile cache for the capture and the ncu run
export PYTHONPATH=${TK_PATH:-$PWD}${PYTHONPATH:+:$PYTHONPATH}
B=$OUT/bundle; mkdir -p $B
T0=$(date +%s)
left() { echo $(( 560 - ($(date +%s) - T0) )); }
job() {
  local name=$1 budget=$2; shift 2
  if [ "$(left)" -lt "$budget" ]; then budget=$(left); fi
  echo "=== $name (limit $budget s): $*"
  local t0=$(date +%s.%N)
  timeout -s TERM -k 20 $budget "$@"; local rc=$?
  echo "=== $name exit $rc wall $(python3 -c "print(round($(date +%s.%N) - $t0, 2))") s"
}
{
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem --format=csv
python3 -c "import sys, torch, triton; print('python', sys.version.split()[0], 'torch', torch.__version__, 'cuda', torch.version.cuda, 'triton', triton.__version__)"
python3 -c "import tracekit; print('tracekit from', tracekit.__file__)"
ncu --version | tail -1
job capture 330 python3 -m tracekit capture gpt2_train.py -o $B/gpt2_max_autotune --step-fn gpt2_train:train_step \
    --warmup 2 --steps 3 -- --iters 5
# DRAM counters of every kernel of the 5th call (the bundle's last profiled step), caches flushed
# before each kernel; compiled from the capture's cache, in-process (a compile worker segfaulted under ncu)
job ncu 240 ncu --clock-control none --nvtx --nvtx-include "regex:step_ncu" \
    --metrics dram__bytes_read.sum,dram__bytes_write.sum,gpu__time_duration.sum --csv \
    env TORCHINDUCTOR_COMPILE_THREADS=1 python3 gpt2_train.py --iters 5 --nvtx-step 4 > $OUT/ncu_raw.txt 2>&1
grep -v '^"' $OUT/ncu_raw.txt | tail -8; grep '^"' $OUT/ncu_raw.txt | gzip > $OUT/gpt2_max_autotune_ncu.csv.gz
echo "ncu csv lines: $(zcat $OUT/gpt2_max_autotune_ncu.csv.gz | wc -l)"; rm -f $OUT/ncu_raw.txt
(cd $B && tar czf $OUT/bundle.tgz gpt2_max_autotune && ls -laR gpt2_max_autotune | head -40)
ls $TORCHINDUCTOR_CACHE_DIR | head; du -sh $TORCHINDUCTOR_CACHE_DIR
} 2>&1 | tee $OUT/capture_log.txt
rm -rf $B
