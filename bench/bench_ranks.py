"""Time ``tracekit ranks`` on a SYNTHETIC 64-rank set (bench/make_ranks.py, from HTA's real A100 NCCL trace):
per-rank stages one after another, on the local process pool, and on a Dask LocalCluster; each with an
empty cache (cold: every trace's JSON read) and again with the cache it just filled (warm: Parquet).
Also the cross-rank DuckDB step alone, and one rank's explain cold and warm.

Each measurement is one fresh ``python -m tracekit ranks DIR --format json`` process (imports and
worker start-up included), the median wall time over --repeat runs.

    python bench/bench_ranks.py [--ranks 64] [--repeat 3] [--set DIR]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def run(args: list[str], cache: Path, cold: bool) -> float:
    if cold:
        shutil.rmtree(cache, ignore_errors=True)
    env = {k: v for k, v in os.environ.items() if k != "TRACEKIT_NO_CACHE"}
    env["TRACEKIT_CACHE_DIR"] = str(cache)
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "tracekit", *args], capture_output=True, text=True, env=env, cwd=ROOT)
    seconds = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"tracekit {' '.join(args)} failed: {proc.stderr[-400:]}")
    return seconds


def measure(args: list[str], repeat: int, cache: Path) -> tuple[float, float]:
    """(cold, warm) median seconds."""
    cold, warm = [], []
    for _ in range(repeat):
        cold.append(run(args, cache, cold=True))
        warm.append(run(args, cache, cold=False))
    return statistics.median(cold), statistics.median(warm)


def duckdb_only(folder: Path, repeat: int, cache: Path) -> float:
    """The cross-rank queries alone, over tables the stages already wrote (in this process)."""
    os.environ["TRACEKIT_CACHE_DIR"] = str(cache)
    from tracekit.ranks.query import query_all
    from tracekit.ranks.run import run_stages, tasks_of, write_tables

    tables = Path(tempfile.mkdtemp(prefix="tracekit-bench-tables-"))
    write_tables(run_stages(tasks_of(folder), workers=None), tables)
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        query_all(tables)
        times.append(time.perf_counter() - t0)
    shutil.rmtree(tables)
    return statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ranks", type=int, default=64)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--set", type=Path, default=None, help="an existing multi-rank folder (default: make one)")
    a = ap.parse_args()
    folder = a.set
    if folder is None:
        folder = Path(f"/tmp/tracekit-synthetic-{a.ranks}")
        subprocess.run([sys.executable, str(ROOT / "bench" / "make_ranks.py"), "--ranks", str(a.ranks), "--out",
                        str(folder), "--straggler", "13"], check=True, capture_output=True)
    n = len(list(folder.glob("*.json*")))
    size = sum(p.stat().st_size for p in folder.glob("*.json*")) / 1e6
    cache = Path(tempfile.mkdtemp(prefix="tracekit-bench-cache-"))
    from tracekit.ranks.run import usable_cpus
    cpus = usable_cpus()
    print(f"{n} SYNTHETIC ranks in {folder} ({size:.0f} MB gzipped), {cpus} usable CPUs "
          f"(os.cpu_count {os.cpu_count()}), median of {a.repeat}\n")
    print("| per-rank stages | cold cache (s) | warm cache (s) |")
    print("|---|---:|---:|")
    one = sorted(folder.glob("*.json*"))[0]
    rows = [("one rank: explain (for scale)", ["explain", str(one), "--format", "json"]),
            ("serial (--workers 1)", ["ranks", str(folder), "--format", "json", "--workers", "1"]),
            (f"process pool (default: {min(n, cpus)} workers)", ["ranks", str(folder), "--format", "json"]),
            ("Dask LocalCluster (--dask local)", ["ranks", str(folder), "--format", "json", "--dask", "local"])]
    for label, args in rows:
        cold, warm = measure(args, a.repeat, cache)
        print(f"| {label} | {cold:.2f} | {warm:.2f} |", flush=True)
    print(f"\ncross-rank DuckDB queries alone over the {n} Parquet tables: {duckdb_only(folder, a.repeat, cache):.3f} s")
    shutil.rmtree(cache, ignore_errors=True)


if __name__ == "__main__":
    main()
