"""Serving steps by phase (prefill, decode, mixed) and the graph-replay match share per step.

A step's phase and tokens come from the engine's iteration annotation (``load.engine_steps``) where
the trace has one; else from shapes: the tokens are the rows the step's GEMMs multiply (M, the most
common over its GEMM kernels), the phase is decode when its attention ops take one query token per
sequence, prefill when they take more (a mixed batch cannot be told from shapes: it needs the
annotation); a step running backward ops is training and has no phase, and a trace without any decode
step (an encoder's inference, attention benchmarks) has no phases: nothing in it generates tokens.

Per phase: steps, kernels, kernel time, floor, gap, one-kernel floor, tokens, µs per token and the
tokens per second the one-kernel floor would allow; joules per token only where energy was measured
(a profiler trace holds no energy: null).
"""

from __future__ import annotations

from collections import Counter

from tracekit.load.engine_steps import parse
from tracekit.model.keys import first_rows, ids
from tracekit.ops.matmul import gemm_tokens
from tracekit.model.trace import Trace

PHASES = ("prefill", "decode", "mixed", "unknown")
# attention op → (query input index, the query-length dim within it)
ATTENTION_Q = {"aten::scaled_dot_product_attention": (0, 2), "aten::_scaled_dot_product_flash_attention": (0, 2),
               "aten::_scaled_dot_product_efficient_attention": (0, 2),
               "aten::_scaled_dot_product_cudnn_attention": (0, 2), "aten::_cudnn_attention_forward": (0, 2),
               "aten::_flash_attention_forward": (0, 1),
               "aten::_efficient_attention_forward": (0, 1)}


def _dims(value, k: int):
    if isinstance(value, (list, tuple)) and len(value) > k and isinstance(value[k], (list, tuple)) \
            and value[k] and all(isinstance(d, int) and not isinstance(d, bool) for d in value[k]):
        return value[k]
    return None


NO_PHASE = {"phase": None, "tokens": None, "source": None}


def step_phases(trace: Trace) -> dict[int, dict]:
    """step index → {phase, tokens, source} for the steps an annotation or the shapes place (a step that
    neither places is absent: read with ``.get``; 100k steps of a trace without phases hold nothing)."""
    out = {}
    df = trace.kernels
    shapes = _shape_phases(df)
    for s in trace.steps or []:
        e = parse(s.name)
        if e is not None:
            out[s.index] = {"phase": e.phase, "tokens": e.tokens, "source": f"annotation ({e.family})"}
        elif s.index in shapes:
            out[s.index] = shapes[s.index]
    if not trace.steps:
        out[0] = shapes.get(0, NO_PHASE)
    return out


def _shape_phases(df) -> dict[int, dict]:
    tokens: dict[int, Counter] = {}
    queries: dict[int, Counter] = {}
    training: set[int] = set()
    ops, dims = df["op"].tolist(), df["op_dims"].tolist()
    try:                  # each distinct (op, shapes object) looked at once (model.keys.first_rows)
        firsts = first_rows(ops, ids(dims))
    except TypeError:
        firsts = list(range(len(ops)))
    what = {}             # first row -> None, "train", ("gemm", M) or ("attention", query length)
    for j in dict.fromkeys(firsts):
        op, d = ops[j], dims[j]
        if isinstance(op, str) and "backward" in op:
            what[j] = "train"
        elif (m := gemm_tokens(op, d)) is not None:
            what[j] = ("gemm", m)
        elif op in ATTENTION_Q and (q := _dims(d, ATTENTION_Q[op][0])) is not None and len(q) == 4:
            what[j] = ("attention", q[ATTENTION_Q[op][1]])
        else:
            what[j] = None
    for step, j in zip(df["step"].tolist(), firsts):
        w = what[j]
        if w is None:
            continue
        if w == "train":
            training.add(step)
        elif w[0] == "gemm":
            tokens.setdefault(step, Counter())[w[1]] += 1
        else:
            queries.setdefault(step, Counter())[w[1]] += 1
    out = {}
    for step in (set(tokens) | set(queries)) - training:       # a training step has no serving phase
        q = queries.get(step)
        phase = None if not q else "decode" if q.most_common(1)[0][0] == 1 else "prefill"
        t = tokens.get(step)
        out[step] = {"phase": phase, "tokens": t.most_common(1)[0][0] if t else None, "source": "shapes"}
    if not any(v["phase"] == "decode" for v in out.values()):     # no decode step: no generation served here
        for v in out.values():                                      # (an encoder's forward is no prefill)
            v["phase"] = None
    return out


