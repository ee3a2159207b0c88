"""Fuzzing tracekit's CLI with mutations of committed real traces (synthetic inputs made from real ones).

``make_case(rng, workdir)`` writes one mutated input (a trace, an explain JSON baseline, a rules file or
an MLX shape sidecar, changed by one to three mutations: fields dropped, retyped or duplicated, events
truncated, types swapped, huge numbers, NaN strings, wrong nesting, gzip damage) and says which commands
to run on it; ``run_case`` runs them in process (typer's CliRunner on ``tracekit.cli.app:app``, a
TracekitError counted as exit 2 the way ``tracekit.cli.app.main`` counts it) and returns what is wrong:

- an exit code outside {0, 1, 2}, or an exception other than TracekitError (an internal error);
- "Traceback" or "internal error" in the output;
- stderr lines that are not one ``tracekit: ...`` line each (an error must be one line);
- explain giving different exit codes as a table, JSON and CSV, or JSON that does not parse.

tests/test_fuzz.py runs a few hundred cases with a fixed seed; tests/fuzz/run.py runs as many as asked.
"""

from __future__ import annotations

import copy
import gzip
import json
import random
import shutil
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import orjson

ROOT = Path(__file__).resolve().parents[2]
H200 = ROOT / "captures" / "h200"
PEERS = ROOT / "tests" / "data" / "peers"
MLX = ROOT / "captures" / "mlx" / "seed_lazy_bf16_b128" / "graphs"          # 001.dot: 845 bytes
# small real traces (a few KB): eager, compiled, CUDA graph capture + replay, AMD, CPU-only, Triton
SOURCES = [H200 / "seed_eager_b1.json.gz", H200 / "seed_compile_b128.json.gz",
           H200 / "seed_max-autotune-no-cudagraphs_b1.json.gz", H200 / "graph_replay_only_b128.json.gz",
           PEERS / "hta/triton_example_triton_example.json.gz",
           PEERS / "hta/critical_path_cuda_event_sync_multi_stream_event_sync_trace.json.gz",
           PEERS / "hta/cpu_only_rank-34.Jul_15_10_52_41.1074.pt.trace.json.gz",
           PEERS / "tracelens/torch_compile_triton__trace.json.gz",
           PEERS / "hta/amd_trace_mi250_minitoy_train_ROCm6_2_kineto.json.gz"]
RULES = """[kernels_per_step]
max = 1000
[[forbid]]
pattern = "^Memcpy .*Pageable"
field = "name"
[[must_fuse]]
ops = ["mm", "add"]
min_per_step = 0
[max_gap]
all = 100000.0
"""
# placeholders replaced in the JSON text: values orjson will not write (deep nesting, huge ints, NaN)
TEXT_VALUES = {"__DEEP__": "[" * 900 + "]" * 900, "__BIGINT__": "123456789012345678901234567890",
               "__HUGE__": "1e400", "__NAN__": "NaN", "__DEEPOBJ__": '{"a":' * 300 + "1" + "}" * 300}
JUNK = [None, "", "nan", "NaN", "inf", "-inf", "abc", "-1", "12", [], {}, [1, 2], {"a": 1}, True, False, 0, -1,
        -5.5, 1e300, -1e300, 1.7e308, 2 ** 62, 0.5, "[/]", "[link=http://x]evil[/link]", "a\nb\x00c\x1b[31m\u2028",
        "x" * 20000, "(a+)+$" * 3, list(TEXT_VALUES)[0], "__BIGINT__", "__HUGE__", "__NAN__", "__DEEPOBJ__",
        [[1, 2], [3]], [["x"]], [[True]], [None], ["__DEEP__"]]
EVENT_KEYS = ["name", "ts", "dur", "ph", "cat", "args", "tid", "pid", "id"]
ARG_KEYS = ["correlation", "External id", "Input Dims", "Input type", "Input Strides", "Concrete Inputs", "bytes",
            "grid", "block", "kernel_file", "device", "stream", "kernel"]
DEVICE_CATS = {"kernel", "gpu_memcpy", "gpu_memset", "Kernel", "Memcpy", "Memset"}
FORMATS = ("table", "json", "csv")

