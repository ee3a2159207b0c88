#!/bin/bash
# Driver for one device call: runs every capture with a per-step timeout under a global deadline,
# then packs results into $OUT. Usage: bash captures/h200/run_all.sh [BUDGET_SECONDS]
export PYTHONUNBUFFERED=1
BUDGET=${1:-500}
START=$(date +%s)
W=/tmp/tkcap; mkdir -p $W/h200 $W/big
LOG=$OUT/log.txt
step() {  # step NAME CAP_SECONDS CMD...
  local name=$1 cap=$2; shift 2
  local left=$(( BUDGET - ($(date +%s) - START) - 25 ))
  (( left < cap )) && cap=$left
  if (( cap < 15 )); then echo "### SKIP $name (no time left)" | tee -a $LOG; return; fi
  echo "### START $name cap=${cap}s t=$(( $(date +%s) - START ))s" | tee -a $LOG
  timeout -k 5 $cap "$@" >>$LOG 2>&1
  echo "### END $name rc=$? t=$(( $(date +%s) - START ))s" | tee -a $LOG
}
step env 40 python3 captures/h200/env.py --out $W/h200
step seed 150 python3 captures/h200/seed.py --out $W/h200 --modes eager,compile
step graph 90 python3 captures/h200/graph.py --out $W/h200
step block 120 python3 captures/h200/block.py --out $W/h200
step big 180 python3 captures/h200/big.py --out $W/big
step seed_ma 200 python3 captures/h200/seed.py --out $W/h200 --modes max-autotune
cp $LOG $W/h200/capture_log.txt
tar -C $W -czf $OUT/captures.tar.gz h200
for f in $W/big/*.json.gz; do [ -f "$f" ] && cp "$f" $OUT/; done
grep -E "^### |SUMMARY|^  (seed|graph|block|big)_" $LOG
ls -la $OUT; echo total $(( $(date +%s) - START ))s
