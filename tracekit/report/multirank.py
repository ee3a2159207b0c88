"""A multi-rank run for people: the cross-rank document (tracekit.ranks.document) as a table (80
columns), Markdown or CSV. JSON is the document itself."""

from __future__ import annotations

import csv
import io

from tracekit.report.fmt import cell_width, clip, fit_columns, fmt_bytes, fmt_gap, fmt_us, step_cells
from tracekit.report.markdown import md_table, md_text

MAX_RANK_ROWS = 32        # a table of more ranks shows the slowest half of this many (all in JSON and CSV)
CSV_FIELDS = ("key", "rank", "label", "error", "steps", "step_us_median", "step_us_mean", "slowest_steps",
              "kernels", "kernel_us", "compute_us", "comm_us", "comm_kernel_us", "copy_us", "floor_us",
              "covered_us", "gap", "comm_floor_us", "comm_gap", "bus_bytes", "overlap_us", "overlap_pct",
              "wait_us", "last_arrivals")


def _pct(x) -> str:
    return "-" if x is None else f"{x:.1f}%"


def summary_lines(doc: dict) -> list[str]:
    """What the run says, in a few sentences (table and Markdown)."""
    s = doc["summary"]
    world = f" of world size {s['world_size']}" if s.get("world_size") else ""
    out = [f"{s['ranks']} rank(s){world}" + (f", {s['failed']} not analysed" if s["failed"] else "") +
           f"; median step {fmt_us(s['step_us_median'])} (median of the ranks' medians)."]
    if s.get("straggler"):
        g = s["straggler"]
        out.append(f"Straggler: rank {g['rank']} ({clip(g['label'], 40)}) is the slowest in {g['slowest_steps']} of "
                   f"{len(doc['steps'])} step(s); its median step is {_pct(g['excess_pct'])} over the median rank.")
    if s.get("step_skew_pct") is not None:
        out.append(f"Step skew (slowest - fastest median step, over the median): {_pct(s['step_skew_pct'])}.")
    if s.get("comm_pct") is not None:
        out.append(f"Communication kernels: {_pct(s['comm_pct'])} of kernel time; {_pct(s['overlap_pct'])} of "
                   "their time overlapped by compute kernels.")
    return out