def phase_rows(trace: Trace, steps: list[dict], fusion_per_step: list[dict], found: dict | None = None) -> list[dict]:
    """The ``phases`` key: one object per phase found, in PHASES order (empty when no step has one).
    ``found``: ``step_phases(trace)`` when the caller has it already."""
    found = step_phases(trace) if found is None else found
    if not any(v["phase"] for v in found.values()):
        return []
    one_kernel = {f["step"]: f.get("fused_floor_us") for f in fusion_per_step}
    groups: dict[str, list[dict]] = {}
    for r in steps:
        groups.setdefault(found.get(r["step"], {}).get("phase") or "unknown", []).append(r)
    out = []
    for phase in PHASES:
        rows = groups.get(phase)
        if not rows:
            continue
        kernel_us = sum(r["kernel_us"] for r in rows)
        floors = [r["floor_us"] for r in rows if r["floor_us"] is not None]
        costed = sum(r["costed_us"] or 0.0 for r in rows if r["floor_us"] is not None)
        ones = [one_kernel.get(r["step"]) for r in rows]
        one = sum(ones) if ones and all(v is not None for v in ones) else None
        toks = [found.get(r["step"], {}).get("tokens") for r in rows]
        tokens = sum(toks) if all(t for t in toks) else None
        out.append({"phase": phase, "steps": len(rows), "step_indices": [r["step"] for r in rows],
                    "kernels": sum(r["kernels"] for r in rows), "kernel_us": kernel_us,
                    "floor_us": sum(floors) if floors else None,
                    "gap": costed / sum(floors) if floors and sum(floors) > 0 else None,
                    "fused_floor_us": one, "tokens": tokens,
                    "kernel_us_per_token": kernel_us / tokens if tokens else None,
                    "fused_floor_us_per_token": one / tokens if tokens and one is not None else None,
                    "tokens_per_s_ceiling": tokens / (one * 1e-6) if tokens and one else None,
                    "joules_per_token": None, "energy": "not measured (a profiler trace holds no energy)",
                    "source": sorted({found.get(r["step"], {}).get("source") or "none" for r in rows})})
    return out


def graph_replay_steps(trace: Trace) -> dict[int, dict]:
    """step index → the graph-replay match figures of ``load.graph_replay`` for that step."""
    info = trace.metadata.get("graph_replays") or {}
    out = {}
    for r in info.get("per_step") or []:
        out[int(r["step"])] = {"graph_replayed": r["replayed"], "graph_matched": r["matched"],
                               "graph_matched_pct": 100.0 * r["matched"] / r["replayed"] if r["replayed"] else None,
                               "graph_unmatched": dict(r["unmatched"])}
    return out


def graph_replay_line(trace: Trace) -> str | None:
    """One line for people: replayed kernels matched to their capture's ops, and why the rest were not."""
    info = trace.metadata.get("graph_replays")
    if not info or not info.get("replayed"):
        return None
    n, m = info["replayed"], info["mapped"]
    files = info.get("capture_files") or []
    src = f"{len(files)} capture file{'s' if len(files) != 1 else ''}" if files else "captures in the trace"
    line = f"graph replays: {m} of {n} replayed kernels matched to capture ops ({100.0 * m / n:.0f}%, {src})"
    reasons: Counter = Counter()
    for r in info.get("per_step") or []:
        reasons.update(r["unmatched"])
    if reasons:
        line += "; not matched: " + "; ".join(f"{k} {why}" for why, k in reasons.most_common())
    return line
