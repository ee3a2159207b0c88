"""The multi-rank document: the per-rank stages' facts and the DuckDB answers as one plain dict, the
contract of ``explain DIR --format json`` and ``ranks DIR --format json`` (docs/ranks.md). Its ``steps``
is a ``model.rows.Rows`` (reads like a list of dicts; ``model.rows.plain`` makes it one)."""

from __future__ import annotations

import statistics
from collections import defaultdict

import numpy as np

from tracekit.model.rows import Rows, Values


def _ratio(a, b, scale: float = 1.0):
    return None if a is None or not b else a / b * scale


def _med(values: list[float]):
    return statistics.median(values) if values else None


def build(results: list[dict], q: dict[str, list[dict]]) -> dict:
    per_rank = {r["key"]: r for r in q["per_rank"]}
    overlap = {r["key"]: r["overlap_us"] for r in q["overlap"]}
    waits = {r["key"]: r for r in q["waits"]}
    step_times = q["step_times"]
    label = {r["key"]: r["label"] for r in results}
    rank_of = {r["key"]: r["rank"] for r in results}
    per_step = q["per_step"]
    shared = per_step["slowest_key"][per_step["ranks"] > 1]
    slowest = dict(zip(*(a.tolist() for a in np.unique(shared, return_counts=True))))
    ranks = [_rank_row(r, per_rank.get(r["key"], {}), step_times.get(r["key"], []), overlap.get(r["key"]),
                       waits.get(r["key"], {}), slowest.get(r["key"], 0)) for r in results]
    steps = step_rows(per_step, rank_of, label)
    collectives = [{"group": c["grp"] or None, "collective": c["coll"], "calls": c["calls"], "ranks": c["ranks"],
                    "partial_calls": c["partial"], "bytes": c["bytes"], "bus_bytes": c["bus_bytes"],
                    "transfer_us": c["transfer_us"], "floor_us": c["floor_us"],
                    "gap": _ratio(c["transfer_us"], c["floor_us"])} for c in q["collectives"]]
    return {"ranks": ranks, "steps": steps, "collectives": collectives,
            "summary": _summary(results, ranks), "warnings": _warnings(results, q)}


STEP_KEYS = ("step", "name", "ranks", "median_us", "min_us", "max_us", "slowest_rank", "slowest", "excess_pct",
             "skew_pct")


def step_rows(cols: dict, rank_of: dict, label: dict) -> Rows:
    """The per-step rows from the per-step query's columns, each made when read (``model.rows.Rows``):
    no dict per step (issue 27: 100k steps). Ratios are the same float operations as ``_ratio``."""
    med, lo, hi = (np.asarray(cols[k], dtype=float) for k in ("median_us", "min_us", "max_us"))
    none = med == 0                                # _ratio: None where the median is 0
    with np.errstate(divide="ignore", invalid="ignore"):
        excess, skew = (hi - med) / med * 100, (hi - lo) / med * 100
    keys = np.asarray(cols["slowest_key"], dtype=np.int64)
    uniq, at = np.unique(keys, return_inverse=True)
    columns = {"step": Values(cols["step"]), "name": Values(cols["name"]), "ranks": Values(cols["ranks"]),
               "median_us": Values(med), "min_us": Values(lo), "max_us": Values(hi),
               "slowest_rank": Values(at, [rank_of.get(k) for k in uniq.tolist()]),
               "slowest": Values(at, [label.get(k) for k in uniq.tolist()]),
               "excess_pct": Values(excess, none=none), "skew_pct": Values(skew, none=none)}
    return Rows(len(keys), dict.fromkeys(STEP_KEYS), columns)


