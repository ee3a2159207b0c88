"""``tracekit capture`` for MLX scripts: the graph of every evaluation, with the shapes it lacks.

The unmodified script runs in this process (runpy, the argv/__main__/sys.path python would give
it). For the run, ``mx.eval``, ``mx.async_eval``, ``array.item``/``tolist`` and ``mx.compile`` are
wrapped: each evaluation writes ``graphs/NNN.dot`` with ``mx.export_to_dot`` and ``graphs/NNN.json``
with what the dot lacks: each array's shape and dtype, the device, which call evaluated it.
Shapes come from ``mx.export_function``'s tape (the uncompiled function for compiled calls),
matched onto the dot from named arrays, then spread by shape rules; see docs/mlx.md.
"""

from __future__ import annotations

import functools
import os
import platform
import shutil
import sys
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

import networkx as nx
import orjson

from tracekit.capture.runner import load_script, run_script
from tracekit.load.mlx import (
    BITWISE,
    REDUCE_LABELS,
    DotGraph,
    fused_parts,
    propagate,
    read_dot,
)
from tracekit.version import __version__

MAX_GRAPHS = int(os.environ.get("TRACEKIT_MLX_MAX_GRAPHS", "200"))
NO_COMPILER = ("mx.compile did not fuse: no g++ on PATH. MLX on a CPU device builds fused kernels with g++ "
               "and without one silently leaves every primitive unfused: compiled functions show lazy counts")


def dtype_name(dtype) -> str:
    return str(dtype).rsplit(".", 1)[-1]            # mlx.core.bfloat16 -> bfloat16


@dataclass
class Tape:
    """``mx.export_function`` callback entries: primitives in topological order over named arrays."""

    prims: list = field(default_factory=list)       # (name, input names, output names)
    arrays: dict = field(default_factory=dict)      # tape name -> {"shape", "dtype"}
    producer: dict = field(default_factory=dict)    # tape name -> (primitive index, output index)
    inputs: list = field(default_factory=list)
    outputs: list = field(default_factory=list)
    constants: list = field(default_factory=list)   # (tape name, array): the graph's leaves
    complete: bool = True

    def note(self, items) -> list[str]:
        for name, shape, dtype in items:
            self.arrays[name] = {"shape": list(shape), "dtype": dtype_name(dtype)}
        return [x[0] for x in items]

    @classmethod
    def from_entries(cls, entries: list[dict], complete: bool) -> Tape:
        t = cls(complete=complete)
        for e in entries:
            kind = e.get("type")
            if kind in ("inputs", "outputs"):
                setattr(t, kind, t.note(e[kind]))
            elif kind == "constants":
                t.note([(n, a.shape, a.dtype) for n, a in e["constants"]])
                t.constants = list(e["constants"])
            elif kind == "primitive":
                outs = t.note(e["outputs"])
                t.producer.update({o: (len(t.prims), k) for k, o in enumerate(outs)})
                t.prims.append((e["name"], t.note(e["inputs"]), outs))
        for k, o in enumerate(t.outputs):       # see Recorder._record: outputs wrapped in StopGradient
            i = t.producer.get(o, (None,))[0]
            if i is not None and t.prims[i][0] == "StopGradient":
                t.outputs[k] = t.prims[i][1][0]
        return t


def _canon(label: str) -> str:
    """The export name of a dot label (dot prints Sum/Rsqrt/CumSum, export names Reduce/Sqrt/Scan)."""
    if label in REDUCE_LABELS or label in BITWISE:
        return "Reduce" if label in REDUCE_LABELS else "BitwiseBinary"
    return "Scan" if label.startswith("Cum") else {"Log2": "Log", "Log10": "Log", "Rsqrt": "Sqrt"}.get(label, label)


