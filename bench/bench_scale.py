"""Issue 26: explain linear in the kernels of ONE step (a serving trace without ProfilerStep markers is
one step). SYNTHETIC traces (bench/make_big.py --one-step): N time-shifted copies of a real committed
trace, its ProfilerStep events dropped, so all N copies' kernels are one step; and, with --million,
enough copies for at least 1,000,000 kernels in that one step (3.6 GB of JSON from the default trace).

Per size, `explain FILE -f json --no-cache` in fresh processes (tracekit byte-compiled first):
the command's own time in process (imports warmed on a small trace, not timed: what grows with the
trace), the whole process's time, each as wall and CPU seconds (CPU: what a shared machine disturbs
least), and its peak RSS (os.wait4); rounds interleave the sizes and
the median of --repeat is reported (the million-kernel trace: one run). Target: 8 copies ≤ 9× one copy.

    python bench/bench_scale.py [--trace T] [--copies 1,2,4,8] [--repeat 3] [--million]
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
PY = sys.executable
TRACE = HERE / "traces" / "big_train_24layers_6steps.json.gz"
SMALL = ROOT / "captures" / "h200" / "seed_eager_b1.json.gz"
TIMED = """
import os, sys, time
from tracekit.cli.main import run
path, small = sys.argv[1], sys.argv[2]
def cli(p):
    out = os.dup(1); null = os.open(os.devnull, os.O_WRONLY); os.dup2(null, 1)
    try: code = run(["explain", p, "-f", "json", "--no-cache"])
    finally: sys.stdout.flush(); os.dup2(out, 1)
    assert code == 0, code
cli(small)
c0, t0 = time.process_time(), time.perf_counter(); cli(path); t1, c1 = time.perf_counter(), time.process_time()
print("RESULT", t1 - t0, c1 - c0, file=sys.stderr)
"""
COUNT = ("import sys, orjson; d = orjson.loads(sys.stdin.buffer.read()); "
         "print(d['summary']['kernels'], len(d['steps']))")


def run_child(argv: list) -> tuple[float, float, float, float, int]:
    """Seconds of the command in process (wall, CPU), of the whole process (wall, CPU: user + system), and
    its peak RSS in bytes. CPU seconds are what a shared machine disturbs least."""
    env = {k: v for k, v in os.environ.items() if k != "TRACEKIT_CACHE_DIR"}
    env.update(PYTHONPATH=str(ROOT), PYTHONWARNINGS="ignore", TRACEKIT_NO_CACHE="1")
    t0 = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env, cwd=ROOT)
    err = proc.stderr.read()
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    line = [x for x in err.decode().splitlines() if x.startswith("RESULT")]
    if os.waitstatus_to_exitcode(status) != 0 or not line:
        raise SystemExit(f"explain failed:\n{err.decode()[-2000:]}")
    t, cpu = map(float, line[-1].split()[1:3])
    return t, cpu, wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss * 1024


def kernels_and_steps(path: Path) -> tuple[int, int]:
    """Kernels and steps explain reports for ``path`` (its JSON summary)."""
    out = subprocess.run([PY, "-m", "tracekit", "explain", str(path), "-f", "json", "--no-cache"], capture_output=True,
                         env={**os.environ, "PYTHONPATH": str(ROOT)}, cwd=ROOT, check=True).stdout
    k, s = subprocess.run([PY, "-c", COUNT], input=out, capture_output=True, check=True).stdout.split()
    return int(k), int(s)


def make(src: Path, copies: int, out: Path) -> Path:
    subprocess.run([PY, str(HERE / "make_big.py"), str(src), str(copies), str(out), "--one-step"], check=True,
                   capture_output=True)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trace", default=str(TRACE))
    ap.add_argument("--copies", default="1,2,4,8")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--million", action="store_true", help="also a one-step trace of >= 1,000,000 kernels")
    ap.add_argument("--tmp", help="folder for the synthetic traces (default: a temporary one)")
    args = ap.parse_args()
    subprocess.run([PY, "-m", "compileall", "-q", str(ROOT / "tracekit")], check=True)
    src = Path(args.trace)
    print(f"{time.strftime('%Y-%m-%d %H:%M')}; {platform.node()}: {os.cpu_count()} CPUs, Python "
          f"{platform.python_version()}; load average {os.getloadavg()[0]:.1f}; SYNTHETIC one-step repeats of "
          f"{src.name} (bench/make_big.py --one-step); median of {args.repeat} interleaved rounds")
    with tempfile.TemporaryDirectory(dir=args.tmp) as d:
        tmp = Path(d)
        sizes = [int(x) for x in args.copies.split(",")]
        paths = {n: make(src, n, tmp / f"one_step_x{n}.json") for n in sizes}
        per_copy, steps = kernels_and_steps(paths[sizes[0]])
        per_copy //= sizes[0]
        got: dict[int, list] = {n: [] for n in sizes}
        for _ in range(args.repeat):
            for n in sizes:
                got[n].append(run_child([PY, "-c", TIMED, str(paths[n]), str(SMALL)]))
        res = {n: (*(statistics.median(x[i] for x in v) for i in range(4)), max(x[4] for x in v),
                   paths[n].stat().st_size) for n, v in got.items()}
        if args.million:
            n = -(-1_000_000 // per_copy)
            big = make(src, n, tmp / f"one_step_x{n}.json")
            res[n] = (*run_child([PY, "-c", TIMED, str(big), str(SMALL)]), big.stat().st_size)
    print(f"\none step ({steps} step(s) at {sizes[0]} cop{'y' if sizes[0] == 1 else 'ies'}); {per_copy:,} kernels a copy")
    print("| copies | kernels in the step | file MB | in process s (CPU s) | × 1 copy (CPU) | CPU µs per kernel "
          "| whole process s (CPU s) | × 1 copy (CPU) | peak RSS MB | RSS × its file | RSS × 1 copy's file |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    one = res[sizes[0]]
    one_size = one[5] / sizes[0]
    for n, (t, cpu, wall, wcpu, rss, size) in res.items():
        k, f = n * per_copy, sizes[0]
        print(f"| {n} | {k:,} | {size / 1e6:.0f} | {t:.2f} ({cpu:.2f}) | {t / one[0] * f:.2f} ({cpu / one[1] * f:.2f}) | "
              f"{cpu / k * 1e6:.1f} | {wall:.2f} ({wcpu:.2f}) | {wall / one[2] * f:.2f} ({wcpu / one[3] * f:.2f}) | "
              f"{rss / 1e6:.0f} | {rss / size:.2f} | {rss / one_size:.2f} |")


if __name__ == "__main__":
    main()
