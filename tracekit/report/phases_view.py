"""The serving phases side by side (table and Markdown), from an explain document's ``phases``."""

from __future__ import annotations

from rich.table import Table

from tracekit.report.fmt import fmt_gap, fmt_us


def _num(x, digits: int = 0) -> str:
    return "-" if x is None else f"{x:,.{digits}f}"


def phase_cells(phases: list[dict]) -> list[tuple[str, list[str]]]:
    """(figure, one cell per phase) rows, the phases as columns."""
    return [("steps", [str(p["steps"]) for p in phases]),
            ("kernels", [str(p["kernels"]) for p in phases]),
            ("kernel time", [fmt_us(p["kernel_us"]) for p in phases]),
            ("floor", [fmt_us(p["floor_us"]) for p in phases]),
            ("gap", [fmt_gap(p["gap"]) for p in phases]),
            ("one-kernel floor", [fmt_us(p["fused_floor_us"]) for p in phases]),
            ("tokens", [_num(p["tokens"]) for p in phases]),
            ("kernel time/token", [fmt_us(p["kernel_us_per_token"]) for p in phases]),
            ("one-kernel floor/token", [fmt_us(p["fused_floor_us_per_token"]) for p in phases]),
            ("tok/s ceiling", [_num(p["tokens_per_s_ceiling"]) for p in phases]),
            ("J / token", ["n/a" if p["joules_per_token"] is None else f"{p['joules_per_token']:.3g}"
                           for p in phases])]


def phase_table(phases: list[dict]) -> Table:
    t = Table(title="per phase", caption="tok/s ceiling: tokens ÷ one-kernel floor", show_edge=False)
    t.add_column("", no_wrap=True)
    for p in phases:
        t.add_column(p["phase"], justify="right", no_wrap=True)
    for name, cells in phase_cells(phases):
        t.add_row(name, *cells)
    return t

