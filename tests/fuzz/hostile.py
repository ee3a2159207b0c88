"""Issue 27's input classes for the fuzz engine: output paths, overflowing numbers, spec values, hostile
names (kernel names and file names) and capture-script behaviours (these need torch; each capture runs
in a subprocess, ``engine.run_case``).

Each maker returns an ``engine.Case``; ``unchanged`` names files whose bytes must survive the run (an
output path that is an input), ``expect`` the exit codes a gate or a refusal must give, ``after`` a
check of what the run left (a capture bundle)."""

from __future__ import annotations

import gzip
import importlib.util
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
HOSTILE_FILE_NAMES = [b"\xff\xfe.json.gz", b"y" * 247 + b".json.gz", b"run[0]*?.json.gz", b"-f.json.gz",
                      b"a\nb.json.gz", b"\x1b[31m.json.gz", b" .json.gz"]
NCCL = ROOT / "tests" / "data" / "peers" / "tracelens" / "b200__eager_trace.json.gz"


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
    if rng.random() < 0.25:                  # ranks --keep aimed at its input folder, a rank, a file, foreign files
        ranks = workdir / "ranks"
        ranks.mkdir()
        for r in (0, 1):
            shutil.copy(src, ranks / f"rank{r}.json.gz")
        foreign = workdir / "mine"
        foreign.mkdir()
        (foreign / "notes.txt").write_text("mine")
        target = rng.choice([ranks, ranks / "rank0.json.gz", existing, foreign, Path("/dev/full")])
        return case_cls("outputs", f"ranks --keep {target.name}",
                        [["ranks", str(ranks), "--keep", str(target), "--workers", "1"]], [ranks], {2},
                        unchanged={ranks / "rank0.json.gz": src.read_bytes(), existing: b"mine",
                                   foreign / "notes.txt": b"mine"})
    target = rng.choice([trace, link, hard, workdir, existing, Path("/dev/full"), workdir / "no" / "x.html",
                         workdir / ("x" * 300), existing / "under-a-file.html"])
    option = rng.choice(["--html", "--perfetto", "--xlsx"])
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


def nccl_case(rng: random.Random, workdir: Path, k: int, sources: list[Path], case_cls):
    """TraceLens's real B200 trace with its all_gather's message size out of range (1e308 gave a
    ZeroDivisionError): no internal error, the row just has no cost."""
    doc = orjson.loads(gzip.decompress(NCCL.read_bytes()))
    value = rng.choice(["__HUGE__", 1e308, 2 ** 62, 2 ** 53 + 1, -1, 0, "nan", 1.5, [], None, "__BIGINT__"])
    for e in doc["traceEvents"]:
        args = e.get("args") if isinstance(e, dict) else None
        if isinstance(args, dict) and "In msg nelems" in args:
            args[rng.choice(["In msg nelems", "Out msg nelems", "Group size"])] = value
    path = workdir / f"nccl{k}.json"
    path.write_bytes(orjson.dumps(doc).replace(b'"__HUGE__"', b"1e400").replace(b'"__BIGINT__"', b"1" * 30))
    return case_cls("overflow", f"NCCL message field = {value!r}", [["explain", str(path)]], [path])


def file_name_case(rng: random.Random, workdir: Path, k: int, sources: list[Path], case_cls):
    """A real trace under a hostile file name (not UTF-8, 255 bytes, glob characters, a leading '-', a
    newline, an escape): read and named like any other; as ranks in a folder of such names too."""
    src = rng.choice(sources[:4])
    name = rng.choice(HOSTILE_FILE_NAMES)
    folder = os.path.join(os.fsencode(str(workdir)), rng.choice([b"d", b"run[0]*?", b"\xff"]))
    os.mkdir(folder)
    path = os.fsdecode(os.path.join(folder, name))
    shutil.copy(src, path)
    command = rng.choice([["explain", path], ["diff", path, str(src), "-f", "json"],
                          ["ranks", os.fsdecode(folder), "--workers", "1"]])
    if command[0] == "ranks":
        shutil.copy(src, os.fsdecode(os.path.join(folder, b"rank1.json.gz")))
    return case_cls("names", f"file name {name[:40]!r}", [command], [Path(path)], {0, 1})