def _shown_ranks(doc: dict) -> tuple[list[dict], int]:
    ranks = doc["ranks"]
    if len(ranks) <= MAX_RANK_ROWS:
        return ranks, 0
    slow = sorted(ranks, key=lambda r: -(r["step_us_median"] or 0))[: MAX_RANK_ROWS // 2]
    return sorted(slow, key=lambda r: r["key"]), len(ranks) - len(slow)


def _rank_cells(r: dict) -> list[str]:
    if r["error"]:
        return [str(r["rank"]), "error", "", "", "", "", "", clip(r["label"], 24)]
    kernel = fmt_us(r["kernel_us"]) if r["kernels"] else "-"
    return [str(r["rank"]), fmt_us(r["step_us_median"]), kernel, fmt_us(r["comm_us"]), _pct(r["overlap_pct"]),
            fmt_us(r["wait_us"]), fmt_gap(r["gap"]), clip(r["label"], 24)]


RANK_HEAD = ["rank", "step", "kernels", "comm", "overlap", "wait", "gap", "trace"]
STEP_HEAD = ["step", "median", "slowest", "excess", "skew"]
COLL_HEAD = ["collective", "group", "calls", "bytes", "transfer", "floor", "gap"]


def _step_cells(s: dict) -> list[str]:
    return [clip(s["name"], 20), fmt_us(s["median_us"]), "-" if s["slowest_rank"] is None else str(s["slowest_rank"]),
            _pct(s["excess_pct"]), _pct(s["skew_pct"])]


def _step_table(steps, text=str) -> tuple[dict, int, str]:
    """The per-step table's cells: every step up to ``fmt.STEP_ROWS``, else the first and last halves
    around one elided row, as explain's step table (100k steps: 40 rows, not 100k)."""
    return step_cells(steps, STEP_HEAD, lambda s: dict(zip(STEP_HEAD, map(text, _step_cells(s)))))


def _coll_cells(c: dict) -> list[str]:
    return [c["collective"], clip(c["group"] or "-", 12), f"{c['calls']}" + ("*" if c["partial_calls"] else ""),
            fmt_bytes(c["bytes"]), fmt_us(c["transfer_us"]), fmt_us(c["floor_us"]), fmt_gap(c["gap"])]


def print_table(doc: dict, console=None) -> None:
    from tracekit.report.table import StdoutConsole
    from rich.table import Table

    console = console or StdoutConsole(highlight=False)
    for line in summary_lines(doc):
        console.print(line, markup=False)
    ranks, hidden = _shown_ranks(doc)
    cells = [_rank_cells(r) for r in ranks]
    width = {c: cell_width(c, [row[i] for row in cells]) for i, c in enumerate(RANK_HEAD)}
    keep = fit_columns(width, tuple(RANK_HEAD), {"rank", "step"}, console.width)
    table = Table(title="per rank", show_edge=False, title_justify="left")
    for col in keep:
        table.add_column(col, justify="left" if col == "trace" else "right", no_wrap=True)
    for row in cells:
        table.add_row(*[row[RANK_HEAD.index(c)] for c in keep])
    console.print(table)
    console.print("step: median step; kernels, comm, overlap, wait: totals over the whole trace (comm: "
                  "collective time, overlap: of it under compute kernels, wait: of it waiting for the last rank); "
                  "gap: kernel time / floor", markup=False)
    if hidden:
        console.print(f"({hidden} faster ranks not shown: --format json or csv lists every rank)", markup=False)
    if doc["steps"]:
        steps = Table(title="per step (excess: the slowest rank over the median)", show_edge=False,
                      title_justify="left")
        cells, n, note = _step_table(doc["steps"])
        steps.title += note
        for col in STEP_HEAD:
            steps.add_column(col, justify="right")
        for i in range(n):
            steps.add_row(*[cells[c][i] for c in STEP_HEAD])
        console.print(steps)
    if doc["collectives"]:
        coll = Table(title="collectives matched across ranks", show_edge=False, title_justify="left")
        for i, col in enumerate(COLL_HEAD):
            coll.add_column(col, justify="left" if i < 2 else "right")
        for c in doc["collectives"]:
            coll.add_row(*_coll_cells(c))
        console.print(coll)
        console.print("transfer: the shortest rank's time per call, summed; *: some calls not on every rank",
                      markup=False)


def to_markdown(doc: dict) -> str:
    lines = ["## tracekit: multi-rank run", ""] + [md_text(x, 400) for x in summary_lines(doc)] + [""]
    ranks, hidden = _shown_ranks(doc)
    lines += md_table(RANK_HEAD, "rrrrrrrl", [[md_text(c) for c in _rank_cells(r)] for r in ranks])
    if hidden:
        lines += ["", f"{hidden} faster ranks not shown."]
    if doc["steps"]:
        cells, n, note = _step_table(doc["steps"], md_text)
        lines += [""] + ([f"_{md_text(note.strip(' ()'))}_", ""] if note else []) + \
            md_table(STEP_HEAD, "lrrrr", [[cells[c][i] for c in STEP_HEAD] for i in range(n)])
    if doc["collectives"]:
        lines += [""] + md_table(COLL_HEAD, "llrrrrr", [[md_text(c) for c in _coll_cells(c)] for c in doc["collectives"]])
    if doc["warnings"]:
        lines += ["", "Warnings:", ""] + [f"- {md_text(w, 300)}" for w in doc["warnings"]]
    return "\n".join(lines) + "\n"


def to_csv(doc: dict) -> str:
    """One line per rank."""
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=CSV_FIELDS, extrasaction="ignore", lineterminator="\n")
    writer.writeheader()
    for r in doc["ranks"]:
        writer.writerow({k: ("" if r.get(k) is None else r.get(k)) for k in CSV_FIELDS})
    return buf.getvalue()
