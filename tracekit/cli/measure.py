"""The ``tracekit measure`` command (its work is in ``tracekit.measure``)."""

from __future__ import annotations

from typing import List, Optional

import typer


def register(app: typer.Typer) -> None:
    """Add the ``measure`` command to the tracekit CLI."""

    @app.command(context_settings={"help_option_names": ["-h", "--help"]})
    def measure(
        script: str = typer.Argument(..., help="the Python script to run (as `python script.py args`)"),
        args: Optional[List[str]] = typer.Argument(None, help="arguments for the script, after --"),
        step_fn: Optional[str] = typer.Option(None, "--step-fn", help="module:function whose call is the step "
                                              "(default: the root nn.Module's call)"),
        out: Optional[str] = typer.Option(None, "--out", "-o", help="OUT.json (and OUT.md); default "
                                          "<script>.measure.json"),
        warmup: int = typer.Option(3, "--warmup", help="calls after the first, before timing"),
        repeats: int = typer.Option(10, "--repeats", help="repeats per scope (median and spread over them)"),
        calls: Optional[int] = typer.Option(None, "--calls", help="calls per continuous repeat (default: ~50 ms)"),
        profile_steps: int = typer.Option(5, "--profile-steps", help="profiled steps, hot and again cold"),
        profile: bool = typer.Option(True, "--profile/--no-profile", metavar="", help="kernel time and floor from a short capture"),
        graph: bool = typer.Option(True, "--graph/--no-graph", metavar="", help="also try the step under CUDA-graph replay"),
        floor_us: Optional[float] = typer.Option(None, "--floor-us", help="the step's floor (µs) instead of explain's"),
        device: Optional[str] = typer.Option(None, "--device", help="device spec id for the floor (e.g. h200, cpu)"),
        spec: Optional[str] = typer.Option(None, "--spec", help="device spec file or id for the floor"),
        energy: bool = typer.Option(True, "--energy/--no-energy", metavar="", help="J/step and W from NVML (NVIDIA GPUs)"),
        energy_window: float = typer.Option(2.0, "--energy-window", help="seconds of back-to-back calls (>= 1)"),
        tokens_per_step: Optional[float] = typer.Option(None, "--tokens-per-step", help="tokens one step makes: tok/J, tok/s"),
        reset_args: str = typer.Option("auto", "--reset-args", help="copy tensor arguments back before each call: "
                                       "auto (those the first call changed), on (all), off"),
        flush_bytes: Optional[int] = typer.Option(None, "--flush-bytes", help="bytes written before each cold "
                                                  "step (default: twice the L2 / largest CPU cache)"),
        keep_trace: Optional[str] = typer.Option(None, "--keep-trace", help="keep the profiled steps' bundle here"),
        quiet: bool = typer.Option(False, "--quiet/--no-quiet", "-q", metavar="", help="no progress lines or table on stderr"),
        force: bool = typer.Option(False, "--force/--no-force", metavar="", help="replace existing -o files and a --keep-trace bundle"),
    ) -> None:
        """Time the script's step in five scopes side by side (kernel hot/cold, continuous, single call,
        end to end, first call) with its floor, and J/step from NVML."""
        from tracekit.measure.script import Options, measure_script

        options = Options(step_fn=step_fn, out=out, warmup=warmup, repeats=repeats, calls=calls,
                          profile_steps=profile_steps, profile=profile, graph=graph, floor_us=floor_us,
                          device=device, spec=spec, energy=energy, energy_window_s=energy_window,
                          tokens_per_step=tokens_per_step, reset_args=reset_args, keep_trace=keep_trace,
                          flush_bytes=flush_bytes, quiet=quiet, force=force)
        raise typer.Exit(measure_script(script, list(args or []), options))
