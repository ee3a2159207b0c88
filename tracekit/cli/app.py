"""Command line: ``tracekit explain | capture | check | diff``.

Output for machines goes to stdout alone; progress, warnings and errors go to stderr.
Exit codes: 0 ok, 1 a check failed, 2 unusable input or usage.
"""

from __future__ import annotations

import sys
from enum import Enum
from typing import Optional

import typer

from tracekit.cli import capture, check, diff, ranks
from tracekit.cli.options import DaskOpt, DeviceOpt, GraphCapturesOpt, NoCacheOpt, SpecOpt, StepMarker, WorkersOpt
from tracekit.cli.progress import PROGRESS_BYTES, loading as _loading  # noqa: F401  (tests read them here)
from tracekit.cli.guard import error_status, prepare_stdout
from tracekit.errors import one_line, reset_warnings

app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False,
                  help="Where the GPU time went: kernels, fusion and roofline floors from profiler traces.")


def _version(value: bool) -> None:
    if value:
        from tracekit.version import __version__
        print(f"tracekit {__version__}")
        raise typer.Exit(0)


@app.callback()
def _root(version: bool = typer.Option(False, "--version", "-V", callback=_version, is_eager=True, metavar="",
                                       help="Print tracekit's version and exit")) -> None:
    """Where the GPU time went: kernels, fusion and roofline floors from profiler traces."""


class By(str, Enum):
    kernel = "kernel"
    op = "op"
    category = "category"
    module = "module"           # issue 23: the module tree (report.tree_view)


class Sort(str, Enum):
    time = "time"
    gap = "gap"
    floor = "floor"
    count = "count"


class Format(str, Enum):
    table = "table"
    json = "json"
    csv = "csv"
    markdown = "markdown"


@app.command()
def explain(
    trace: str = typer.Argument(..., help="trace.json[.gz], a capture bundle folder, an MLX .dot graph, or a "
                                "multi-rank folder (rankN/ bundles or one trace per rank: docs/ranks.md)"),
    format: Format = typer.Option(Format.table, "--format", "-f", help="table (people), json, csv or markdown"),
    step_marker: Optional[str] = StepMarker,
    device: Optional[str] = DeviceOpt,
    spec: Optional[str] = SpecOpt,
    top: int = typer.Option(15, "--top", min=1, help="Groups shown in the top table (table, markdown)"),
    by: Optional[By] = typer.Option(None, "--by", help="Top table groups by kernel (name, op, shapes; the default), "
                                    "op or category; module: the tree phase → nn.Module → annotation → op → kernel "
                                    "(docs/explain.md); CSV: one row per such group (without --by: per kernel execution)"),
    sort: Sort = typer.Option(Sort.time, "--sort", help="Top table order, largest first: time, gap (time over "
                              "floor), floor or count (per step)"),
    filter: Optional[str] = typer.Option(None, "--filter", help="Top table: only kernels whose name or op matches "
                                         "this regex (Python syntax, searched); --by module: module paths"),
    depth: Optional[int] = typer.Option(None, "--depth", min=1, help="--by module: levels of the tree shown "
                                        "(1 phases, 2 the model, 3 its blocks...; default 4)"),
    fusion: bool = typer.Option(False, "--fusion/--no-fusion", metavar="", help="Show the fusion view: kernel chain, intermediates, headroom"),
    skip_steps: int = typer.Option(0, "--skip-steps", min=0, help="Leading steps (warm-up, compile) left out of "
                                   "the per-step figures"),
    et: Optional[str] = typer.Option(None, "--et", help="The run's execution trace (et.json[.gz]): exact tensors "
                                     "and one-kernel floor (a capture bundle's et.json.gz is used by default)"),
    html: Optional[str] = typer.Option(None, "--html", help="Also write a self-contained HTML report (diagnosis, "
                                       "roofline, timeline, tables, fusion chain) to this file"),
    perfetto: Optional[str] = typer.Option(None, "--perfetto", help="Also write the trace with tracekit's facts in each "
                                           "kernel's args and per-step counters (Perfetto UI); .gz: gzipped"),
    force: bool = typer.Option(False, "--force/--no-force", metavar="", help="Replace an existing --html / --perfetto / --xlsx file"),
    wide: bool = typer.Option(False, "--wide/--no-wide", metavar="", help="Table: every column, whatever the terminal's width"),
    width: Optional[int] = typer.Option(None, "--width", min=40, help="Table width in columns (default: the "
                                        "terminal's; piped: $COLUMNS, else 200)"),
    xlsx: Optional[str] = typer.Option(None, "--xlsx", help="Also write an Excel workbook, one sheet per table "
                                       "(kernels, ops, categories, steps, devices; needs openpyxl)"),
    devices: Optional[str] = typer.Option(None, "--devices", help="Floors on these devices side by side, e.g. "
                                          "h200,rtx5090,apple-m5-pro (spec ids or files; measured ÷ floor on the "
                                          "trace's own device): docs/compare.md"),
    graph_captures: Optional[str] = GraphCapturesOpt,
    workers: Optional[int] = WorkersOpt,
    dask: Optional[str] = DaskOpt,
    no_cache: bool = NoCacheOpt,
) -> None:
    """Classify every kernel, count kernels per step, and set each against its roofline floor."""
    from tracekit.cli.explain import explain_run     # the work, without typer (the entry point's fast path: cli.main)

    return explain_run(trace, format.value, step_marker, device, spec, top, by.value if by is not None else None,
                       sort.value, filter, depth, fusion, skip_steps, et, html, perfetto, force, wide, width, xlsx,
                       devices, graph_captures, workers, dask, no_cache)