def align(dot: DotGraph, tape: Tape, pairs: list, known: dict, regions: dict) -> None:
    """Walk back from paired (dot array, tape array) anchors, giving dot arrays the tape's shapes.
    A Compiled node matches the tape region its label names (its inputs in MLX's DFS order)."""
    stack, seen, done = list(pairs), set(), set()
    while stack:
        d, t = stack.pop()
        info = tape.arrays.get(t)
        if d in seen or info is None or (d in known and known[d]["shape"] != info["shape"]):
            continue
        seen.add(d)
        known.setdefault(d, info)
        dp, tp = dot.producer(d), tape.producer.get(t)
        if dp is None or tp is None or dp[0] in done:
            continue
        p, label = dp[0], dot.label(dp[0])
        name, t_ins, t_outs = tape.prims[tp[0]]
        if label.startswith("Compiled"):
            found = _region(tape, tp[0], label) if dp[1] == len(dot.outputs(p)) - 1 else None   # root output
            if found and len(found[0]) == len(dot.inputs(p)):
                done.add(p)
                stack += zip(dot.inputs(p), found[0])
                if "".join(found[1]) == label[len("Compiled"):]:
                    regions[p] = found[1]           # the label's split, checked against the tape
            continue
        if _canon(label) != _canon(name) or dp[1] != tp[1]:
            if label in ("Copy", "StopGradient"):      # no-ops export simplifies away
                done.add(p)
                stack.append((dot.inputs(p)[0], t))
            continue
        done.add(p)
        d_ins, d_outs = dot.inputs(p), dot.outputs(p)
        if len(d_outs) == len(t_outs):
            stack += zip(d_outs, t_outs)
        if len(d_ins) == len(t_ins):
            stack += zip(d_ins, t_ins)


def _region(tape: Tape, root: int, label: str) -> tuple[list[str], list[str]] | None:
    """External inputs (DFS order, as mx.compile collects them) and primitive names of the tape
    region a Compiled label names, grown back from ``root``; None unless the names are used up."""
    budget: dict[str, int] = {}
    for x in fused_parts(label):
        budget[_canon(x)] = budget.get(_canon(x), 0) + 1
    region: set[int] = set()

    def grow(i: int) -> None:
        name = _canon(tape.prims[i][0])
        if i in region or budget.get(name, 0) <= 0:
            return
        budget[name] -= 1
        region.add(i)
        for a in tape.prims[i][1]:
            if a in tape.producer:
                grow(tape.producer[a][0])

    grow(root)
    if any(budget.values()):
        return None
    ext: list[str] = []
    visited: set[int] = set()

    def inputs_of(i: int) -> None:
        visited.add(i)
        for a in tape.prims[i][1]:
            q = tape.producer.get(a, (None,))[0]
            if q in region:
                if q not in visited:
                    inputs_of(q)
            elif a not in ext:
                ext.append(a)

    inputs_of(root)
    return ext, [tape.prims[i][0] for i in sorted(region)]


def _arrays(tree, mx, found: list) -> list:
    """Arrays in a pytree (lists, tuples, dicts, mlx.nn modules) in order."""
    if isinstance(tree, mx.array):
        found.append(tree)
    elif isinstance(tree, (list, tuple, dict)):
        for x in tree.values() if isinstance(tree, dict) else tree:
            _arrays(x, mx, found)
    return found


def export_tape(mx, fun, *args, **kwargs) -> Tape | None:
    """``mx.export_function``'s tape of ``fun`` (complete, or up to the first primitive it cannot
    export, e.g. a Compiled one); None when the call is not exportable at all."""
    entries, complete = [], True
    try:
        mx.export_function(entries.append, fun, *args, **kwargs)
    except Exception:      # noqa: BLE001 - MLX raises ValueError/RuntimeError for unexportable graphs
        complete = False
    return Tape.from_entries(entries, complete) if entries else None


