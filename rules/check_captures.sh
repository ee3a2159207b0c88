#!/usr/bin/env bash
# Dogfood: tracekit's own CI gate on the committed H200 captures. A change in tracekit's counting
# (kernels per step, fused ops, gaps) that breaks these rules fails CI.
set -euo pipefail
cd "$(dirname "$0")/.."
H=captures/h200
run() { echo "+ tracekit $*"; tracekit "$@"; }
run check $H/seed_eager_b1.json.gz   --rules rules/seed_eager.toml --format github
run check $H/seed_eager_b128.json.gz --rules rules/seed_eager.toml --format github
run check $H/seed_max-autotune-no-cudagraphs_b1.json.gz   --rules rules/seed_autotune.toml --format github
run check $H/seed_max-autotune-no-cudagraphs_b128.json.gz --rules rules/seed_autotune.toml --format github
run check $H/block_compile.json.gz --rules rules/block_compile.toml --format github
run check $H/seed_max-autotune-no-cudagraphs_b128.json.gz --baseline $H/seed_eager_b128.json.gz
# a committed explain-JSON baseline (what teams keep instead of a trace)
run check $H/seed_max-autotune-no-cudagraphs_b128.json.gz --baseline rules/baselines/seed_autotune_b128.explain.json
# the gate must also fail when it should: eager against the one-kernel rules exits 1
set +e
tracekit check $H/seed_eager_b1.json.gz --rules rules/seed_autotune.toml --format text >/dev/null
rc=$?
set -e
if [ "$rc" -ne 1 ]; then echo "expected exit 1 from eager vs seed_autotune rules, got $rc"; exit 1; fi
set +e
tracekit check $H/seed_eager_b128.json.gz --baseline rules/baselines/seed_autotune_b128.explain.json >/dev/null
rc=$?
set -e
if [ "$rc" -ne 1 ]; then echo "expected exit 1 from eager vs the one-kernel baseline, got $rc"; exit 1; fi
echo "capture checks: all passed"