for command in (capture, check, diff, ranks):
    command.register(app)
from tracekit.cli import measure as measure_command  # noqa: E402  (tracekit measure, issue 13)
measure_command.register(app)
from tracekit.cli import compare as compare_command  # noqa: E402  (tracekit compare, issue 17)
compare_command.register(app)
from tracekit.cli import calibrate as calibrate_command  # noqa: E402  (tracekit calibrate, issue 17)
calibrate_command.register(app)


def run(args: Optional[list[str]] = None) -> int:
    """Run the CLI on ``args`` (default: ``sys.argv[1:]``) and return the exit status; warnings are held
    to its end (printed once each, none after an error: tracekit.cli.held_warnings)."""
    argv = sys.argv[1:] if args is None else [str(a) for a in args]
    if argv[:1] in (["capture"], ["measure"]):          # the user's script runs here: its stderr is its own
        return _run(argv)
    from tracekit.cli.held_warnings import held_warnings

    with held_warnings() as state:
        state["code"] = code = _run(argv)
    return code


def _run(argv: list[str]) -> int:
    """One command.

    Unusable input (TracekitError) is one line on stderr and status 2; a missing optional package
    is one line naming the extra that installs it; anything else is one "internal error" line
    (TRACEKIT_DEBUG=1 re-raises it). ``main`` and the in-process test runner both call this.
    """
    prepare_stdout(argv)
    try:
        from typer import _click as click          # recent typer vendors its own click
    except ImportError:
        import click
    no_command = getattr(click.exceptions, "NoArgsIsHelpError", ())

    reset_warnings()
    if not argv:                                  # bare `tracekit`: the help, on stdout, status 0
        argv = ["--help"]
    try:
        code = app(args=argv, prog_name="tracekit", standalone_mode=False)
        return code if isinstance(code, int) else 0
    except SystemExit as exc:                     # a command that ends with sys.exit
        return error_status(exc, argv)
    except no_command as exc:   # a group without its command: its help, status 0
        print(exc.ctx.get_help() if exc.ctx is not None else exc.format_message())
        return 0
    except click.exceptions.ClickException as exc:      # usage: one line, not click's boxed usage text
        print(f"tracekit: error: {one_line(_usage_message(exc, argv))}", file=sys.stderr)
        return 2 if isinstance(exc, click.exceptions.UsageError) else exc.exit_code
    except typer.Abort:
        print("tracekit: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:                      # TracekitError and the rest: one line (cli.guard)
        return error_status(exc, argv)
    except KeyboardInterrupt as exc:
        return error_status(exc, argv)


BOOL_WORDS = {"true", "false", "yes", "no", "on", "off", "1", "0"}


def _usage_message(exc, argv: list[str]) -> str:
    """click's message, with the command it concerns and where to read more (``--help``); a flag given a
    value (``--fusion true``) says how flags are written."""
    ctx = getattr(exc, "ctx", None)
    where = ctx.command_path if ctx is not None else "tracekit"
    valued = [a for a, b in zip(argv, argv[1:]) if a.startswith("--") and "=" not in a and b.lower() in BOOL_WORDS]
    forms = {o: [*p.opts, *p.secondary_opts] for p in (ctx.command.params if ctx is not None else [])
             if getattr(p, "is_flag", False) for o in (*p.opts, *p.secondary_opts)}
    hint = next((f"; {a} is a flag and takes no value: write {' or '.join(f for f in forms[a] if f.startswith('--'))}"
                 for a in valued if a in forms), "")
    return f"{exc.format_message()}{hint} (see '{where} --help')"


def main() -> None:
    """Every command through typer, one line on stderr and exit 2 for unusable input (the console script's
    entry point is ``tracekit.cli.main:main``, which takes a plain ``explain -f json`` past typer)."""
    sys.exit(run())


if __name__ == "__main__":
    main()
