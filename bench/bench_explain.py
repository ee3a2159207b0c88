"""Time tracekit's explain against json.load, orjson.loads and HTA's TraceAnalysis on one large trace.

Each measurement runs in a fresh Python process (so imports, caches and memory don't leak between
them); we report the median wall time of the measured region over --repeat runs and the peak RSS
growth over the process's state just before that region.

    python bench/bench_explain.py [TRACE.json.gz] [--repeat 3] [--no-hta]
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

DEFAULT = Path(__file__).parent / "traces" / "big_train_40steps.json.gz"

# Each snippet: setup (not timed), then the measured statement; prints seconds and peak-RSS growth (bytes).
PRELUDE = """
import resource, time, sys
def rss(): return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
path = sys.argv[1]
"""
SNIPPETS = {
    "json.load": ("import json", "json.load(open(path, 'rb'))"),
    "orjson.loads": ("import orjson", "orjson.loads(open(path, 'rb').read())"),
    "tracekit explain (load+classify+cost+roofline)": (
        "import os; os.environ['TRACEKIT_NO_CACHE'] = '1'; "
        "from tracekit.analyze import analyze_path; from tracekit.report.document import explain_dict",
        "analyze_path(path)"),
    "tracekit explain + JSON report": (
        "import os; os.environ['TRACEKIT_NO_CACHE'] = '1'; "
        "from tracekit.analyze import analyze_path; from tracekit.report.document import to_json",
        "to_json(analyze_path(path))"),
    "tracekit explain, cache cold (reads, writes Parquet)": (
        "import os, tempfile; os.environ.pop('TRACEKIT_NO_CACHE', None); "
        "os.environ['TRACEKIT_CACHE_DIR'] = tempfile.mkdtemp(); from tracekit.analyze import analyze_path",
        "analyze_path(path)"),
    "tracekit explain, cache warm (Parquet, no JSON)": (
        "import os, tempfile; os.environ.pop('TRACEKIT_NO_CACHE', None); "
        "os.environ['TRACEKIT_CACHE_DIR'] = tempfile.mkdtemp(); from tracekit.analyze import analyze_path; "
        "analyze_path(path)",
        "analyze_path(path)"),
    "HTA TraceAnalysis (parse)": (
        "from hta.trace_analysis import TraceAnalysis; import os, shutil, tempfile; d = tempfile.mkdtemp(); "
        "shutil.copy(path, os.path.join(d, 'rank0.json'))",
        "TraceAnalysis(trace_dir=d)"),
}
TEMPLATE = PRELUDE + """
{setup}
base = rss()
t0 = time.perf_counter()
{stmt}
t1 = time.perf_counter()
print(t1 - t0, rss() - base, rss())
"""


def measure(name: str, path: Path, repeat: int) -> tuple[float, int, int]:
    setup, stmt = SNIPPETS[name]
    code = TEMPLATE.format(setup=setup, stmt=stmt)
    times, growth, total = [], [], []
    for _ in range(repeat):
        out = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True,
                             env={**os.environ, "PYTHONWARNINGS": "ignore"})
        if out.returncode != 0:
            raise SystemExit(f"{name} failed:\n{out.stderr[-2000:]}")
        t, g, r = out.stdout.strip().splitlines()[-1].split()
        times.append(float(t))
        growth.append(int(g))
        total.append(int(r))
    return statistics.median(times), max(growth), max(total)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("trace", nargs="?", default=str(DEFAULT))
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--no-hta", action="store_true")
    args = ap.parse_args()
    src = Path(args.trace)
    tmp = Path(tempfile.mkdtemp())
    plain = tmp / "trace.json"
    with gzip.open(src) if src.suffix == ".gz" else open(src, "rb") as f, open(plain, "wb") as out:
        shutil.copyfileobj(f, out)
    size = plain.stat().st_size
    n_events = len(json.load(open(plain))["traceEvents"])
    print(f"trace: {src} ({size / 1e6:.1f} MB uncompressed, {n_events} events); "
          f"median of {args.repeat} fresh-process runs; CPU: {os.cpu_count()} cores")
    rows = []
    for name in SNIPPETS:
        if name.startswith("HTA") and args.no_hta:
            continue
        t, growth, total = measure(name, plain, 1 if name.startswith("HTA") else args.repeat)
        rows.append((name, t, growth, total))
    base = next(t for n, t, _, _ in rows if n == "orjson.loads")
    print(f"{'what':50s} {'seconds':>8s} {'× orjson':>9s} {'peak RSS growth':>16s} {'× file':>7s}")
    for name, t, growth, total in rows:
        print(f"{name:50s} {t:8.3f} {t / base:9.2f} {growth / 1e6:13.0f} MB {growth / size:7.1f}")
    shutil.rmtree(tmp)


if __name__ == "__main__":
    main()
