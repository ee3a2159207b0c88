"""Command line: ``tracekit explain | capture | check | diff``.

Output for machines goes to stdout alone; progress, warnings and errors go to stderr.
Exit codes: 0 ok, 1 a check failed, 2 unusable input or usage.
"""

from __future__ import annotations

import errno
import os
import sys
from enum import Enum
from typing import Optional

import typer

from tracekit.cli import capture, check, diff, ranks
from tracekit.cli.options import DaskOpt, DeviceOpt, GraphCapturesOpt, NoCacheOpt, SpecOpt, StepMarker, WorkersOpt
from tracekit.cli.progress import PROGRESS_BYTES, loading as _loading  # noqa: F401  (tests read them here)
from tracekit.errors import TracekitError, one_line, reset_warnings
from tracekit.gcpause import with_collector_paused

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
@with_collector_paused
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
    from pathlib import Path

    from tracekit.lean import cache_off_by_env, pandas_without_arrow
    from tracekit.limits import UserRegex
    from tracekit.ranks.discover import is_multi_rank

    multi_rank = is_multi_rank(Path(trace))
    if multi_rank:
        single = [name for name, given in (("--html", html), ("--perfetto", perfetto), ("--fusion", fusion),
                                           ("--et", et), ("--filter", filter), ("--devices", devices),
                                           ("--xlsx", xlsx), ("--by module", by is By.module),
                                           ("--depth", depth)) if given]
        if single:
            raise TracekitError(f"{trace} holds one trace per rank: {', '.join(single)} applies to one trace "
                                "(name one rank's trace or folder)")
    if depth is not None and by is not By.module:
        raise TracekitError("--depth sets how much of the module tree --by module shows: add --by module")
    pattern = UserRegex(filter, "--filter") if filter is not None else None     # refused before loading
    kept = None
    if not multi_rank and format is Format.json and not (html or perfetto or devices or xlsx) \
            and by is not By.module and not no_cache:
        from tracekit.model import doc_cache          # a warm cache: the output itself, before pandas is imported
        kept = doc_cache.doc_key(trace, step_marker, device, spec, skip_steps, et, graph_captures)
        got = doc_cache.read(kept)
        if got is not None:
            out, lines = got
            for line in lines:
                print(line, file=sys.stderr)
            sys.stdout.buffer.write(out)
            sys.stdout.flush()
            return
    if not multi_rank and (no_cache or cache_off_by_env()):
        pandas_without_arrow()                    # no Parquet to read or write: pandas needs no pyarrow
    if multi_rank:
        from tracekit.cli.ranks import run_ranks
        return run_ranks(trace, format.value, workers=workers, dask=dask, use_cache=not no_cache, skip=skip_steps,
                         step_marker=step_marker, device=device, spec=spec, graph_captures=graph_captures)
    from tracekit.api import load
    from tracekit.report.emit import emit

    _check_outputs({"--html": html, "--perfetto": perfetto, "--xlsx": xlsx}, [trace, et, spec, graph_captures], force)
    if devices is not None:
        from tracekit.cost.multi import parse_devices
        specs = parse_devices(devices)                                             # refused before loading
    with _loading(trace):
        analysis = load(trace, step_marker=step_marker, device=device, spec=spec, skip_steps=skip_steps,
                        et=et or None, cache=not no_cache, graph_captures=graph_captures)
    written = emit(analysis.traces, format.value, top=top, fusion=fusion, wide=wide, html=html, perfetto=perfetto,
                   by=(by or By.kernel).value, sort=sort.value, pattern=pattern,
                   devices=specs if devices is not None else None, xlsx=xlsx, width=width,
                   csv_by=by.value if by is not None else None, depth=depth, keep_json=kept is not None)
    if kept is not None and written is not None:
        from tracekit.model import doc_cache
        doc_cache.write(kept, *written)


def _check_outputs(outputs: dict, inputs: list, force: bool) -> None:
    """Each output file checked before loading (tracekit.outputs): never an input, replaced only with --force."""
    from tracekit.outputs import check_output_file

    given = {k: v for k, v in outputs.items() if v is not None}
    for option, path in given.items():
        check_output_file(path, option, inputs, force)
    seen: dict[str, str] = {}
    for option, path in given.items():
        other = seen.setdefault(os.path.realpath(path), option)
        if other != option:
            raise TracekitError(f"{other} and {option} name the same file")


for command in (capture, check, diff, ranks):
    command.register(app)
from tracekit.cli import measure as measure_command  # noqa: E402  (tracekit measure, issue 13)
measure_command.register(app)
from tracekit.cli import compare as compare_command  # noqa: E402  (tracekit compare, issue 17)
compare_command.register(app)
from tracekit.cli import calibrate as calibrate_command  # noqa: E402  (tracekit calibrate, issue 17)
calibrate_command.register(app)


# optional packages a command may need: the extra that installs each (pyproject.toml)
EXTRAS = {"torch": "capture", "mlx": "mlx", "pydot": "dot", "hta": "hta", "psutil": "hta"}


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
    if argv[:1] not in (["capture"], ["measure"]):       # (those run the user's script in this process)
        if sys.stdout is None:                            # started with stdout closed
            sys.stdout = _ClosedStream()
        elif hasattr(sys.stdout, "reconfigure"):          # a file name that is not UTF-8, printed: escaped
            try:
                sys.stdout.reconfigure(errors="backslashreplace")
            except (ValueError, OSError):
                pass
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
        code = exc.code
        return code if isinstance(code, int) else (0 if code is None else 1)
    except no_command as exc:   # a group without its command: its help, status 0
        print(exc.ctx.get_help() if exc.ctx is not None else exc.format_message())
        return 0
    except click.exceptions.ClickException as exc:      # usage: one line, not click's boxed usage text
        print(f"tracekit: error: {one_line(_usage_message(exc, argv))}", file=sys.stderr)
        return 2 if isinstance(exc, click.exceptions.UsageError) else exc.exit_code
    except typer.Abort:
        print("tracekit: interrupted", file=sys.stderr)
        return 130
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
    except OSError as exc:                        # stdout full, closed or gone; files are checked earlier
        _drop_stdout()
        what = exc.strerror or type(exc).__name__
        print(f"tracekit: cannot write the output ({what})" if exc.errno in _WRITE_ERRNOS or exc.filename is None
              else f"tracekit: {what}: {exc.filename!r}", file=sys.stderr)
        return 2
    except Exception as exc:                      # a bug, or input we did not foresee: still one line
        return _internal_error(exc, argv)
    return 0


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
_WRITE_ERRNOS = {getattr(errno, n) for n in ("ENOSPC", "EBADF", "EIO", "EROFS", "EDQUOT", "EFBIG", "EPIPE")
                 if hasattr(errno, n)}


class _ClosedStream:
    """sys.stdout when the process started with it closed: writing is an OSError (one line, exit 2)."""

    def write(self, *args):
        raise OSError(errno.EBADF, "stdout is closed")

    flush = write
    buffer = property(lambda self: self)
    closed = False

    def isatty(self) -> bool:
        return False

    def fileno(self) -> int:
        raise OSError(errno.EBADF, "stdout is closed")


def _drop_stdout() -> None:
    """Point stdout at /dev/null so the interpreter's last flush of what could not be written stays quiet."""
    if isinstance(sys.stdout, _ClosedStream):
        sys.stdout = None
        return
    try:
        sys.stdout.flush()
    except (OSError, ValueError, AttributeError):
        pass
    from tracekit.outputs import stdout_to_devnull
    stdout_to_devnull()


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
