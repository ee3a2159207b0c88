"""The ``tracekit diff`` command (its work is in ``tracekit.gate.diff``)."""

from __future__ import annotations

import sys
from enum import Enum
from typing import Optional

import orjson
import typer

from tracekit.cli.options import DeviceOpt, NoCacheOpt, SpecOpt, StepMarker
from tracekit.gcpause import with_collector_paused
from tracekit.outputs import json_bytes


class DiffBy(str, Enum):
    module = "module"           # issue 23: per module instance (gate.module_rules)


class DiffFormat(str, Enum):
    text = "text"
    json = "json"
    markdown = "markdown"


def register(app: typer.Typer) -> None:
    @app.command()
    @with_collector_paused
    def diff(
        a: str = typer.Argument(..., help="Trace, capture bundle or explain JSON (the before side)"),
        b: str = typer.Argument(..., help="Trace, capture bundle or explain JSON (the after side)"),
        format: DiffFormat = typer.Option(DiffFormat.text, "--format", "-f", help="text, json or markdown"),
        fail_on_regression: bool = typer.Option(False, "--fail-on-regression/--no-fail-on-regression",
                                                metavar="", help="Exit 1 when B has more kernels per step, lost fused ops, "
                                                     "or kernel time per step up beyond tolerance"),
        tolerance: Optional[str] = typer.Option(None, "--tolerance",
                                                help="Noise allowance: 0.1 or 10% (time), or time=10%,kernels=0"),
        skip_steps: int = typer.Option(0, "--skip-steps", min=0, help="Leading steps to drop (warm-up)"),
        top: int = typer.Option(10, "--top", help="Kernels listed per group (text, markdown)"),
        step_marker: Optional[str] = StepMarker,
        device: Optional[str] = DeviceOpt,
        spec: Optional[str] = SpecOpt,
        allow_device_mismatch: bool = typer.Option(False, "--allow-device-mismatch/--no-allow-device-mismatch",
                                                   metavar="", help="Compare traces from different devices (a warning, "
                                                        "not an error)"),
        by: Optional[DiffBy] = typer.Option(None, "--by", help="module: also per nn.Module instance (kernels and "
                                            "time per step; a module that gains kernels is a regression)"),
        graph_captures: Optional[str] = typer.Option(None, "--graph-captures", help="The serving engine's "
                                                     "graph-capture traces of both sides (default: capture_traces/ "
                                                     "beside each trace)"),
        no_cache: bool = NoCacheOpt,
    ) -> None:
        """Line up two traces step by step: kernels, time, floors, fused ops gained or lost."""
        from tracekit.gate.baseline import load_side, parse_tolerance, warn
        from tracekit.gate.diff import compare, to_markdown, to_text
        from tracekit.model import cache

        tol = parse_tolerance(tolerance)
        from tracekit.cli.progress import loading

        with cache.settings(not no_cache):
            modules = by is DiffBy.module
            with loading(a):
                sa = load_side(a, step_marker, device, spec, skip_steps, graph_captures, modules=modules)
            with loading(b):
                sb = sa if b == a else load_side(b, step_marker, device, spec, skip_steps, graph_captures,
                                                 modules=modules)  # A A: once
        warn(sa), warn(sb)
        doc = compare(sa, sb, tol, allow_device_mismatch=allow_device_mismatch)
        if modules:
            from tracekit.gate.module_rules import module_diff, module_lines, module_regressions
            doc["modules"] = module_diff(sa.in_steps, sb.in_steps, sa.n_steps, sb.n_steps).to_dict("records")
            doc["regressions"] += module_regressions(doc["modules"], tol["kernels"])
        if format is DiffFormat.json:
            sys.stdout.buffer.write(json_bytes(doc, orjson.OPT_SERIALIZE_NUMPY) + b"\n")
        elif format is DiffFormat.markdown:
            sys.stdout.write(to_markdown(doc, top))
        else:
            sys.stdout.write(to_text(doc, top))
        if modules and format is not DiffFormat.json:
            lines = module_lines(doc["modules"], top)
            if format is DiffFormat.markdown:        # a fixed-width block in a PR comment
                lines = [f"**{lines[0]}**", "", "```", *lines[1:], "```"]
            sys.stdout.write("\n" + "\n".join(lines) + "\n")
        sys.stdout.flush()
        if fail_on_regression and doc["regressions"]:
            raise typer.Exit(1)