_cache: dict = {}


def source_doc(path: Path) -> dict:
    if path not in _cache:
        doc = orjson.loads(gzip.decompress(path.read_bytes()))
        _cache[path] = {"traceEvents": doc} if isinstance(doc, list) else doc
    return copy.deepcopy(_cache[path])


def _junk(rng: random.Random):
    return copy.deepcopy(rng.choice(JUNK))


def _cat(e: dict) -> str | None:
    cat = e.get("cat")
    return cat if isinstance(cat, str) else None


def _pick_event(rng: random.Random, events: list):
    """A random event, half the time one the loader keeps (device, launch, op, step)."""
    dicts = [e for e in events if isinstance(e, dict)]
    if not dicts:
        return None
    kept = [e for e in dicts if _cat(e) in DEVICE_CATS | {"cuda_runtime", "cpu_op", "user_annotation",
                                                             "cuda_driver", "hip_runtime"}]
    return rng.choice(kept if kept and rng.random() < 0.7 else dicts)


def m_field(rng, doc):
    e = _pick_event(rng, doc["traceEvents"])
    if e is not None:
        key = rng.choice(EVENT_KEYS)
        if rng.random() < 0.3:
            e.pop(key, None)
        else:
            e[key] = _junk(rng)


def m_args(rng, doc):
    e = _pick_event(rng, doc["traceEvents"])
    if e is None:
        return
    args = e.get("args")
    if not isinstance(args, dict):
        e["args"] = args = {}
    key = rng.choice(list(args) + ARG_KEYS) if args and rng.random() < 0.5 else rng.choice(ARG_KEYS)
    if rng.random() < 0.3:
        args.pop(key, None)
    else:
        args[key] = _junk(rng)


def m_duplicate(rng, doc):
    ev = doc["traceEvents"]
    e = _pick_event(rng, ev)
    if e is not None:
        for _ in range(rng.choice([1, 2, 50])):
            d = copy.deepcopy(e)
            if rng.random() < 0.5 and isinstance(d.get("ts"), (int, float)):
                d["ts"] = d["ts"] + rng.uniform(-100, 100)
            ev.insert(rng.randrange(len(ev) + 1), d)


def m_drop(rng, doc):
    ev = doc["traceEvents"]
    if not ev:
        return
    if rng.random() < 0.5:
        del ev[rng.randrange(len(ev))]
    else:                                       # every event of one category
        cat = rng.choice([_cat(e) for e in ev if isinstance(e, dict)] or [None])
        doc["traceEvents"] = [e for e in ev if not isinstance(e, dict) or _cat(e) != cat]


def m_truncate_events(rng, doc):
    ev = doc["traceEvents"]
    doc["traceEvents"] = ev[: rng.randrange(len(ev) + 1)] if ev else ev


def m_shuffle(rng, doc):
    rng.shuffle(doc["traceEvents"])


def m_ph(rng, doc):
    for e in doc["traceEvents"]:
        if isinstance(e, dict) and _cat(e) in DEVICE_CATS and rng.random() < 0.3:
            if rng.random() < 0.3:
                e.pop("ph", None)
            else:
                e["ph"] = rng.choice(["B", "E", "i", "x", "", 1])


def m_huge(rng, doc):
    e = _pick_event(rng, doc["traceEvents"])
    if e is not None:
        e[rng.choice(["ts", "dur"])] = rng.choice([1e300, -1e300, 1e16, 9e17, -1, 2 ** 62, "__HUGE__", "nan", "1e5"])


def m_names(rng, doc):
    for e in doc["traceEvents"]:
        if isinstance(e, dict) and rng.random() < 0.1:
            e["name"] = rng.choice(["[/]", "[bold]x[/]", "[link=file:///etc/passwd]k[/link]", "k\n\x00\x07",
                                    "ProfilerStep#" + "9" * 5000, "x" * 100000, "tracekit::graph_capture#1",
                                    "tracekit::graph_replay#" + "1" * 30, "cudaStreamBeginCapture", 7, None])


