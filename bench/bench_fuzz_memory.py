"""Issue 27's memory bound on the fuzz campaign's kinds of input: peak RSS <= 3x the input + the allowance.

The inputs are the fuzz harness's own (tests/fuzz/engine.py: mutated committed real traces and issue
27's hostile classes, so SYNTHETIC), made with its seed; the largest trace file of each kind among them
(kind: the file name less its digits; size: JSON bytes, gzip decompressed) are each run as ``python -m tracekit explain T -f json --no-cache``, a fresh
process, stdout to /dev/null; peak RSS is the process's own (os.wait4). The allowance is defined once,
in bench/bench_many_steps.py: the same command on the smallest committed real trace (40 KB: the process
with its imports). MB are 10^6 bytes; file names are printed as ascii().

    python bench/bench_fuzz_memory.py [--cases 300] [--seed 1] [--largest 12]
"""

from __future__ import annotations

import argparse
import gzip
import os
import platform
import random
import re
import sys
import tempfile
import zlib
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path[:0] = [str(ROOT / "tests"), str(ROOT), str(HERE)]

from bench_many_steps import TINY, allowance, run  # noqa: E402
from fuzz import engine  # noqa: E402


def json_bytes(path: Path) -> int:
    with open(path, "rb") as f:
        gz = f.read(2) == b"\x1f\x8b"
    if not gz:
        return path.stat().st_size
    n = 0
    try:
        with gzip.open(path) as f:
            for b in iter(lambda: f.read(1 << 20), b""):
                n += len(b)
    except (OSError, EOFError, zlib.error):         # a mutated gzip (trailing junk, cut short): what came out
        pass
    return max(n, path.stat().st_size)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", type=int, default=300)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--largest", type=int, default=12, help="kinds shown, largest first")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        rng, traces = random.Random(args.seed), set()
        for k in range(args.cases):
            d = work / f"c{k}"
            d.mkdir()
            case = engine.make_case(rng, d, k)
            for cmd in case.commands:
                if cmd and cmd[0] == "explain" and len(cmd) > 1:
                    p = Path(cmd[1])
                    if p.is_file() and p.name.endswith((".json", ".json.gz")):
                        traces.add(p)
        kinds: dict = {}                                  # the largest input of each kind (file name less digits)
        for size, p in sorted(((json_bytes(p), p) for p in traces), key=lambda t: -t[0]):
            kinds.setdefault(re.sub(r"\d+", "", p.name), (size, p))
        sized = sorted(kinds.values(), key=lambda t: -t[0])[:args.largest]
        base = allowance("json")
        print(f"# fuzz inputs (SYNTHETIC: tests/fuzz/engine.py, seed {args.seed}, {args.cases} cases, "
              f"{len(traces)} trace files of {len(kinds)} kinds), the largest of each; python {platform.python_version()}, "
              f"{os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}")
        print(f"# allowance: explain -f json --no-cache of {TINY.name} (40 KB): {base['rss_mb']:.1f} MB peak RSS")
        print(f"{'case/input':<44} {'JSON MB':>8} {'exit':>4} {'cpu s':>6} {'peak MB':>8} {'bound MB':>9}  verdict")
        for size, p in sized:
            r = run([sys.executable, "-m", "tracekit", "explain", str(p), "-f", "json", "--no-cache"])
            bound = 3 * size / 1e6 + base["rss_mb"]
            name = ascii(f"{p.parent.name}/{p.name}")[1:-1][:44]
            print(f"{name:<44} {size / 1e6:8.2f} {r['code']:4d} {r['cpu']:6.2f} {r['rss_mb']:8.1f} {bound:9.1f}  "
                  f"{'ok' if r['rss_mb'] <= bound else 'OVER'}")


if __name__ == "__main__":
    main()