class Recorder:
    """Writes one dot + json per evaluation; remembers compiled calls made since the last one."""

    def __init__(self, mx, out: Path, limit: int = MAX_GRAPHS):
        self.mx, self.dir, self.limit = mx, out / "graphs", limit
        self.compiler = shutil.which("g++")     # what MLX runs to build fused CPU kernels
        self.busy, self.tapes, self.errors = False, {}, []
        self.evals = self.written = self.empty = self.failed = self.compiled_calls = self.compiled_nodes = 0
        self.calls: list[tuple] = []            # (tape or None, args, outputs) since the last eval

    def device(self) -> tuple[str, str, str | None]:
        """(default device, "gpu"/"cpu", device name from mx.device_info or mx.metal.device_info)."""
        dev, info = self.mx.default_device(), {}
        metal = getattr(self.mx, "metal", None)
        for get in (getattr(self.mx, "device_info", None), getattr(metal, "device_info", None)):
            try:
                info = info or (get() if get else {})
            except Exception:   # noqa: BLE001 - no device info on this build
                pass
        return str(dev), "gpu" if "gpu" in str(dev).lower() else "cpu", info.get("device_name")

    def on_eval(self, call: str, trees) -> None:
        if self.busy:
            return
        self.evals += 1
        if self.written >= self.limit:
            return
        self.busy = True
        try:
            self._record(call, trees)
        except Exception as exc:   # noqa: BLE001 - never break the user's script
            self.failed += 1
            self.errors.append(f"evaluation {self.evals} ({call}) not recorded: {type(exc).__name__}: {exc}")
        finally:
            self.busy = False

    def on_compiled(self, fun, stateful: bool, args, kwargs, state_in: list, result, state_out) -> None:
        """A compiled call: its arrays (and captured state's) as anchors, the tape of ``fun`` if pure."""
        self.compiled_calls += 1
        if self.written >= self.limit:
            return
        mx, tape = self.mx, None
        ins, outs = _arrays([list(args), kwargs], mx, []), _arrays(result, mx, [])
        if not stateful:
            key = (id(fun), tuple((tuple(a.shape), str(a.dtype)) for a in ins), len(args), tuple(kwargs))
            if key not in self.tapes:
                self.busy = True
                try:
                    self.tapes[key] = tape = export_tape(mx, fun, *args, **kwargs)
                    if tape:
                        tape.constants = []         # hold no arrays across calls
                finally:
                    self.busy = False
            tape = self.tapes[key]
        self.calls.append((tape, ins + state_in, outs + _arrays(state_out, mx, [])))

    def _record(self, call: str, trees) -> None:
        mx = self.mx
        outs = list({id(a): a for a in _arrays(list(trees), mx, [])}.values())
        if not outs:
            return
        # export_function rewires its outputs' inputs to copies of their graph: hand it throwaway
        # StopGradient views so the script's own arrays keep their graph
        views = [mx.stop_gradient(a) for a in outs]
        tape = export_tape(mx, lambda: tuple(views))
        tags = {f"k{j}": arr for j, (_, arr) in enumerate(tape.constants if tape else [])}
        for n, (_, ins, couts) in enumerate(self.calls):
            tags.update({f"cc{n}_{io}{j}": a for io, arrs in (("i", ins), ("o", couts)) for j, a in enumerate(arrs)})
        tags.update({f"out{i}": a for i, a in enumerate(outs)})
        self.dir.mkdir(parents=True, exist_ok=True)
        path = self.dir / f"{self.written:03d}.dot"
        # export_to_dot also draws every named array's own graph: name only what the outputs reach
        mx.export_to_dot(str(path), *outs, **tags)
        dot = read_dot(path)
        reach = set().union(*(nx.ancestors(dot.g, t) | {t} for t in tags if t.startswith("out") and t in dot.g))
        if any(t.startswith("cc") and t in dot.g and t not in reach for t in tags):
            tags = {t: a for t, a in tags.items() if not t.startswith("cc") or t in reach}
            mx.export_to_dot(str(path), *outs, **tags)
            dot = read_dot(path)
        if not dot.prims:                       # everything was already evaluated: no work
            path.unlink()
            self.empty += 1
            self.calls.clear()
            return
        known = {t: {"shape": list(a.shape), "dtype": dtype_name(a.dtype)} for t, a in tags.items() if t in dot.g}
        final = {id(a): t for t, a in tags.items()}       # one array, several tags: export keeps the last
        regions: dict[str, list[str]] = {}
        for tp, o_arrs, i_arrs in [(tape, outs, [])] + [(c, co, ci) for c, ci, co in self.calls]:
            pairs = [(final.get(id(a)), n) for arrs, names in ((o_arrs, tp.outputs), (i_arrs, tp.inputs))
                     for a, n in zip(arrs, names)] if tp else []
            align(dot, tp, [(d, n) for d, n in pairs if d in dot.g], known, regions)
        propagate(dot, known)
        compiled = sum(dot.label(p).startswith("Compiled") for p in dot.prims)
        self.compiled_nodes += compiled
        arrays = {a: known[a] for a in dot.g if a in known}
        n_arrays = sum(1 for a in dot.g if dot.g.nodes[a]["kind"] == "array")
        dev, kind, name = self.device()
        called = any(t.startswith("cc") and t in dot.g for t in tags)
        info = {"index": self.written, "call": call, "device": dev, "device_type": kind, "device_name": name,
                "warnings": [NO_COMPILER] if called and kind == "cpu" and not self.compiler else [],
                "outputs": [f"out{i}" for i in range(len(outs)) if f"out{i}" in dot.g],
                "eval_tape": "complete" if tape and tape.complete else ("partial" if tape else "none"),
                "coverage": {"arrays": n_arrays, "with_shape": len(arrays), "compiled_nodes": compiled},
                "arrays": arrays, "compiled": regions}
        path.with_suffix(".json").write_bytes(orjson.dumps(info, option=orjson.OPT_INDENT_2))
        self.written += 1
        self.calls.clear()