def m_nesting(rng, doc):
    ev = doc["traceEvents"]
    if not ev:
        return
    k = rng.randrange(len(ev))
    choice = rng.random()
    if choice < 0.3:
        ev[k] = [ev[k]]                                       # an event inside a list
    elif choice < 0.6 and isinstance(ev[k], dict):
        ev[k]["args"] = [ev[k].get("args")]                   # args inside a list
    else:
        doc["traceEvents"] = {"traceEvents": ev} if rng.random() < 0.5 else [ev]


def m_top(rng, doc):
    choice = rng.random()
    if choice < 0.4:
        doc["deviceProperties"] = rng.choice([{"name": "NVIDIA H100"}, 5, "H200", [5], [{"name": 7}], [{}], None,
                                              [{"name": "x" * 100000}], [{"name": "[/]"}], [[]],
                                              [{"name": "NVIDIA H200", "totalGlobalMem": "lots"}]])
    elif choice < 0.6:
        doc["traceEvents"] = _junk(rng)
    elif choice < 0.8:
        doc["traceEvents"] = [] if rng.random() < 0.5 else [{"ph": "M", "name": "process_name", "pid": 1}]
    else:
        doc.pop("traceEvents", None)


def m_shapes(rng, doc):
    ops = [e for e in doc["traceEvents"] if isinstance(e, dict) and isinstance(e.get("args"), dict)
           and "Input Dims" in e["args"]]
    if ops:
        args = rng.choice(ops)["args"]
        key = rng.choice(["Input Dims", "Input type", "Input Strides", "Concrete Inputs"])
        val = args.get(key)
        if isinstance(val, list) and val and rng.random() < 0.5:
            val.pop(rng.randrange(len(val)))                  # lengths no longer agree
        else:
            args[key] = rng.choice([["__DEEP__"], [[-1, 2]], [[2 ** 62, 2 ** 62]], [[1.5]], "2x2", [[[[[1]]]]],
                                    [None], [[]], [["a"]]])


TRACE_MUTATIONS = [m_field, m_field, m_args, m_args, m_duplicate, m_drop, m_truncate_events, m_shuffle, m_ph,
                   m_huge, m_names, m_nesting, m_top, m_shapes, m_shapes]


def encode(doc, rng: random.Random, gz_ok: bool = True) -> tuple[bytes, str]:
    """JSON bytes (placeholders replaced), sometimes cut short, gzipped or with damaged gzip."""
    text = orjson.dumps(doc)
    for key, value in TEXT_VALUES.items():
        text = text.replace(f'"{key}"'.encode(), value.encode())
    if rng.random() < 0.08:
        text = text[: rng.randrange(len(text) + 1)]
    if not gz_ok or rng.random() < 0.5:
        return text, ".json"
    raw = gzip.compress(text, 1)
    r = rng.random()
    if r < 0.05:
        raw = raw[: rng.randrange(len(raw) + 1)]
    elif r < 0.08:
        k = rng.randrange(10, len(raw)) if len(raw) > 10 else 0
        raw = raw[:k] + bytes([raw[k] ^ 0x55]) + raw[k + 1:] if raw else raw
    elif r < 0.1:
        raw = raw + rng.choice([b"\x00" * 8, b"garbage", gzip.compress(b" ")])
    return raw, ".json.gz"


@dataclass
class Case:
    kind: str
    note: str
    commands: list[list[str]]           # each run; "explain" ones in every format
    files: list[Path] = field(default_factory=list)
    expect: set[int] | None = None      # exit codes the input must give (a gate fails closed), if known
    unchanged: dict = field(default_factory=dict)   # file → bytes it must still hold after the run
    after: object = None                # () -> problems with what the run left (a capture bundle)


