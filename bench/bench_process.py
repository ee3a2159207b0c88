"""Issue 26: explain as a user measures it, the whole process, against orjson's parse of the same file.

Every row is one fresh process, timed from its start to its exit (interpreter start-up, imports,
reading the file, the work and writing the output: what `time tracekit explain ...` says), stdout to
/dev/null; its CPU seconds (user + system) and peak RSS are the process's own (os.wait4): on a shared
machine the CPU column is the steadier one. Rows, interleaved in each round so that a
busy machine slows every row alike; the median of --repeat rounds (HTA and TraceLens: one run):

- orjson.loads of the file, Python's cycle collector on (any program's default: the baseline) and off
- the typed-record decode alone (msgspec, tracekit.load.events: what reading the file must cost)
- `python -m tracekit explain FILE -f json --no-cache`
- the same with the cache warm (a cache folder filled once before the rounds): the kept output
- `explain --fusion --no-cache` (the people's table with the fusion view), with --all
- HTA's TraceAnalysis and TraceLens's TreePerfAnalyzer.from_file (--tracelens CHECKOUT) on the same file

Traces are decompressed to plain JSON first (the page cache is warm: every row reads it once per round).
tracekit's modules are byte-compiled first (compileall), as an installed package is: where
PYTHONDONTWRITEBYTECODE is set and nothing compiled them, every run compiles its ~100 modules again
(0.3-0.5 s on the 2-core dev box), which no user pays.

    python bench/bench_process.py [TRACE ...] [--repeat 5] [--no-hta] [--tracelens DIR] [--all] [--before TREE]
        [--only TEXT ...]   (only the rows whose name holds one of the texts; orjson's collector-on row, the
                             baseline, always runs)
"""

from __future__ import annotations

import argparse
import gzip
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
TRACES = [HERE / "traces" / "big_train_24layers_6steps.json.gz", HERE / "traces" / "cpu_small_model_2000steps.json.gz"]
PY = sys.executable

ORJSON = "import orjson, sys; orjson.loads(open(sys.argv[1], 'rb').read())"
ORJSON_OFF = "import gc; gc.disable(); " + ORJSON
MSGSPEC = ("import sys; from tracekit.load.reader import _split, _SPACE; from tracekit.load.events import decode_fast; "
           "raw = open(sys.argv[1], 'rb').read(); (a, b), _ = _split(raw, _SPACE.match(raw).end()); "
           "decode_fast(memoryview(raw)[a:b])")
HTA = ("import os, sys, shutil, tempfile, logging; logging.disable(logging.WARNING); "
       "from hta.trace_analysis import TraceAnalysis; d = tempfile.mkdtemp(); "
       "shutil.copy(sys.argv[1], os.path.join(d, 'rank0.json')); TraceAnalysis(trace_dir=d)")
TRACELENS = ("import os, sys, types; sys.modules['TraceLens'] = m = types.ModuleType('TraceLens'); "
             "m.__path__ = [os.path.join(os.environ['TRACELENS_DIR'], 'TraceLens')]; "
             "tq = types.ModuleType('tqdm'); tq.tqdm = lambda it=None, *a, **k: it; sys.modules['tqdm'] = tq; "
             "import logging; logging.disable(logging.WARNING); "
             "from TraceLens.TreePerf.tree_perf import TreePerfAnalyzer; TreePerfAnalyzer.from_file(sys.argv[1])")
EXPLAIN = [PY, "-m", "tracekit", "explain"]
BASE = "orjson.loads (collector on)"


def rows(path: Path, cache_dir: Path, hta: bool, tracelens: bool, every: bool,
         before: Path | None = None) -> dict[str, tuple[list, dict]]:
    """name -> (argv, extra environment)."""
    off = {"TRACEKIT_NO_CACHE": "1"}
    out = {
        "orjson.loads (collector on)": ([PY, "-c", ORJSON, str(path)], {}),
        "orjson.loads (collector off)": ([PY, "-c", ORJSON_OFF, str(path)], {}),
        "typed records only (msgspec, the floor)": ([PY, "-c", MSGSPEC, str(path)], {}),
        "tracekit explain -f json --no-cache": (EXPLAIN + [str(path), "-f", "json", "--no-cache"], off),
        "tracekit explain -f json, cache warm": (EXPLAIN + [str(path), "-f", "json"],
                                                 {"TRACEKIT_CACHE_DIR": str(cache_dir)}),
    }
    if before is not None:           # the same two commands from another tree (an older commit), same run
        old = {"PYTHONPATH": str(before), "CWD": str(before)}         # `python -m` imports from its folder
        out[f"before ({before.name}): explain -f json --no-cache"] = (
            EXPLAIN + [str(path), "-f", "json", "--no-cache"], {**off, **old})
        out[f"before ({before.name}): explain -f json, cache warm"] = (
            EXPLAIN + [str(path), "-f", "json"], {"TRACEKIT_CACHE_DIR": str(cache_dir) + "-before", **old})
    if every:
        out["tracekit explain --fusion --no-cache"] = (EXPLAIN + [str(path), "--fusion", "--no-cache"], off)
    if hta:
        out["HTA TraceAnalysis"] = ([PY, "-c", HTA, str(path)], {})
    if tracelens:
        out["TraceLens TreePerfAnalyzer.from_file"] = ([PY, "-c", TRACELENS, str(path)], {})
    return out


