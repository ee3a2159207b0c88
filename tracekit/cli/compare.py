"""The ``tracekit compare`` command: one workload captured on two devices or in two frameworks (its
work is in ``tracekit.report.compare``)."""

from __future__ import annotations

import sys
from enum import Enum
from typing import Optional

import typer

from tracekit.cli.options import StepMarker
from tracekit.gcpause import with_collector_paused


class CompareFormat(str, Enum):
    text = "text"
    json = "json"
    csv = "csv"
    markdown = "markdown"


def load_one(path: str, step_marker: str | None, spec: str | None, skip: int):
    """The one trace a compare side is: a torch.profiler trace or bundle, an MLX .dot graph, or an MLX
    bundle holding one graph (several: TracekitError naming them, pass one .dot)."""
    from pathlib import Path

    from tracekit.analyze import analyze_path
    from tracekit.errors import TracekitError

    traces = analyze_path(path, step_marker=step_marker, spec=spec, skip=skip)
    if len(traces) > 1:
        graphs = ", ".join(f"{Path(t.path).name}: {len(t.kernels)} kernels" for t in traces[:6])
        raise TracekitError(f"{path} holds {len(traces)} MLX graphs ({graphs}{', …' if len(traces) > 6 else ''}): "
                            f"compare takes one: pass its .dot file ({Path(traces[0].path).parent}/NNN.dot)")
    return traces[0]


def register(app: typer.Typer) -> None:
    @app.command()
    @with_collector_paused
    def compare(
        a: str = typer.Argument(..., help="Trace, capture bundle or MLX .dot graph (side A)"),
        b: str = typer.Argument(..., help="The same workload captured elsewhere (side B)"),
        format: CompareFormat = typer.Option(CompareFormat.text, "--format", "-f", help="text, json, csv or markdown"),
        spec_a: Optional[str] = typer.Option(None, "--spec-a", help="Device spec (id or TOML file) for A's floors, "
                                             "instead of the one its device matches"),
        spec_b: Optional[str] = typer.Option(None, "--spec-b", help="Device spec (id or TOML file) for B's floors"),
        skip_steps: int = typer.Option(0, "--skip-steps", min=0, help="Leading steps (warm-up) left out on both "
                                       "sides"),
        step_marker: Optional[str] = StepMarker,
    ) -> None:
        """One workload on two devices or frameworks: kernels, fused ops, time and floors per step, matched by op."""
        import orjson

        from tracekit.cost.devices import load_spec
        from tracekit.errors import warn
        from tracekit.report.compare import compare_sides, side_doc
        from tracekit.report.compare_view import to_csv, to_markdown, to_text

        for s in (spec_a, spec_b):
            if s is not None:
                load_spec(s)                                     # a bad spec is refused before loading
        sides = []
        for path, spec in ((a, spec_a), (b, spec_b)):
            trace = load_one(path, step_marker, spec, skip_steps if not path.endswith(".dot") else 0)
            for w in trace.warnings:
                warn(w)
            sides.append(side_doc(trace, path))
        doc = compare_sides(*sides)
        if format is CompareFormat.json:
            from tracekit.outputs import json_bytes
            sys.stdout.buffer.write(json_bytes(doc, orjson.OPT_SERIALIZE_NUMPY) + b"\n")
        elif format is CompareFormat.csv:
            sys.stdout.write(to_csv(doc))
        elif format is CompareFormat.markdown:
            sys.stdout.write(to_markdown(doc))
        else:
            sys.stdout.write(to_text(doc))
        sys.stdout.flush()