def _trace_case(rng, workdir: Path, k: int) -> Case:
    src = rng.choice(SOURCES)
    doc = source_doc(src)
    muts = [rng.choice(TRACE_MUTATIONS) for _ in range(rng.choice([1, 1, 2, 3]))]
    for m in muts:
        if isinstance(doc.get("traceEvents"), list):
            m(rng, doc)
    raw, suffix = encode(doc, rng)
    path = workdir / f"case{k}{suffix}"
    path.write_bytes(raw)
    note = f"{src.name}: {'+'.join(m.__name__ for m in muts)}"
    r = rng.random()
    if r < 0.6:
        extra = ["--step-marker", rng.choice(["ProfilerStep", "^aten::", "(a|b)+"])] if rng.random() < 0.1 else []
        return Case("explain", note, [["explain", str(path), *extra]], [path])
    if r < 0.8:
        rules = workdir / f"case{k}.toml"
        rules.write_text(RULES)
        return Case("check", note, [["check", str(path), "--rules", str(rules), "--baseline", str(src), "-f",
                                     rng.choice(["text", "json", "junit", "github"])]], [path, rules])
    return Case("diff", note, [["diff", str(src), str(path), "-f", rng.choice(["text", "json", "markdown"]),
                                "--fail-on-regression"]], [path])


def _explain_json_case(rng, workdir: Path, k: int) -> Case:
    src = rng.choice(SOURCES[:4])
    key = ("explain", src)
    if key not in _cache:
        out = invoke(["explain", str(src), "-f", "json"])
        _cache[key] = orjson.loads(out.stdout)
    doc = copy.deepcopy(_cache[key])
    for _ in range(rng.choice([1, 2])):
        part = rng.choice(["steps", "kernels", "summary", "device", "top"])
        if part == "top":
            doc[rng.choice(["steps", "kernels", "summary", "device"])] = _junk(rng)
        elif isinstance(doc.get(part), list) and doc[part]:
            row = rng.choice(doc[part])
            if isinstance(row, dict) and row:
                row[rng.choice(list(row))] = _junk(rng)
        elif isinstance(doc.get(part), dict) and doc[part]:
            doc[part][rng.choice(list(doc[part]))] = _junk(rng)
    raw, suffix = encode(doc, rng)
    path = workdir / f"case{k}.explain{suffix}"
    path.write_bytes(raw)
    return Case("explain-json", f"{src.name} explain JSON", [["check", str(src), "--baseline", str(path)],
                                                              ["diff", str(path), str(src), "-f", "json"]], [path])


RULE_VALUES = ["nan", "inf", "-inf", "-1", "0", "1e308", '"x"', "[]", "{}", "true", '"(a+)+$"', '"(.)\\\\1"',
               '"(("', '"a{99999999999}"', '"(?:ab|a)*c"', '"[/]"', '"x"']
REFUSED_VALUES = {"nan", "inf", "-inf", '"(a+)+$"', '"(.)\\\\1"', '"(("', '"a{99999999999}"', '"(?:ab|a)*c"'}
NO_RULE = ([], ["description = \"nothing\""], ["[baseline]", "kernels = false", "fused = false", "time = false"])


def _rules_case(rng, workdir: Path, k: int) -> Case:
    lines = rng.choice([
        ["[baseline]", f"tolerance = {rng.choice(RULE_VALUES)}"],
        ["[kernels_per_step]", f"max = {rng.choice(RULE_VALUES)}"],
        ["[[forbid]]", f"pattern = {rng.choice(RULE_VALUES)}"],
        ["[max_gap]", f"all = {rng.choice(RULE_VALUES)}"],
        [f"max_idle_fraction = {rng.choice(RULE_VALUES)}"],
        [f"skip_steps = {rng.choice(RULE_VALUES)}"],
        [], ["description = \"nothing\""], ["[baseline]", "kernels = false", "fused = false", "time = false"],
        ["[[must_fuse]]", f"ops = {rng.choice(RULE_VALUES)}"]])
    rules = workdir / f"case{k}.toml"
    text = "\n".join(lines) + "\n"
    # a gate fails closed: NaN/inf, a regex that can backtrack forever, or no rule at all is exit 2
    refused = lines in NO_RULE or any(line.split(" = ")[-1] in REFUSED_VALUES for line in lines)
    if rng.random() < 0.1:
        text, refused = text[: rng.randrange(len(text) + 1)], False
    rules.write_text(text)
    src = rng.choice(SOURCES[:3])
    return Case("rules", " | ".join(lines), [["check", str(src), "--rules", str(rules), "--baseline", str(src)]],
                [rules], {2} if refused else None)


