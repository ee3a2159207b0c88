"""Issue 27: memory and time of every command on a trace of many ProfilerSteps (SYNTHETIC input).

The campaign's input was 100k ProfilerStep annotations in 13 MB of JSON (650 MB peak, 17 s). This
script writes such a trace, labelled synthetic in its own metadata: N ``ProfilerStep#i`` user
annotations 100 µs apart and, in the first step, one CPU op (so there is something to explain) —
no device kernels, so every step but the first is empty. Each row (``COMMANDS``) is one fresh process,
``python -m tracekit ...`` with stdout to /dev/null, timed from its start to its exit; peak RSS and CPU
seconds are the process's own (os.wait4). Its allowance is the same command on the smallest committed
real trace (40 KB of JSON): the process with every module the command imports and next to no trace,
the fixed allowance the memory bound adds to 3x the JSON bytes the command reads (``allowance`` is the
explain -f json one, used by bench/bench_fuzz_memory.py). Commands of two inputs (diff, check
--baseline, compare, ranks) read a copy of the trace as the second. MB are 10^6 bytes throughout
(ru_maxrss is in KiB on Linux; before 2026-12-06 this script printed MiB as "MB").

    python bench/bench_many_steps.py [--steps 100000] [--only "explain -f json,diff A B"] [--keep PATH]
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import platform
import shutil
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


def run(argv: list[str], extra_env: dict | None = None) -> dict:
    """One fresh process (through the launcher): wall seconds, CPU seconds, peak RSS (MB), exit code,
    stdout bytes."""
    env = dict(os.environ, PYTHONPATH=str(ROOT), **(extra_env or {}))
    with tempfile.TemporaryFile() as out, tempfile.NamedTemporaryFile("r", suffix=".json") as got:
        proc = subprocess.run([sys.executable, "-c", LAUNCH, got.name, *map(str, argv)], stdout=out,
                              stderr=subprocess.PIPE, env=env, cwd=ROOT, check=True)
        wall, cpu, maxrss, status = json.loads(got.read())
        size = out.seek(0, 2)
    return {"wall": wall, "cpu": cpu, "rss_mb": maxrss * 1024 / 1e6, "code": os.waitstatus_to_exitcode(status),
            "out_mb": size / 1e6, "stderr": proc.stderr.decode(errors="replace").strip()}


# (name, arguments after ``tracekit``, cache): {A} the trace, {B} a copy of it (a second input), {D} a folder
# of two rank copies, {O} an output file; cache "off" (--no-cache), "cold" (an empty cache folder) or "warm"
# (the same command run once before on that folder, the second run measured).
COMMANDS = [
    ("explain -f json", ["explain", "{A}", "-f", "json", "--no-cache"], "off"),
    ("explain -f table", ["explain", "{A}", "--no-cache"], "off"),
    ("explain -f csv", ["explain", "{A}", "-f", "csv", "--no-cache"], "off"),
    ("explain -f markdown", ["explain", "{A}", "-f", "markdown", "--no-cache"], "off"),
    ("explain -f json cache-cold", ["explain", "{A}", "-f", "json"], "cold"),
    ("explain -f json cache-warm", ["explain", "{A}", "-f", "json"], "warm"),
    ("explain (table) cache-cold", ["explain", "{A}"], "cold"),
    ("explain --html", ["explain", "{A}", "--html", "{O}", "--force", "--no-cache"], "off"),
    ("explain --fusion", ["explain", "{A}", "--fusion", "--no-cache"], "off"),
    ("explain --devices h200 h100-sxm", ["explain", "{A}", "--devices", "h200,h100-sxm", "--no-cache"], "off"),
    ("explain --devices .. -f json", ["explain", "{A}", "--devices", "h200,h100-sxm", "-f", "json", "--no-cache"],
     "off"),
    ("explain --by module", ["explain", "{A}", "--by", "module", "--no-cache"], "off"),
    ("explain --xlsx", ["explain", "{A}", "--xlsx", "{O}", "--force", "--no-cache"], "off"),
    ("diff A B", ["diff", "{A}", "{B}", "--no-cache"], "off"),
    ("check A --baseline B", ["check", "{A}", "--baseline", "{B}", "--no-cache"], "off"),
    ("compare A B cache-cold", ["compare", "{A}", "{B}"], "cold"),
    ("ranks (2 ranks)", ["ranks", "{D}", "--no-cache"], "off"),
]


def measure(argv: list[str], cache: str, paths: dict, tmp: Path) -> dict:
    args = [a.format(**paths) for a in argv]
    with tempfile.TemporaryDirectory(dir=tmp) as folder:
        env = {"TRACEKIT_CACHE_DIR": folder}
        if cache == "warm":
            run([sys.executable, "-m", "tracekit", *args], env)
        return run([sys.executable, "-m", "tracekit", *args], env)


def inputs(trace: Path, where: Path) -> dict:
    """{A}, {B}, {D}, {O} for ``trace``, under ``where``, and the JSON bytes each command reads."""
    where.mkdir(parents=True, exist_ok=True)
    other = where / ("b" + "".join(trace.suffixes))
    shutil.copyfile(trace, other)
    ranks = where / "ranks"
    ranks.mkdir(exist_ok=True)
    for r in (0, 1):
        shutil.copyfile(trace, ranks / f"rank{r}{''.join(trace.suffixes)}")
    raw = len(gzip.decompress(trace.read_bytes())) if trace.suffix == ".gz" else trace.stat().st_size
    return {"A": trace, "B": other, "D": ranks, "O": where / "out.report"}, raw


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=100_000)
    ap.add_argument("--only", help="comma-separated command names (default: all of COMMANDS)")
    ap.add_argument("--keep", type=Path, help="write the trace here (kept)")
    args = ap.parse_args()
    chosen = [c for c in COMMANDS if args.only is None or c[0] in args.only.split(",")]
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        trace = args.keep or tmp / "many_steps.json"
        size = write_trace(trace, args.steps)
        big, _ = inputs(trace, tmp / "big")
        tiny, tiny_size = inputs(TINY, tmp / "tiny")
        print(f"# SYNTHETIC trace: {args.steps:,} ProfilerSteps, one CPU op, {size / 1e6:.1f} MB of JSON; "
              f"python {platform.python_version()}, {os.cpu_count()} cores; MB = 10^6 bytes")
        print(f"# allowance: the same command on {TINY.name} ({tiny_size / 1e3:.0f} KB of JSON); limit: 3 x the "
              "JSON bytes read (two inputs for diff, check, compare, ranks) + allowance")
        print(f"{'command':<34} {'allow MB':>8} {'wall s':>7} {'peak MB':>8} {'out MB':>7} {'limit MB':>8}")
        for name, argv, cache in chosen:
            base = measure(argv, cache, tiny, tmp)
            r = measure(argv, cache, big, tmp)
            read = size * (2 if any(a in ("{B}", "{D}") for a in argv) else 1)
            limit = 3 * read / 1e6 + base["rss_mb"]
            verdict = "ok" if r["rss_mb"] <= limit else "OVER"
            bad = next((f"  exit {x['code']}: {x['stderr'][-200:]}" for x in (base, r) if x["code"] not in (0, 1)), "")
            print(f"{name:<34} {base['rss_mb']:8.1f} {r['wall']:7.2f} {r['rss_mb']:8.1f} {r['out_mb']:7.1f} "
                  f"{limit:8.1f} {verdict}{bad}", flush=True)


TINY = ROOT / "captures" / "h200" / "seed_eager_b1.json.gz"       # the smallest committed real trace: 40 KB of JSON


def allowance(fmt: str) -> dict:
    """The fixed allowance of issue 27's memory bound, defined once: the peak RSS of the same command
    (``explain -f FMT --no-cache``) on TINY, a real H200 trace of 40 KB: the process with every module
    the command imports and next to no trace."""
    return run([sys.executable, "-m", "tracekit", "explain", str(TINY), "-f", fmt, "--no-cache"])


if __name__ == "__main__":
    main()
