"""Issue 14 items 1-2: the loader and the commands on top of it against orjson's parse of the same file.

For each trace (plain JSON, decompressed first): orjson.loads (the baseline, Python's cycle collector on
as in any program that does not turn it off; again with it paused, since a third or more of that
parse is the collector scanning the new dicts and tracekit's commands pause it), the typed-record decode
alone (tracekit.load.events: the floor the loader builds on), load_trace, and the CLI in process
(`explain -f json`, `explain --fusion`, `check --rules`, `diff A A -f json`, all --no-cache), then
HTA's TraceAnalysis and TraceLens's TreePerfAnalyzer.from_file when available. Every measurement is a
fresh Python process (imports and the file's first read are not timed; the page cache is warm);
rounds are interleaved so that a busy machine slows every row alike; the median of --repeat runs
and the process's peak RSS (growth over its state before the measured call, and absolute) are
reported. Then linear growth: explain on 1x, 2x, 4x, 8x SYNTHETIC repeats of a trace
(bench/make_big.py).

    python bench/bench_load.py [--repeat 5] [--tracelens DIR] [--no-hta] [--growth 1,2,4,8]

--tracelens: a checkout of AMD-AGI/TraceLens (imported from there; its progress bars stubbed).
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
TRACES = [HERE / "traces" / "big_train_24layers_6steps.json.gz", HERE / "traces" / "cpu_small_model_2000steps.json.gz"]
SMALL = HERE.parent / "captures" / "h200" / "seed_eager_b1.json.gz"      # warms a command's imports
RULES = '[kernels_per_step]\nmax = 100000\n[[forbid]]\npattern = "^Memcpy .*Pageable"\nfield = "name"\n'

PRELUDE = """
import os, resource, sys, time
os.environ["TRACEKIT_NO_CACHE"] = "1"
def rss(): return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
path, rules, SMALL = sys.argv[1], sys.argv[2], sys.argv[3]
open(path, "rb").read()
"""
CLI = ("from tracekit.cli.app import run\n"
       "def cli(*args):\n"
       "    out = os.dup(1); null = os.open(os.devnull, os.O_WRONLY); os.dup2(null, 1)\n"
       "    try: code = run(list(args))\n"
       "    finally: sys.stdout.flush(); os.dup2(out, 1)\n"
       "    assert code in (0, 1), code\n"
       "def warm(*args):      # the command once on a small trace: its lazy imports are not timed\n"
       "    cli(*[SMALL if a == path else a for a in args])\n")
TRACELENS = ("import types; sys.modules['TraceLens'] = m = types.ModuleType('TraceLens'); "
             "m.__path__ = [os.path.join(os.environ['TRACELENS_DIR'], 'TraceLens')]; "
             "tq = types.ModuleType('tqdm'); tq.tqdm = lambda it=None, *a, **k: it; sys.modules['tqdm'] = tq; "
             "import logging; logging.disable(logging.WARNING); "
             "from TraceLens.TreePerf.tree_perf import TreePerfAnalyzer")


def _cli(*args: str) -> tuple[str, str]:
    call = ", ".join(a if a in ("path", "rules") else repr(a) for a in args)
    return CLI + f"warm({call})", f"cli({call})"


SNIPPETS = {
    "orjson.loads": ("import orjson", "orjson.loads(open(path, 'rb').read())"),
    "orjson.loads, cycle collector paused": ("import orjson, gc; gc.disable()", "orjson.loads(open(path, 'rb').read())"),
    "typed records only (msgspec)": (
        "from tracekit.load.reader import _split, _SPACE; from tracekit.load.events import decode_fast",
        "raw = open(path, 'rb').read(); (a, b), _ = _split(raw, _SPACE.match(raw).end()); "
        "decode_fast(memoryview(raw)[a:b])"),
    "load_trace": ("from tracekit.load.kineto import load_trace", "load_trace(path)"),
    "explain -f json": _cli("explain", "path", "-f", "json", "--no-cache"),
    "explain (table)": _cli("explain", "path", "--no-cache"),
    "explain --fusion": _cli("explain", "path", "--fusion", "--no-cache"),
    "check --rules": _cli("check", "path", "--rules", "rules", "--no-cache"),
    "diff A A -f json": _cli("diff", "path", "path", "-f", "json", "--no-cache"),
    "HTA TraceAnalysis": ("from hta.trace_analysis import TraceAnalysis; import shutil, tempfile; "
                          "d = tempfile.mkdtemp(); shutil.copy(path, os.path.join(d, 'rank0.json'))",
                          "TraceAnalysis(trace_dir=d)"),
    "TraceLens TreePerfAnalyzer.from_file": (TRACELENS, "TreePerfAnalyzer.from_file(path)"),
}
ONCE = {"HTA TraceAnalysis", "TraceLens TreePerfAnalyzer.from_file"}
TEMPLATE = PRELUDE + """
{setup}
base = rss()
t0 = time.perf_counter()
{stmt}
t1 = time.perf_counter()
print("RESULT", t1 - t0, rss() - base, rss())
"""


def run_one(name: str, path: Path, rules: Path) -> tuple[float, int, int]:
    setup, stmt = SNIPPETS[name]
    code = TEMPLATE.format(setup=setup, stmt=stmt)
    out = subprocess.run([sys.executable, "-c", code, str(path), str(rules), str(SMALL)],
                         capture_output=True, text=True, env={**os.environ, "PYTHONWARNINGS": "ignore"})
    line = [x for x in out.stdout.splitlines() if x.startswith("RESULT")]
    if out.returncode != 0 or not line:
        raise SystemExit(f"{name} failed:\n{out.stderr[-2000:]}")
    t, g, r = line[-1].split()[1:]
    return float(t), int(g), int(r)


def measure(names: list[str], path: Path, rules: Path, repeat: int) -> dict[str, tuple[float, int, int]]:
    """Interleaved rounds: every name once per round; the median time, the largest RSS figures."""
    got: dict[str, list] = {n: [] for n in names}
    for r in range(repeat):
        for n in names:
            if n not in ONCE or r == 0:
                got[n].append(run_one(n, path, rules))
    return {n: (statistics.median(x[0] for x in v), max(x[1] for x in v), max(x[2] for x in v))
            for n, v in got.items()}


def plain_copy(src: Path, tmp: Path) -> Path:
    out = tmp / src.name.replace(".gz", "")
    with (gzip.open(src) if src.suffix == ".gz" else open(src, "rb")) as f, open(out, "wb") as o:
        shutil.copyfileobj(f, o)
    return out


def report(title: str, size: int, res: dict) -> None:
    base = res["orjson.loads"][0]
    explain = res.get("explain -f json", (None,))[0]
    print(f"\n{title}")
    print("| what | seconds | × orjson | × explain | peak RSS growth | × file | peak RSS |")
    print("|---|---|---|---|---|---|---|")
    for name, (t, growth, total) in res.items():
        vs_explain = f"{t / explain:.2f}" if explain and name.split()[0] in ("explain", "check", "diff") else ""
        print(f"| {name} | {t:.3f} | {t / base:.2f} | {vs_explain} | {growth / 1e6:.0f} MB | {growth / size:.2f} | "
              f"{total / 1e6:.0f} MB |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("traces", nargs="*", default=[str(t) for t in TRACES])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--no-hta", action="store_true")
    ap.add_argument("--tracelens", help="a TraceLens checkout (AMD-AGI/TraceLens)")
    ap.add_argument("--growth", default="1,2,4,8", help="repeats of the first trace for the growth table ('' skips)")
    ap.add_argument("--only", help="comma-separated rows to measure (the two orjson.loads rows always are)")
    args = ap.parse_args()
    names = [n for n in SNIPPETS if not (n.startswith("HTA") and args.no_hta)
             and not (n.startswith("TraceLens") and not args.tracelens)]
    if args.only:
        names = [n for n in names if n in {"orjson.loads", "orjson.loads, cycle collector paused",
                                           *args.only.split(",")}]
    if args.tracelens:
        os.environ["TRACELENS_DIR"] = str(Path(args.tracelens).resolve())
    print(f"{time.strftime('%Y-%m-%d')}; {platform.node()}: {os.cpu_count()} CPUs, Python {platform.python_version()}; "
          f"load average {os.getloadavg()[0]:.1f}; median of {args.repeat} fresh processes, interleaved")
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        rules = tmp / "rules.toml"
        rules.write_text(RULES)
        for src in map(Path, args.traces):
            plain = plain_copy(src, tmp)
            size = plain.stat().st_size
            report(f"{src.name}: {size / 1e6:.1f} MB of JSON", size, measure(names, plain, rules, args.repeat))
            plain.unlink()
        if args.growth:
            growth(Path(args.traces[0]), [int(x) for x in args.growth.split(",")], tmp, rules, args.repeat)


def growth(src: Path, factors: list[int], tmp: Path, rules: Path, repeat: int) -> None:
    """explain and orjson on SYNTHETIC repeats of ``src`` (bench/make_big.py)."""
    print(f"\nGrowth: SYNTHETIC repeats of {src.name} (bench/make_big.py)")
    print("| copies | MB | orjson s | explain -f json s | × orjson | explain s per copy | peak RSS growth | × file |")
    print("|---|---|---|---|---|---|---|---|")
    for k in factors:
        path = tmp / f"x{k}.json"
        subprocess.run([sys.executable, str(HERE / "make_big.py"), str(src), str(k), str(path)], check=True,
                       capture_output=True)
        size = path.stat().st_size
        res = measure(["orjson.loads", "explain -f json"], path, rules, max(1, repeat // 2))
        (o, _, _), (e, g, _) = res["orjson.loads"], res["explain -f json"]
        print(f"| {k} | {size / 1e6:.0f} | {o:.2f} | {e:.2f} | {e / o:.2f} | {e / k:.3f} | {g / 1e6:.0f} MB | "
              f"{g / size:.2f} |")
        path.unlink()


if __name__ == "__main__":
    main()