def _mlx_case(rng, workdir: Path, k: int) -> Case:
    folder = workdir / f"mlx{k}"
    folder.mkdir()
    dot, info = folder / "000.dot", folder / "000.json"
    text = (MLX / "001.dot").read_text()
    if rng.random() < 0.3:
        text = text[: rng.randrange(len(text) + 1)] if rng.random() < 0.5 else text.replace("->", "--", 3)
    dot.write_text(text)
    doc = json.loads((MLX / "001.json").read_text())
    for _ in range(rng.choice([1, 2])):
        part = rng.choice(["arrays", "compiled", "warnings", "device_type", "device_name", "top"])
        if part == "arrays" and doc.get("arrays") and isinstance(doc["arrays"], dict):
            entry = doc["arrays"][rng.choice(list(doc["arrays"]))]
            entry[rng.choice(["shape", "dtype"])] = _junk(rng)
        elif part == "top":
            doc = rng.choice([[], "x", 5, {}])
            break
        else:
            doc[part] = _junk(rng)
    raw, _ = encode(doc, rng, gz_ok=False)
    info.write_bytes(raw)
    return Case("mlx", "mlx sidecar/dot", [["explain", str(dot)]], [dot, info])


def make_case(rng: random.Random, workdir: Path, k: int, capture: bool = False) -> Case:
    """One case; ``capture``: a tenth of them capture a script that misbehaves (needs torch)."""
    from fuzz.hostile import CAPTURE_MAKERS, MAKERS                # issue 27's classes

    if capture and CAPTURE_MAKERS and rng.random() < 0.1:
        return rng.choice(CAPTURE_MAKERS)(rng, workdir, k, SOURCES, Case)
    r = rng.random()
    if r < 0.62:
        return _trace_case(rng, workdir, k)
    if r < 0.72:
        return rng.choice(MAKERS)(rng, workdir, k, SOURCES, Case)
    if r < 0.84:
        return _explain_json_case(rng, workdir, k)
    if r < 0.94:
        return _rules_case(rng, workdir, k)
    return _mlx_case(rng, workdir, k)


@dataclass
class Outcome:
    code: int
    stdout: str
    stderr: str
    error: BaseException | None = None


def invoke(args: list[str]) -> Outcome:
    """The CLI in process: ``tracekit.cli.app.run`` (what the console script's ``main`` calls: a
    TracekitError is one line and exit 2) inside typer's CliRunner isolation, stdout and stderr apart.
    TRACEKIT_DEBUG=1 makes an internal error raise, so the finding keeps its exception."""
    from typer.testing import CliRunner

    from tracekit.cli.app import run

    error, code = None, -1
    with CliRunner().isolation(env={"TRACEKIT_DEBUG": "1"}) as streams:
        try:
            code = run([str(a) for a in args])
        except Exception as exc:  # noqa: BLE001 - anything escaping run() is the finding
            error = exc
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
        out = streams[0].getvalue().decode("utf-8", "replace")
        err = streams[1].getvalue().decode("utf-8", "replace")
    return Outcome(code, out, err, error)


def _lost(case: Case) -> list[str]:
    """Files the run changed although it had to leave them alone (an output aimed at an input)."""
    return [f"{path.name} was changed (an output overwrote it)" for path, data in case.unchanged.items()
            if not path.is_file() or path.read_bytes() != data]


def invoke_subprocess(args: list[str], timeout: float = 120.0) -> Outcome:
    """``python -m tracekit ARGS`` in a fresh process (capture runs the script it is given: it exits,
    forks, closes stdout)."""
    import os
    import subprocess

    env = dict(os.environ, PYTHONPATH=str(ROOT), TRACEKIT_DEBUG="1")
    try:
        proc = subprocess.run([sys.executable, "-m", "tracekit", *args], capture_output=True, env=env,
                              timeout=timeout, cwd=ROOT)
    except subprocess.TimeoutExpired:
        return Outcome(-1, "", "", TimeoutError(f"no exit after {timeout:g} s"))
    return Outcome(proc.returncode, proc.stdout.decode("utf-8", "replace"), proc.stderr.decode("utf-8", "replace"))