# a captured script's behaviours that once lost or hung the bundle (docs/limits.md, capture)
SCRIPT_HEAD = "import sys, os, gzip, torch\nout = sys.argv[1]\nm = torch.nn.Linear(8, 4)\nfor _ in range(2):\n    m(torch.ones(3, 8))\n"
SCRIPT_TAILS = {
    "writes meta.json": ("open(out + '/meta.json', 'w').write('{\"mine\": 1}')\n", 0),
    "writes trace.json.gz": ("gzip.open(out + '/trace.json.gz', 'wt').write('{\"mine\": 2}')\n", 0),
    "writes et.json.gz": ("gzip.open(out + '/et.json.gz', 'wt').write('{\"mine\": 3}')\n", 0),
    "removes its -o folder": ("import shutil\nshutil.rmtree(out)\n", 0),
    "forks a child that runs to the end": ("pid = os.fork()\nif pid == 0:\n    sys.exit(0)\nos.waitpid(pid, 0)\n", 0),
    "os._exit(3) from a thread": ("import threading\nt = threading.Thread(target=lambda: os._exit(3))\n"
                                  "t.start()\nt.join()\n", 3),
    "sys.exit(5)": ("sys.exit(5)\n", 5),
    "closes stdout": ("os.close(1)\n", 0),
}


def capture_case(rng: random.Random, workdir: Path, k: int, sources: list[Path], case_cls):
    """``tracekit capture`` of a small torch script that does one to two of SCRIPT_TAILS: the exit code is
    the script's, meta.json is tracekit's ('done'), trace.json.gz is the profile (the script's 2 linear
    calls), and a file the script wrote under one of tracekit's names is kept as script-<name>."""
    picked = rng.sample(sorted(SCRIPT_TAILS), rng.choice([1, 2]))
    if "os._exit(3) from a thread" in picked and "sys.exit(5)" in picked:
        picked.remove("sys.exit(5)")
    # writes before the folder's removal, an exit last (the script ends there)
    picked.sort(key=lambda b: 2 if "exit" in b else 1 if b == "removes its -o folder" else 0)
    script = workdir / "job.py"
    script.write_text(SCRIPT_HEAD + "".join(SCRIPT_TAILS[b][0] for b in picked))
    code = next((SCRIPT_TAILS[b][1] for b in picked if SCRIPT_TAILS[b][1]), 0)
    out = workdir / "out"

    def after() -> list[str]:
        bad = []
        try:
            meta = orjson.loads((out / "meta.json").read_bytes())
            events = orjson.loads(gzip.decompress((out / "trace.json.gz").read_bytes()))["traceEvents"]
        except (OSError, ValueError, KeyError, TypeError) as exc:
            return [f"capture left no readable bundle ({exc})"]
        if meta.get("state") != "done" or meta.get("exit_code") != code:
            bad.append(f"meta.json says state {meta.get('state')!r}, exit {meta.get('exit_code')!r}")
        if sum(isinstance(e, dict) and e.get("name") == "aten::linear" for e in events) != 2:
            bad.append("trace.json.gz is not the profile of the script's 2 linear calls")
        for b, name in (("writes meta.json", "meta.json"), ("writes trace.json.gz", "trace.json.gz"),
                        ("writes et.json.gz", "et.json.gz")):
            if b in picked and "removes its -o folder" not in picked[picked.index(b):] \
                    and not (out / f"script-{name}").is_file():
                bad.append(f"the script's own {name} was not kept as script-{name}")
        return bad

    return case_cls("capture", " + ".join(picked), [["capture", str(script), "-o", str(out), "-q", "--", str(out)]],
                    [script], {code}, after=after)


MAKERS = [output_case, spec_case, overflow_case, names_case, nccl_case, file_name_case]
# a capture starts Python and imports torch (5-10 s): its own short seeded run in CI, and in run.py --capture
CAPTURE_MAKERS = [capture_case] if importlib.util.find_spec("torch") is not None else []
