#!/bin/bash
# The recheck bundles, their Nsight Compute DRAM counters and the L2 bandwidth, in one device call.
# Usage (from this folder; OUT = where results go, TK_PATH = the folder holding tracekit/, by default
# the repo root three folders up): OUT=/some/dir [TK_PATH=DIR] bash run_recheck.sh [JOB ...]
# With no JOB: l2, the four captures, then the four ncu runs (about 5 min of an H100 expected).
export PYTHONUNBUFFERED=1
export PYTHONPATH=${TK_PATH:-$(cd ../../.. && pwd)}${PYTHONPATH:+:$PYTHONPATH}
B=$OUT/b; mkdir -p $B
T0=$(date +%s)
left() { echo $(( 560 - ($(date +%s) - T0) )); }
job() {
  local name=$1 budget=$2; shift 2
  if [ "$(left)" -lt 20 ]; then echo "=== SKIP $name ($(left) s left)"; return; fi
  if [ "$(left)" -lt "$budget" ]; then budget=$(left); fi
  echo "=== $name (limit $budget s): $*"
  local t0=$(date +%s.%N)
  timeout -s TERM -k 20 $budget "$@"; local rc=$?
  echo "=== $name exit $rc wall $(python3 -c "print(round($(date +%s.%N) - $t0, 2))") s"
}
TK="python3 -m tracekit capture"
ncu_job() {  # DRAM bytes of every kernel of call $2 (0-based) of $1, caches flushed before each kernel
  local m=$1 step=$2; shift 2
  job ncu_$m 150 ncu --clock-control none --nvtx --nvtx-include "regex:step_ncu" \
    --metrics dram__bytes_read.sum,dram__bytes_write.sum,gpu__time_duration.sum --csv \
    python3 $m.py --iters $((step + 1)) --nvtx-step $step "$@" > $OUT/${m}_ncu_raw.txt 2>&1
  grep -v '^"' $OUT/${m}_ncu_raw.txt | tail -4; grep '^"' $OUT/${m}_ncu_raw.txt | gzip > $OUT/${m}_ncu.csv.gz
  echo "ncu csv lines $m: $(zcat $OUT/${m}_ncu.csv.gz | wc -l)"; rm -f $OUT/${m}_ncu_raw.txt
}
{
date -u
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,clocks.max.mem,power.limit --format=csv
python3 -c "import sys, torch, triton, transformers, timm; print('python', sys.version.split()[0], 'torch', torch.__version__, 'cuda', torch.version.cuda, 'cudnn', torch.backends.cudnn.version(), 'triton', triton.__version__, 'transformers', transformers.__version__, 'timm', timm.__version__); p = torch.cuda.get_device_properties(0); print(p.name, 'sms', p.multi_processor_count, 'l2', p.L2_cache_size)"
python3 -c "import tracekit; print('tracekit from', tracekit.__file__)"
ncu --version | tail -1
for j in ${*:-l2 deltanet_decode convnext_train mamba2_fwd whisper_fwd ncu_deltanet_decode ncu_convnext_train ncu_mamba2_fwd ncu_whisper_fwd}; do case $j in
  l2) job l2 60 python3 ../l2/l2_bandwidth.py ;;
  deltanet_decode) job $j 120 $TK deltanet_decode.py -o $B/$j --step-fn deltanet_decode:decode_step --warmup 2 --steps 3 -- --iters 6 ;;
  convnext_train)  job $j 120 $TK convnext_train.py -o $B/$j --step-fn convnext_train:train_step --warmup 2 --steps 3 -- --iters 6 ;;
  mamba2_fwd)      job $j 120 $TK mamba2_fwd.py -o $B/$j --step-fn mamba2_fwd:forward_step --warmup 2 --steps 3 -- --iters 6 ;;
  whisper_fwd)     job $j 120 $TK whisper_fwd.py -o $B/$j --step-fn whisper_fwd:forward_step --warmup 2 --steps 3 -- --iters 6 ;;
  ncu_*) ncu_job ${j#ncu_} 4 ;;   # the 5th call: the bundle's last profiled step
esac; done
(cd $B && tar czf $OUT/bundles.tgz . && ls -la */)
date -u
} 2>&1 | tee $OUT/capture_log.txt
rm -rf $B
