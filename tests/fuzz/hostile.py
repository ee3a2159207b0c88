"""Issue 27's input classes for the fuzz engine: output paths, overflowing numbers, spec values and
hostile names (capture-script behaviours need torch and a subprocess each: tests/test_robust_outputs.py).

Each maker returns an ``engine.Case``; ``unchanged`` names files whose bytes must survive the run (an
output path that is an input), ``expect`` the exit codes a gate or a refusal must give."""

from __future__ import annotations

import gzip
import os
import random
import shutil
from pathlib import Path

import orjson

ROOT = Path(__file__).resolve().parents[2]
H200_SPEC = ROOT / "tracekit" / "specs" / "h200.toml"
BAD_SPEC_VALUES = ["1e-300", "inf", "nan", "5e-324", "1e308", "0", "-1", "1e6", "-inf"]
SPEC_NUMBERS = ["value = 4800,", "value = 989.5,", "value = 0.96,", "value = 450,", "value = 67.0,"]
HOSTILE_TOKENS = ["cutlass", "triton_tem_fused_", "cudnn::", "(a+)+", "[/]", "\x1b[31m", "é"]


def output_case(rng: random.Random, workdir: Path, k: int, sources: list[Path], case_cls):
    """explain with --html/--perfetto aimed at the input (by path, symbolic or hard link, its folder), at
    a device, a missing folder, a name past 255 bytes or an existing file without --force: exit 2, and
    the input and the existing file are left as they were."""
    src = rng.choice(sources[:4])
    trace = workdir / f"in{k}.json.gz"
    shutil.copy(src, trace)
    existing = workdir / "existing.html"
    existing.write_text("mine")
    link = workdir / "link.json.gz"
    link.symlink_to(trace)
    hard = workdir / "hard.json.gz"
    os.link(trace, hard)
    target = rng.choice([trace, link, hard, workdir, existing, Path("/dev/full"), workdir / "no" / "x.html",
                         workdir / ("x" * 300)])
    option = rng.choice(["--html", "--perfetto"])
    return case_cls("outputs", f"{option} {target.name}", [["explain", str(trace), option, str(target)]],
                    [trace], {2}, unchanged={trace: trace.read_bytes(), existing: b"mine"})


def spec_case(rng: random.Random, workdir: Path, k: int, sources: list[Path], case_cls):
    """A spec file with one number out of its sane range: exit 2 (one line) whatever the command."""
    text = H200_SPEC.read_text()
    number = rng.choice(SPEC_NUMBERS)
    spec = workdir / f"spec{k}.toml"
    value = rng.choice(BAD_SPEC_VALUES)
    spec.write_text(text.replace(number, f"value = {value},", 1))
    src = rng.choice(sources[:4])
    command = rng.choice([["explain", str(src), "--spec", str(spec)],
                          ["diff", str(src), str(src), "--spec", str(spec), "-f", "json"]])
    return case_cls("spec", f"h200.toml: {number} -> {value}", [command], [spec], {2})


def overflow_case(rng: random.Random, workdir: Path, k: int, sources: list[Path], case_cls):
    """An H200 trace whose ops claim negative or overflowing dims, checked against max_gap ≤ 1.0× (no
    real step runs at its roofline): the gate fails (exit 1); an absurd floor used to make it pass."""
    src = rng.choice(sources[:3])
    doc = orjson.loads(gzip.decompress(src.read_bytes()))
    bad = rng.choice([[[-4, 8]], [[2 ** 40, 2 ** 40]], [[2 ** 62]], [[2 ** 31, 2 ** 31, 2 ** 31]]])
    for e in doc["traceEvents"]:
        args = e.get("args") if isinstance(e, dict) else None
        if isinstance(args, dict) and isinstance(args.get("Input Dims"), list) and rng.random() < 0.5:
            args["Input Dims"] = [bad[0] if isinstance(d, list) and d else d for d in args["Input Dims"]]
    path = workdir / f"dims{k}.json"
    path.write_bytes(orjson.dumps(doc))
    rules = workdir / "gap.toml"
    rules.write_text("[max_gap]\nall = 1.0\n")
    return case_cls("overflow", f"{src.name}: Input Dims {bad}", [["check", str(path), "--rules", str(rules)]],
                    [path, rules], {1})


def names_case(rng: random.Random, workdir: Path, k: int, sources: list[Path], case_cls):
    """A trace whose kernel names are a 100 KB repetition of a token a quadratic regex choked on."""
    src = rng.choice(sources[:4])
    doc = orjson.loads(gzip.decompress(src.read_bytes()))
    token = rng.choice(HOSTILE_TOKENS)
    name = token * (100_000 // len(token)) + rng.choice(["", "gemm", "addmm_0", "_tensorop"])
    for e in doc["traceEvents"]:
        if isinstance(e, dict) and e.get("cat") == "kernel" and rng.random() < 0.5:
            e["name"] = name
    path = workdir / f"names{k}.json"
    path.write_bytes(orjson.dumps(doc))
    return case_cls("names", f"{src.name}: kernels named {token!r} x {len(name) // max(1, len(token))}",
                    [["explain", str(path)]], [path])


MAKERS = [output_case, spec_case, overflow_case, names_case]
