"""Issue 27: memory and time of explain on a trace of many ProfilerSteps (SYNTHETIC input).

The campaign's input was 100k ProfilerStep annotations in 13 MB of JSON (650 MB peak, 17 s). This
script writes such a trace, labelled synthetic in its own metadata: N ``ProfilerStep#i`` user
annotations 100 µs apart and, in the first step, one CPU op (so there is something to explain) —
no device kernels, so every step but the first is empty. Each row is one fresh process,
``python -m tracekit explain T -f FORMAT --no-cache`` with stdout to /dev/null, timed from its start to
its exit; peak RSS and CPU seconds are the process's own (os.wait4). The allowance row (``allowance``:
defined once, used by bench/bench_fuzz_memory.py too) is the same command on the smallest committed
real trace (40 KB): the process with its imports (Python, NumPy, pandas, tracekit), the fixed
allowance the memory bound adds to 3x the input. MB are 10^6 bytes throughout (ru_maxrss is in
KiB on Linux; before 2026-12-06 this script printed MiB as "MB" beside an input size in 10^6 bytes).

    python bench/bench_many_steps.py [--steps 100000] [--formats json,table,csv] [--keep PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import orjson

ROOT = Path(__file__).resolve().parents[1]


def write_trace(path: Path, steps: int) -> int:
    """The synthetic trace; returns its size in bytes."""
    events = [{"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{i}", "ts": i * 100, "dur": 90,
               "pid": 1, "tid": 1, "args": {"External id": i + 2}} for i in range(steps)]
    events.append({"ph": "X", "cat": "cpu_op", "name": "aten::add", "ts": 5, "dur": 5, "pid": 1, "tid": 1,
                   "args": {"External id": 1}})
    doc = {"schemaVersion": 1, "synthetic": f"bench/bench_many_steps.py: {steps} ProfilerSteps, one CPU op",
           "traceEvents": events}
    path.write_bytes(orjson.dumps(doc))
    return path.stat().st_size


# A process's ru_maxrss counts the memory of the process it was spawned from (Linux records the old
# address space's high-water mark at exec, and a forked or vforked child's is its parent's), so a
# bench that holds a 100k-event list would lend it to every child it measures (the 10-step base read
# 91 MB instead of 78). Each command is therefore started by a small launcher (~12 MB) that reports it.
LAUNCH = ("import json, os, subprocess, sys, time; t0 = time.perf_counter(); p = subprocess.Popen(sys.argv[2:]); "
          "_, st, u = os.wait4(p.pid, 0); w = time.perf_counter() - t0; "
          "open(sys.argv[1], 'w').write(json.dumps([w, u.ru_utime + u.ru_stime, u.ru_maxrss, st]))")


def run(argv: list[str]) -> dict:
    """One fresh process (through the launcher): wall seconds, CPU seconds, peak RSS (MB), exit code,
    stdout bytes."""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    with tempfile.TemporaryFile() as out, tempfile.NamedTemporaryFile("r", suffix=".json") as got:
        proc = subprocess.run([sys.executable, "-c", LAUNCH, got.name, *map(str, argv)], stdout=out,
                              stderr=subprocess.PIPE, env=env, cwd=ROOT, check=True)
        wall, cpu, maxrss, status = json.loads(got.read())
        size = out.seek(0, 2)
    return {"wall": wall, "cpu": cpu, "rss_mb": maxrss * 1024 / 1e6, "code": os.waitstatus_to_exitcode(status),
            "out_mb": size / 1e6, "stderr": proc.stderr.decode(errors="replace").strip()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=100_000)
    ap.add_argument("--formats", default="json,table,csv")
    ap.add_argument("--keep", type=Path, help="write the trace here (kept)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        trace = args.keep or Path(tmp) / "many_steps.json"
        size = write_trace(trace, args.steps)
        print(f"# SYNTHETIC trace: {args.steps:,} ProfilerSteps, one CPU op, {size / 1e6:.1f} MB of JSON; "
              f"python {platform.python_version()}, {os.cpu_count()} cores")
        print(f"{'run':<34} {'wall s':>7} {'cpu s':>7} {'peak MB':>8} {'out MB':>7}  limit 3x input + allowance")
        for fmt in args.formats.split(","):
            base = allowance(fmt)
            print(f"{'  allowance: tiny trace, -f ' + fmt:<34} {base['wall']:7.2f} {base['cpu']:7.2f} "
                  f"{base['rss_mb']:8.1f}")
            limit = 3 * size / 1e6 + base["rss_mb"]
            r = run([sys.executable, "-m", "tracekit", "explain", str(trace), "-f", fmt, "--no-cache"])
            verdict = "ok" if r["rss_mb"] <= limit else "OVER"
            print(f"{'explain -f ' + fmt + ' --no-cache':<34} {r['wall']:7.2f} {r['cpu']:7.2f} {r['rss_mb']:8.1f} "
                  f"{r['out_mb']:7.1f}  {limit:.1f} MB {verdict}" + (f"  exit {r['code']}: {r['stderr'][:200]}"
                                                                        if r["code"] else ""))


TINY = ROOT / "captures" / "h200" / "seed_eager_b1.json.gz"       # the smallest committed real trace: 40 KB of JSON


def allowance(fmt: str) -> dict:
    """The fixed allowance of issue 27's memory bound, defined once: the peak RSS of the same command
    (``explain -f FMT --no-cache``) on TINY, a real H200 trace of 40 KB: the process with every module
    the command imports and next to no trace."""
    return run([sys.executable, "-m", "tracekit", "explain", str(TINY), "-f", fmt, "--no-cache"])


if __name__ == "__main__":
    main()
