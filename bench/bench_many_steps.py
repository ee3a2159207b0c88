"""Issue 27: memory and time of explain on a trace of many ProfilerSteps (SYNTHETIC input).

The campaign's input was 100k ProfilerStep annotations in 13 MB of JSON (650 MB peak, 17 s). This
script writes such a trace, labelled synthetic in its own metadata: N ``ProfilerStep#i`` user
annotations 100 µs apart and, in the first step, one CPU op (so there is something to explain) —
no device kernels, so every step but the first is empty. Each row is one fresh process,
``python -m tracekit explain T -f FORMAT --no-cache`` with stdout to /dev/null, timed from its start to
its exit; peak RSS and CPU seconds are the process's own (os.wait4). The base row is the same command on
the same synthetic trace with 10 steps: the process with its imports (Python, NumPy, pandas, tracekit),
the fixed allowance the memory bound adds to 3x the input.

    python bench/bench_many_steps.py [--steps 100000] [--formats json,table,csv] [--keep PATH]
"""

from __future__ import annotations

import argparse
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


def run(argv: list[str]) -> dict:
    """One fresh process: wall seconds, CPU seconds, peak RSS (MB), exit code, stdout bytes."""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    with tempfile.TemporaryFile() as out:
        t0 = time.perf_counter()
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.PIPE, env=env, cwd=ROOT)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - t0
        err = proc.stderr.read().decode(errors="replace")
        proc.stderr.close()
        size = out.seek(0, 2)
    return {"wall": wall, "cpu": usage.ru_utime + usage.ru_stime, "rss_mb": usage.ru_maxrss / 1024,
            "code": os.waitstatus_to_exitcode(status), "out_mb": size / 1e6, "stderr": err.strip()}


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
        small = Path(tmp) / "ten_steps.json"
        write_trace(small, 10)
        print(f"{'run':<34} {'wall s':>7} {'cpu s':>7} {'peak MB':>8} {'out MB':>7}  limit 3x input + base")
        for fmt in args.formats.split(","):
            base = run([sys.executable, "-m", "tracekit", "explain", str(small), "-f", fmt, "--no-cache"])
            print(f"{'  base: 10 steps, -f ' + fmt:<34} {base['wall']:7.2f} {base['cpu']:7.2f} {base['rss_mb']:8.0f}")
            limit = 3 * size / 1e6 + base["rss_mb"]
            r = run([sys.executable, "-m", "tracekit", "explain", str(trace), "-f", fmt, "--no-cache"])
            verdict = "ok" if r["rss_mb"] <= limit else "OVER"
            print(f"{'explain -f ' + fmt + ' --no-cache':<34} {r['wall']:7.2f} {r['cpu']:7.2f} {r['rss_mb']:8.0f} "
                  f"{r['out_mb']:7.1f}  {limit:.0f} MB {verdict}" + (f"  exit {r['code']}: {r['stderr'][:200]}"
                                                                      if r["code"] else ""))


if __name__ == "__main__":
    main()