def _rank_row(r: dict, pr: dict, steps: list[float], overlap_us, wait: dict, slowest: int) -> dict:
    comm_kernel = pr.get("comm_kernel_us")
    return {"key": r["key"], "rank": r["rank"], "label": r["label"], "device": r["device"], "spec": r["spec"],
            "error": r["error"], "steps": len(steps), "step_us_median": _med(steps),
            "step_us_mean": statistics.fmean(steps) if steps else None, "slowest_steps": slowest,
            "rows": pr.get("rows", 0), "kernels": pr.get("kernels", 0), "kernel_us": pr.get("kernel_us"),
            "compute_us": pr.get("compute_us"), "comm_us": pr.get("comm_us"), "comm_kernel_us": comm_kernel,
            "copy_us": pr.get("copy_us"), "floor_us": pr.get("floor_us"), "covered_us": pr.get("covered_us"),
            "gap": _ratio(pr.get("covered_us"), pr.get("floor_us")), "comm_floor_us": pr.get("comm_floor_us"),
            "comm_gap": _ratio(pr.get("comm_covered_us"), pr.get("comm_floor_us")), "bus_bytes": pr.get("bus_bytes"),
            "overlap_us": (overlap_us or 0.0) if comm_kernel else None,
            "overlap_pct": _ratio(overlap_us or 0.0, comm_kernel, 100) if comm_kernel else None,
            "wait_us": wait.get("wait_us"), "last_arrivals": wait.get("last_arrivals", 0)}


def _summary(results: list[dict], ranks: list[dict]) -> dict:
    ok = [r for r in ranks if r["error"] is None]
    medians = [r["step_us_median"] for r in ok if r["step_us_median"] is not None]
    mid = _med(medians)
    worst = max(ok, key=lambda r: (r["slowest_steps"], r["step_us_median"] or 0), default=None)
    straggler = None
    if worst is not None and len(medians) > 1 and worst["slowest_steps"]:
        straggler = {"rank": worst["rank"], "label": worst["label"], "slowest_steps": worst["slowest_steps"],
                     "step_us_median": worst["step_us_median"],
                     "excess_pct": _ratio((worst["step_us_median"] or 0) - mid, mid, 100)}
    kernel = sum(r["kernel_us"] or 0 for r in ok)
    comm_kernel = sum(r["comm_kernel_us"] or 0 for r in ok)
    sizes = {r["world_size"] for r in results if r["world_size"]}
    return {"ranks": len(ranks), "failed": len(ranks) - len(ok), "world_size": max(sizes) if sizes else None,
            "step_us_median": mid, "step_skew_pct": _ratio(max(medians) - min(medians), mid, 100) if medians else None,
            "straggler": straggler, "comm_pct": _ratio(comm_kernel, kernel, 100),
            "overlap_pct": _ratio(sum(r["overlap_us"] or 0 for r in ok), comm_kernel, 100)}


def _warnings(results: list[dict], q: dict) -> list[str]:
    out = []
    claims: dict[int, list[str]] = defaultdict(list)
    for r in results:
        if r["rank"] is not None:
            claims[r["rank"]].append(r["label"])
        if r["error"]:
            out.append(f"{r['label']}: not analysed: {r['error']}")
    for rank, labels in sorted(claims.items()):
        if len(labels) > 1:
            out.append(f"rank {rank} is claimed by {len(labels)} traces ({', '.join(labels)}): each keeps its own row")
    sizes = {r["world_size"] for r in results if r["world_size"]}
    if sizes and max(sizes) > len(results):
        out.append(f"world size {max(sizes)} but {len(results)} rank trace(s): the figures cover these ranks only")
    devices = {r["device"] for r in results if r["error"] is None}
    if len(devices) > 1:
        out.append(f"ranks ran on different devices: {', '.join(sorted(str(d) for d in devices))}")
    counts: dict[tuple, list[int]] = defaultdict(list)
    for c in q["counts"]:
        counts[(c["grp"], c["coll"])].append(c["n"])
    for (grp, coll), ns in counts.items():
        if len(set(ns)) > 1:
            out.append(f"{coll}{f' (group {grp})' if grp else ''}: ranks hold {min(ns)} to {max(ns)} calls; "
                       "calls are matched by their order, the extra ones match nothing")
    seen: dict[str, list[str]] = defaultdict(list)
    for r in results:
        for w in r["warnings"]:
            seen[w].append(r["label"])
    for w, labels in seen.items():
        where = labels[0] if len(labels) == 1 else f"{len(labels)} ranks"
        out.append(f"{where}: {w}")
    return out
