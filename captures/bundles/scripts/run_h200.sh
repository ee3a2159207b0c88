#!/bin/bash
# Makes the bundles in captures/bundles/ on one H200 (run from the repo root; OUT=where results go).
# Usage: OUT=/some/dir bash captures/bundles/scripts/run_h200.sh
export PYTHONUNBUFFERED=1 PYTHONPATH=.${PYTHONPATH:+:$PYTHONPATH}
S=captures/bundles/scripts
B=/tmp/tk_bundles
rm -rf $B && mkdir -p $B
if python3 -m tracekit --help > /dev/null; then TK="python3 -m tracekit"; else TK="python3 $S/tk_capture.py"; fi
tk() { $TK capture "$@"; echo "exit code: $?"; }
now() { date +%s.%N; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
python3 -c "import torch, triton; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'triton', triton.__version__)"
echo "=== eager";   tk $S/seed.py -o $B/seed_eager --warmup 2 --steps 5 -- --iters 10
echo "=== compile"; tk $S/seed.py -o $B/seed_compile --warmup 2 --steps 5 -- --iters 10 --compile
echo "=== graph (capture in the main trace)"
tk $S/seed_graph.py -o $B/seed_graph --step-fn seed_graph:replay -- --replays 3
echo "=== two graphs, captured during warm-up (side capture traces)"
tk $S/seed_graph.py -o $B/seed_graph_two --step-fn seed_graph:replay --warmup 1 --steps 4 -- --replays 3 --two
ls -la $B/*
echo "=== capture-phase events"; python3 $S/inspect_capture.py $B/seed_graph/trace.json.gz
for b in seed_eager seed_compile seed_graph seed_graph_two; do
  echo "=== explain $b"; python3 -m tracekit explain $B/$b --format json > $B/$b.explain.json; echo "exit code: $?"
  python3 -m tracekit explain $B/$b --top 6 2>&1 | head -24
done
python3 $S/check_mapping.py $B/seed_eager.explain.json $B/seed_graph.explain.json $B/seed_graph_two.explain.json
tar czf $OUT/bundles.tgz -C $B .
echo "=== CPU-side overhead on this host: small CPU model (tests/scripts/small_model.py), 510 calls"
for i in 1 2; do
  python3 tests/scripts/small_model.py --iters 510 --time | grep "^time"
  tk tests/scripts/small_model.py -q -o $B/cpu_all -- --iters 510 --time | grep "^time"; rm -rf $B/cpu_all
done
echo "=== overhead: 2000 eager calls, plain / capture all steps / capture --steps 5"
for i in 1; do
  t0=$(now); python3 $S/seed.py --iters 2000; t1=$(now); echo "plain wall $(python3 -c "print(round($t1 - $t0, 2))") s"
  t0=$(now); tk $S/seed.py -q -o $B/ovh_all -- --iters 2000; t1=$(now); echo "capture-all wall $(python3 -c "print(round($t1 - $t0, 2))") s"
  ls -la $B/ovh_all/trace.json.gz; rm -rf $B/ovh_all
  t0=$(now); tk $S/seed.py -q -o $B/ovh_5 --steps 5 -- --iters 2000; t1=$(now); echo "capture-5 wall $(python3 -c "print(round($t1 - $t0, 2))") s"
  rm -rf $B/ovh_5
done
tar czf $OUT/bundles.tgz -C $B .
