"""The ``tracekit capture`` command (its work is in ``tracekit.capture.script``)."""

from __future__ import annotations

from typing import List, Optional

import typer


def register(app: typer.Typer) -> None:
    """Add the ``capture`` command to the tracekit CLI."""

    @app.command(context_settings={"help_option_names": ["-h", "--help"]})
    def capture(
        script: str = typer.Argument(..., help="the Python script to run (as `python script.py args`)"),
        args: Optional[List[str]] = typer.Argument(None, help="arguments for the script, after --"),
        out: Optional[str] = typer.Option(None, "--out", "-o", help="bundle folder (default: <script>.tracekit)"),
        steps: Optional[int] = typer.Option(None, "--steps", help="stop profiling after N steps (the script runs on)"),
        warmup: int = typer.Option(0, "--warmup", help="leave the first N steps out of the profile"),
        step_fn: Optional[str] = typer.Option(None, "--step-fn", help="module:function whose every call is one step"),
        quiet: bool = typer.Option(False, "--quiet/--no-quiet", "-q", metavar="", help="no progress or status lines on stderr"),
        force: bool = typer.Option(False, "--force/--no-force", metavar="", help="replace an existing bundle (only tracekit's own files)"),
        execution_trace: bool = typer.Option(True, "--et/--no-et",
                                             metavar="", help="also record a PyTorch execution trace (tensor ids, outputs)"),
        nproc: Optional[int] = typer.Option(None, "--nproc", help="start N processes, one per rank, as "
                                            "`torchrun --nproc-per-node N` would: one bundle per rank in OUT/rankR/"),
        grace: float = typer.Option(30.0, "--grace", help="with --nproc: seconds the other ranks get to end on "
                                    "their own after one fails, before SIGTERM (their bundles are still written)"),
    ) -> None:
        """Profile a script into a bundle folder (trace.json.gz, meta.json, kernels/) for `explain`."""
        if nproc is not None:
            from tracekit.capture.launch import capture_ranks
            raise typer.Exit(capture_ranks(script, list(args or []), out, nproc, steps=steps, warmup=warmup,
                                           step_fn=step_fn, quiet=quiet, force=force,
                                           execution_trace=execution_trace, grace_s=grace))
        from tracekit.capture.script import capture_script
        code = capture_script(script, list(args or []), out, steps, warmup, step_fn, quiet, force,
                              execution_trace)
        raise typer.Exit(code)