def problems(out: Outcome, script_stderr: bool = False) -> list[str]:
    """What is wrong with one run; ``script_stderr``: stderr also holds a captured script's own lines."""
    bad = []
    if out.error is not None:
        bad.append(f"internal error: {type(out.error).__name__}: {str(out.error)[:300]}")
    elif out.code not in (0, 1, 2) and not script_stderr:          # a captured script's own code passes
        bad.append(f"exit code {out.code}")
    text = out.stdout + out.stderr
    if "Traceback" in text or "internal error" in text:
        bad.append("traceback or internal error in the output")
    for line in out.stderr.splitlines():
        if not line.startswith("tracekit: ") and not script_stderr:
            bad.append(f"stderr line that is not one 'tracekit: ' line: {line[:120]!r}")
            break
    return bad


def run_case(case: Case) -> list[str]:
    """Everything wrong with how tracekit handled one case (empty: fine)."""
    bad = []
    for args in case.commands:
        if args[0] == "explain":
            outs = {fmt: invoke([*args, "--format", fmt]) for fmt in FORMATS}
            for fmt, out in outs.items():
                bad += [f"explain -f {fmt}: {p}" for p in problems(out)]
            codes = {fmt: out.code for fmt, out in outs.items()}
            if len(set(codes.values())) > 1:
                bad.append(f"exit codes differ by format: {codes}")
            if case.expect is not None and codes["json"] not in case.expect:
                bad.append(f"explain: exit {codes['json']}, expected {sorted(case.expect)}")
            if outs["json"].code == 0:
                try:
                    json.loads(outs["json"].stdout)
                except ValueError as exc:
                    bad.append(f"explain -f json wrote invalid JSON ({exc})")
        elif args[0] == "capture":
            out = invoke_subprocess(args)
            bad += [f"capture: {p}" for p in problems(out, script_stderr=True)]
            if case.expect is not None and out.code not in case.expect:
                bad.append(f"capture: exit {out.code}, expected {sorted(case.expect)}")
        else:
            out = invoke(args)
            bad += [f"{args[0]}: {p}" for p in problems(out)]
            if case.expect is not None and out.code not in case.expect:
                bad.append(f"{args[0]}: exit {out.code}, expected {sorted(case.expect)} (a gate must fail closed)")
            if "junit" in args and out.code in (0, 1):
                import xml.dom.minidom
                try:
                    xml.dom.minidom.parseString(out.stdout.encode())
                except Exception as exc:  # noqa: BLE001 - any parser error is the finding
                    bad.append(f"check -f junit wrote invalid XML ({exc})")
    return bad + _lost(case) + (case.after() if case.after else [])


def fuzz(n: int, seed: int, workdir: Path, on_case=None, make=None) -> dict:
    """Run ``n`` cases (made by ``make(rng, workdir, k)``, default ``make_case``); returns figures and the
    failures (case note, command, problems, kept file)."""
    make = make or make_case
    rng = random.Random(seed)
    failures, t0, slowest = [], time.perf_counter(), (0.0, "")
    for k in range(n):
        case_dir = workdir / f"c{k}"
        case_dir.mkdir(parents=True, exist_ok=True)
        case = make(rng, case_dir, k)
        t = time.perf_counter()
        bad = run_case(case)
        dt = time.perf_counter() - t
        if case.kind != "capture":          # a capture starts Python and imports torch: seconds by itself
            slowest = max(slowest, (dt, f"{case.kind}: {case.note}"))
        if bad:
            failures.append({"case": k, "kind": case.kind, "note": case.note, "commands": case.commands,
                             "problems": bad})
        else:
            shutil.rmtree(case_dir, ignore_errors=True)
        if on_case:
            on_case(k, case, bad, dt)
    return {"cases": n, "seed": seed, "seconds": time.perf_counter() - t0, "failures": failures,
            "slowest": slowest}
