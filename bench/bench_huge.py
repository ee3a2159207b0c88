"""Issue 14 item 2: a trace bigger than memory would allow as one document, read in chunks.

Makes a SYNTHETIC trace of N repeats of a real one (bench/make_big.py: shifted timestamps, fresh ids,
gzipped) in a temporary folder unless --trace names one, then times `load_trace` (and, with
--explain, `tracekit explain -f json --no-cache`) in a fresh process and reports the wall time and the
process's peak RSS. The file is deleted afterwards unless --keep.

    python bench/bench_huge.py [--copies 100] [--source TRACE.json.gz] [--explain] [--keep]
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
CODE = """
import os, resource, sys, time
os.environ["TRACEKIT_NO_CACHE"] = "1"
path, what = sys.argv[1], sys.argv[2]
def rss(): return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
if what == "load":
    from tracekit.load.kineto import load_trace
    base = rss(); t = time.perf_counter()
    trace = load_trace(path)
    t = time.perf_counter() - t
    print("RESULT", t, base, rss(), len(trace.kernels), len(trace.steps))
else:
    from tracekit.cli.app import run
    base = rss(); t = time.perf_counter()
    out = os.dup(1); null = os.open(os.devnull, os.O_WRONLY); os.dup2(null, 1)
    code = run(["explain", path, "-f", "json", "--no-cache"])
    sys.stdout.flush(); os.dup2(out, 1)
    t = time.perf_counter() - t
    print("RESULT", t, base, rss(), code, 0)
"""


def measure(path: Path, what: str) -> list[str]:
    out = subprocess.run([sys.executable, "-c", CODE, str(path), what], capture_output=True, text=True)
    line = [x for x in out.stdout.splitlines() if x.startswith("RESULT")]
    if out.returncode != 0 or not line:
        raise SystemExit(f"{what} failed:\n{out.stderr[-3000:]}")
    return line[-1].split()[1:]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--copies", type=int, default=100)
    ap.add_argument("--source", default=str(HERE / "traces" / "big_train_24layers_6steps.json.gz"))
    ap.add_argument("--trace", help="an existing (synthetic) trace instead of making one")
    ap.add_argument("--explain", action="store_true", help="also time the whole explain -f json")
    ap.add_argument("--keep", action="store_true")
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="tracekit-synthetic-"))
    path = Path(args.trace) if args.trace else tmp / f"synthetic_{args.copies}x.json.gz"
    json_bytes = None
    if not args.trace:
        t = time.perf_counter()
        made = subprocess.run([sys.executable, str(HERE / "make_big.py"), args.source, str(args.copies), str(path)],
                              check=True, capture_output=True, text=True).stdout
        json_bytes = int(re.search(r"(\d+) bytes of JSON", made).group(1))
        print(f"made {path} in {time.perf_counter() - t:.0f} s: SYNTHETIC, {args.copies} copies of {args.source}")
    size = path.stat().st_size
    print(f"{path.name}: {size / 1e9:.2f} GB gzipped" + (f", {json_bytes / 1e9:.2f} GB of JSON" if json_bytes else ""))
    print("| what | seconds | MB/s of JSON | peak RSS | peak RSS growth | × JSON size |")
    print("|---|---|---|---|---|---|")
    for what in ["load"] + (["explain"] if args.explain else []):
        t, base, peak, *rest = measure(path, what)
        t, base, peak = float(t), int(base), int(peak)
        rate = f"{json_bytes / t / 1e6:.0f}" if json_bytes else "-"
        ratio = f"{(peak - base) / json_bytes:.2f}" if json_bytes else "-"
        label = "load_trace" if what == "load" else "explain -f json --no-cache"
        extra = f" ({rest[0]} rows, {rest[1]} steps)" if what == "load" else ""
        print(f"| {label}{extra} | {t:.1f} | {rate} | {peak / 1e6:.0f} MB | {(peak - base) / 1e6:.0f} MB | {ratio} |")
    if not args.keep and not args.trace:
        path.unlink()
        tmp.rmdir()
    elif not args.trace:
        print(f"kept {path}")


if __name__ == "__main__":
    main()
