"""Command line: ``tracekit explain | capture | check | diff``.

Output for machines goes to stdout alone; progress, warnings and errors go to stderr.
Exit codes: 0 ok, 1 a check failed, 2 unusable input or usage.
"""

from __future__ import annotations

import os
import sys
from enum import Enum
from typing import Optional

import typer

from tracekit.cli import capture, check, diff, ranks
from tracekit.cli.options import DeviceOpt, SpecOpt, StepMarker
from tracekit.errors import TracekitError

app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False,
                  help="Where the GPU time went: kernels, fusion and roofline floors from profiler traces.")


@app.callback()
def _root() -> None:
    """Where the GPU time went: kernels, fusion and roofline floors from profiler traces."""


class Format(str, Enum):
    table = "table"
    json = "json"
    csv = "csv"
    markdown = "markdown"


@app.command()
def explain(
    trace: str = typer.Argument(..., help="trace.json[.gz], a capture bundle folder, or an MLX .dot graph"),
    format: Format = typer.Option(Format.table, "--format", "-f", help="table (people), json, csv or markdown"),
    step_marker: Optional[str] = StepMarker,
    device: Optional[str] = DeviceOpt,
    spec: Optional[str] = SpecOpt,
    top: int = typer.Option(15, "--top", help="Kernel groups shown per step in the table"),
    fusion: bool = typer.Option(False, "--fusion", help="Show the fusion view: kernel chain, intermediates, headroom"),
    skip_steps: int = typer.Option(0, "--skip-steps", min=0, help="Leading steps (warm-up, compile) left out of "
                                   "the per-step figures"),
    et: Optional[str] = typer.Option(None, "--et", help="The run's execution trace (et.json[.gz]): exact tensors "
                                     "and one-kernel floor (a capture bundle's et.json.gz is used by default)"),
    html: Optional[str] = typer.Option(None, "--html", help="Also write a self-contained HTML report (diagnosis, "
                                       "roofline, timeline, tables, fusion chain) to this file"),
    perfetto: Optional[str] = typer.Option(None, "--perfetto", help="Also write the trace with tracekit's facts in each "
                                           "kernel's args and per-step counters (Perfetto UI); .gz: gzipped"),
    wide: bool = typer.Option(False, "--wide", help="Table: every column, whatever the terminal's width"),
) -> None:
    """Classify every kernel, count kernels per step, and set each against its roofline floor."""
    from tracekit.analyze import analyze_path
    from tracekit.report.emit import emit

    results = analyze_path(trace, step_marker=step_marker, device=device, spec=spec, skip=skip_steps,
                           **({"et": et} if et else {}))
    emit(results, format.value, top=top, fusion=fusion, wide=wide, html=html, perfetto=perfetto)


for command in (capture, check, diff, ranks):
    command.register(app)
from tracekit.cli import measure as measure_command  # noqa: E402  (tracekit measure, issue 13)
measure_command.register(app)


# optional packages a command may need: the extra that installs each (pyproject.toml)
EXTRAS = {"torch": "capture", "mlx": "mlx", "pydot": "dot", "hta": "hta", "psutil": "hta"}


def run(args: Optional[list[str]] = None) -> int:
    """Run the CLI on ``args`` (default: ``sys.argv[1:]``) and return the exit status.

    Unusable input (TracekitError) is one line on stderr and status 2; a missing optional package
    is one line naming the extra that installs it; anything else is one "internal error" line
    (TRACEKIT_DEBUG=1 re-raises it). ``main`` and the in-process test runner both call this.
    """
    argv = sys.argv[1:] if args is None else [str(a) for a in args]
    try:
        app(args=argv, prog_name="tracekit")
    except SystemExit as exc:                     # click ends every run, success included, this way
        code = exc.code
        return code if isinstance(code, int) else (0 if code is None else 1)
    except TracekitError as exc:
        print(f"tracekit: {exc}", file=sys.stderr)
        return exc.exit_code
    except BrokenPipeError:
        return 0
    except KeyboardInterrupt:
        print("tracekit: interrupted", file=sys.stderr)
        return 130
    except ModuleNotFoundError as exc:
        top = (exc.name or "").split(".")[0]
        if top not in EXTRAS or os.environ.get("TRACEKIT_DEBUG"):
            return _internal_error(exc, argv)
        print(f"tracekit: this input needs the optional package '{top}', which is not installed "
              f"(pip install 'tracekit[{EXTRAS[top]}]')", file=sys.stderr)
        return 2
    except Exception as exc:                      # a bug, or input we did not foresee: still one line
        return _internal_error(exc, argv)
    return 0


def _internal_error(exc: BaseException, argv: list[str]) -> int:
    if os.environ.get("TRACEKIT_DEBUG"):
        raise exc
    where = " ".join(argv[:2])
    print(f"tracekit: internal error on '{where}': {type(exc).__name__}: {exc} "
          "(set TRACEKIT_DEBUG=1 for the traceback, and please report it)", file=sys.stderr)
    return 2


def main() -> None:
    """Console-script entry point: one line on stderr and exit 2 for unusable input."""
    sys.exit(run())


if __name__ == "__main__":
    main()
