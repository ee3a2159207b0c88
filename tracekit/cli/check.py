"""The ``tracekit check`` command (its work is in ``tracekit.gate.check``)."""

from __future__ import annotations

import sys
from enum import Enum
from typing import Optional

import typer

from tracekit.cli.options import DeviceOpt, GraphCapturesOpt, NoCacheOpt, SpecOpt, StepMarker
from tracekit.gcpause import with_collector_paused
from tracekit.outputs import json_bytes


class CheckFormat(str, Enum):
    text = "text"
    json = "json"
    junit = "junit"
    github = "github"
    markdown = "markdown"


def register(app: typer.Typer) -> None:
    @app.command()
    @with_collector_paused
    def check(
        trace: str = typer.Argument(..., help="Trace, capture bundle or explain JSON to check"),
        baseline: Optional[str] = typer.Option(None, "--baseline", "-b",
                                               help="Trace, capture bundle or explain JSON to compare against"),
        rules: Optional[str] = typer.Option(None, "--rules", "-r", help="Rules file (TOML), see docs/check.md"),
        tolerance: Optional[str] = typer.Option(None, "--tolerance",
                                                help="Baseline noise allowance: 0.1 or 10% (time), "
                                                     "or time=10%,kernels=0 (default time=10%,kernels=0)"),
        format: CheckFormat = typer.Option(CheckFormat.text, "--format", "-f", help="text, json, junit, github or markdown"),
        skip_steps: Optional[int] = typer.Option(None, "--skip-steps", min=0,
                                                 help="Leading steps to drop (warm-up); overrides the rules file"),
        step_marker: Optional[str] = StepMarker,
        device: Optional[str] = DeviceOpt,
        spec: Optional[str] = SpecOpt,
        allow_device_mismatch: bool = typer.Option(False, "--allow-device-mismatch/--no-allow-device-mismatch",
                                                   metavar="", help="Compare with a baseline from another device (a warning, "
                                                        "not an error)"),
        graph_captures: Optional[str] = GraphCapturesOpt,
        no_cache: bool = NoCacheOpt,
    ) -> None:
        """Check a trace against rules and/or a baseline; exit 1 when a rule or the baseline fails."""
        from tracekit.gate.check import run_check, to_github, to_junit, to_markdown, to_text
        from tracekit.model import cache
        from tracekit.cli.progress import loading

        with cache.settings(not no_cache), loading(trace):
            doc = run_check(trace, baseline, rules, tolerance, skip_steps, step_marker, device, spec,
                            allow_device_mismatch=allow_device_mismatch, graph_captures=graph_captures)
        if format is CheckFormat.json:
            sys.stdout.buffer.write(json_bytes(doc) + b"\n")
        else:
            sys.stdout.write({"text": to_text, "junit": to_junit, "github": to_github,
                              "markdown": to_markdown}[format.value](doc))
        sys.stdout.flush()
        if not doc["ok"]:
            raise typer.Exit(1)