def _install(mx, rec: Recorder) -> list[tuple]:
    """Wrap the evaluation and compile entry points; returns what to restore."""
    evals = [(mx, "eval"), (mx, "async_eval"), (mx.array, "item"), (mx.array, "tolist")]
    saved = [(owner, name, getattr(owner, name)) for owner, name in evals + [(mx, "compile")]]

    def evaluating(fn, call):
        @functools.wraps(fn)
        def wrapped(*args):
            rec.on_eval(call, args)
            return fn(*args)
        return wrapped

    orig_compile = mx.compile

    @functools.wraps(orig_compile)
    def compile_(fun, inputs=None, outputs=None, shapeless=False):
        compiled = orig_compile(fun, inputs=inputs, outputs=outputs, shapeless=shapeless)

        @functools.wraps(fun)
        def call(*args, **kwargs):
            if rec.busy:
                return compiled(*args, **kwargs)
            rec.busy, state = True, _arrays(inputs, mx, [])     # nested compiled calls: traced, not recorded
            try:
                result = compiled(*args, **kwargs)
            finally:
                rec.busy = False
            try:
                rec.on_compiled(fun, inputs is not None or outputs is not None, args, kwargs, state, result, outputs)
            except Exception as exc:   # noqa: BLE001 - never break the user's script
                rec.errors.append(f"compiled call not recorded: {type(exc).__name__}: {exc}")
            return result
        return call

    for owner, name in evals:
        setattr(owner, name, evaluating(getattr(owner, name), name))
    mx.compile = compile_
    return saved


def capture_mlx_script(script: str, args: list[str], out: Path, quiet: bool) -> int:
    """Run an MLX script, writing out/graphs/NNN.{dot,json} and out/meta.json; the script's exit code."""
    import mlx.core as mx

    graphs = Path(out) / "graphs"
    graphs.mkdir(parents=True, exist_ok=True)
    for old in graphs.glob("[0-9][0-9][0-9].*"):
        if old.suffix in (".dot", ".json"):
            old.unlink()                        # a previous capture's graphs, not this one's
    rec = Recorder(mx, Path(out))
    started, t0 = datetime.now(timezone.utc).isoformat(timespec="seconds"), time.time()
    saved = _install(mx, rec)
    try:
        path, _, compiled = load_script(script)
        code = run_script(compiled, path, [script, *args], {})
    finally:
        for owner, name, value in saved:
            setattr(owner, name, value)
    dev, kind, name = rec.device()
    warnings = list(rec.errors)
    fuses = kind == "gpu" or rec.compiler is not None
    if os.environ.get("MLX_DISABLE_COMPILE"):
        warnings.append("MLX_DISABLE_COMPILE is set: mx.compile did not fuse")
    if rec.evals > rec.written + rec.empty + rec.failed:
        warnings.append(f"only the first {rec.limit} evaluations were recorded "
                        f"({rec.evals} in all; TRACEKIT_MLX_MAX_GRAPHS raises the limit)")
    no_fusion = NO_COMPILER if rec.compiled_calls and not fuses else None
    meta = {
        "framework": "mlx", "tracekit_version": __version__, "command": [sys.executable, script, *args], "cwd": os.getcwd(), "exit_code": code,
        "started": started, "wall_s": round(time.time() - t0, 3),
        "versions": {"mlx": getattr(mx, "__version__", None), "python": platform.python_version(),
                     "tracekit": __version__, "platform": platform.platform()},
        "device": {"default": dev, "type": kind, "name": name},
        "compiler": {"g++": rec.compiler, "found": rec.compiler is not None, "fusion_possible": fuses,
                     "warning": no_fusion},
        "evaluations": {"total": rec.evals, "graphs": rec.written, "without_work": rec.empty,
                        "failed": rec.failed, "limit": rec.limit},
        "compiled": {"calls": rec.compiled_calls, "fused_nodes_in_graphs": rec.compiled_nodes},
        "warnings": warnings,
    }
    (Path(out) / "meta.json").write_bytes(orjson.dumps(meta, option=orjson.OPT_INDENT_2))
    if not quiet:
        print(f"tracekit: {rec.written} MLX graph(s) in {graphs} ({rec.evals} evaluation(s)); exit {code}",
              file=sys.stderr)
        for w in warnings + [no_fusion] * bool(no_fusion):
            print(f"tracekit: warning: {w}", file=sys.stderr)
    return code
