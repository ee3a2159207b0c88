"""The long fuzz run (not in CI): ``python tests/fuzz/run.py --cases 5000 [--seed 1] [--jobs 2]``.

Each case runs in a forked child with a time limit, so a hang or a crash (a segfault) is a finding,
not the end of the run. Failing inputs are kept under --keep (default fuzz-failures/) with a
failures.json that names each case, its mutations, the commands and what went wrong; the last line
printed gives the figures: cases, seconds, failures, hangs."""

from __future__ import annotations

import argparse
import json
import os
import random
import select
import shutil
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent), str(HERE.parents[1])]      # tests/ (for fuzz.engine) and the repository

from fuzz import engine  # noqa: E402


def _start(case: engine.Case):
    """Fork a child that runs one case and writes its problems as JSON to a pipe."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:                                      # child
        os.close(r)
        try:
            out = json.dumps(engine.run_case(case)).encode()
        except BaseException as exc:                  # noqa: BLE001 - the harness itself failed
            out = json.dumps([f"harness error: {exc!r}"]).encode()
        with os.fdopen(w, "wb") as fh:
            fh.write(out)
        os._exit(0)
    os.close(w)
    return pid, r


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--jobs", type=int, default=max(1, (os.cpu_count() or 2)))
    ap.add_argument("--timeout", type=float, default=60.0, help="seconds one case may take (a hang beyond)")
    ap.add_argument("--keep", default="fuzz-failures", help="folder for failing inputs")
    ap.add_argument("--capture", action="store_true",
                    help="a tenth of the cases capture a misbehaving torch script (5-10 s each)")
    args = ap.parse_args()
    engine.invoke(["--help"])                         # import everything once, before forking
    work = Path(tempfile.mkdtemp(prefix="tracekit-fuzz-"))
    keep = Path(args.keep)
    rng, t0, failures, running, done = random.Random(args.seed), time.perf_counter(), [], {}, 0
    k = 0
    while k < args.cases or running:
        while k < args.cases and len(running) < args.jobs:
            case_dir = work / f"c{k}"
            case_dir.mkdir()
            case = engine.make_case(rng, case_dir, k, capture=args.capture)
            pid, fd = _start(case)
            running[fd] = (pid, k, case, case_dir, time.perf_counter(), bytearray())
            k += 1
        ready, _, _ = select.select(list(running), [], [], 0.5)
        for fd in ready:
            chunk = os.read(fd, 1 << 16)
            if chunk:
                running[fd][5].extend(chunk)
                continue
            pid, n, case, case_dir, start, buf = running.pop(fd)
            os.close(fd)
            _, status = os.waitpid(pid, 0)
            try:
                bad = json.loads(buf) if buf else [f"child died (wait status {status})"]
            except ValueError:
                bad = [f"child wrote no result (wait status {status})"]
            done += 1
            _finish(n, case, case_dir, bad, failures, keep)
        now = time.perf_counter()
        for fd, (pid, n, case, case_dir, start, _) in list(running.items()):
            if now - start > args.timeout:
                os.kill(pid, 9)
                os.waitpid(pid, 0)
                os.close(fd)
                running.pop(fd)
                done += 1
                _finish(n, case, case_dir, [f"hang: no result after {args.timeout:g} s"], failures, keep)
        if done and done % 500 == 0 and not ready:
            pass
    shutil.rmtree(work, ignore_errors=True)
    if failures:
        keep.mkdir(parents=True, exist_ok=True)
        (keep / "failures.json").write_text(json.dumps(failures, indent=1))
    hangs = sum(any(p.startswith("hang") for p in f["problems"]) for f in failures)
    print(f"cases {args.cases}, seed {args.seed}, {time.perf_counter() - t0:.1f} s, failures {len(failures)}, "
          f"hangs {hangs}" + (f" (inputs and failures.json in {keep}/)" if failures else ""))
    return 1 if failures else 0


def _finish(n: int, case: engine.Case, case_dir: Path, bad: list[str], failures: list, keep: Path) -> None:
    if bad:
        dest = keep / f"case{n}"
        shutil.rmtree(dest, ignore_errors=True)
        shutil.copytree(case_dir, dest)
        failures.append({"case": n, "kind": case.kind, "note": case.note, "commands": case.commands,
                         "problems": bad, "inputs": str(dest)})
        print(f"case {n} ({case.kind}: {case.note}): {bad[0][:200]}", file=sys.stderr)
    shutil.rmtree(case_dir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