def run_process(argv: list, env: dict) -> tuple[float, float, int]:
    """(wall seconds from spawn to exit, its CPU seconds: user + system, its peak RSS in bytes)."""
    full = {k: v for k, v in os.environ.items() if k not in ("TRACEKIT_NO_CACHE", "TRACEKIT_CACHE_DIR")}
    full.update(PYTHONPATH=str(ROOT), PYTHONWARNINGS="ignore")
    full.update(env)
    cwd = full.pop("CWD", str(ROOT))
    with open(os.devnull, "wb") as null:
        t0 = time.perf_counter()
        proc = subprocess.Popen(argv, stdout=null, stderr=subprocess.PIPE, env=full, cwd=cwd)
        _, status, usage = os.wait4(proc.pid, 0)
        t1 = time.perf_counter()
        err = proc.stderr.read()
        proc.stderr.close()
        proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode not in (0, 1):
        raise SystemExit(f"{' '.join(map(str, argv[:6]))} failed ({proc.returncode}):\n{err.decode()[-2000:]}")
    return t1 - t0, usage.ru_utime + usage.ru_stime, usage.ru_maxrss * 1024


def measure(table: dict, repeat: int, once: set) -> dict[str, tuple[float, float, int]]:
    """Interleaved rounds; per row the median wall and CPU times and the largest peak RSS."""
    got: dict[str, list] = {n: [] for n in table}
    for r in range(repeat):
        for name, (argv, env) in table.items():
            if name not in once or r == 0:
                got[name].append(run_process(argv, env))
    return {n: (statistics.median(t for t, _, _ in v), statistics.median(c for _, c, _ in v), max(m for _, _, m in v))
            for n, v in got.items()}


def plain_copy(src: Path, tmp: Path) -> Path:
    out = tmp / src.name.replace(".gz", "")
    with (gzip.open(src) if src.suffix == ".gz" else open(src, "rb")) as f, open(out, "wb") as o:
        shutil.copyfileobj(f, o)
    return out


def report(title: str, size: int, res: dict) -> None:
    base, base_cpu = res[BASE][:2]
    print(f"\n{title}")
    print("| whole process | median s | × orjson.loads (collector on) | CPU s | × orjson (CPU) | peak RSS | × file |")
    print("|---|---|---|---|---|---|---|")
    for name, (t, cpu, rss) in res.items():
        print(f"| {name} | {t:.3f} | {t / base:.2f} | {cpu:.3f} | {cpu / base_cpu:.2f} | {rss / 1e6:.0f} MB | "
              f"{rss / size:.2f} |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("traces", nargs="*", default=[str(t) for t in TRACES])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--no-hta", action="store_true")
    ap.add_argument("--tracelens", help="a TraceLens checkout (AMD-AGI/TraceLens)")
    ap.add_argument("--all", action="store_true", help="also explain --fusion")
    ap.add_argument("--before", help="another tracekit tree (e.g. a `git archive` of an older commit): its explain "
                                     "rows run in the same rounds")
    ap.add_argument("--only", nargs="+", metavar="TEXT", help="only the rows whose name holds one of these "
                                                               "texts (and the orjson baseline)")
    args = ap.parse_args()
    if args.tracelens:
        os.environ["TRACELENS_DIR"] = str(Path(args.tracelens).resolve())
    for tree in [ROOT] + ([Path(args.before)] if args.before else []):
        subprocess.run([PY, "-m", "compileall", "-q", str(tree / "tracekit")], check=True)
    hta = not args.no_hta and subprocess.run([PY, "-c", "import hta"], capture_output=True).returncode == 0
    print(f"{time.strftime('%Y-%m-%d %H:%M')}; {platform.node()}: {os.cpu_count()} CPUs, Python "
          f"{platform.python_version()}; load average {os.getloadavg()[0]:.1f}; whole processes, median of "
          f"{args.repeat} interleaved rounds (HTA, TraceLens: 1 run)")
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        for src in map(Path, args.traces):
            plain = plain_copy(src, tmp)
            cache_dir = tmp / "cache"
            before = Path(args.before).resolve() if args.before else None
            table = rows(plain, cache_dir, hta, bool(args.tracelens), args.all, before)
            if args.only:
                table = {n: v for n, v in table.items() if n == BASE or any(t in n for t in args.only)}
            for name in [n for n in table if "cache warm" in n]:
                run_process(*table[name])                                         # fills the cache
            res = measure(table, args.repeat, {"HTA TraceAnalysis", "TraceLens TreePerfAnalyzer.from_file"})
            report(f"{src.name}: {plain.stat().st_size / 1e6:.1f} MB of JSON", plain.stat().st_size, res)
            plain.unlink()
            shutil.rmtree(cache_dir, ignore_errors=True)
            shutil.rmtree(str(cache_dir) + "-before", ignore_errors=True)
    print(f"\nload average at the end {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
