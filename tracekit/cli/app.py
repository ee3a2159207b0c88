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
from tracekit.cli.options import DaskOpt, DeviceOpt, NoCacheOpt, SpecOpt, StepMarker, WorkersOpt
from tracekit.errors import TracekitError
from tracekit.gcpause import with_collector_paused

app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False,
                  help="Where the GPU time went: kernels, fusion and roofline floors from profiler traces.")


@app.callback()
def _root() -> None:
    """Where the GPU time went: kernels, fusion and roofline floors from profiler traces."""


class By(str, Enum):
    kernel = "kernel"
    op = "op"
    category = "category"


class Sort(str, Enum):
    time = "time"
    gap = "gap"
    floor = "floor"
    count = "count"


PROGRESS_BYTES = 8 << 20     # inputs at least this large on disk get a progress bar (on a TTY)


def _loading(trace: str, stream=None):
    """A transient progress bar on stderr while a large input loads, only when stderr is a terminal
    (nothing in pipes, files or tests); else a context that does nothing."""
    import contextlib
    from pathlib import Path

    stream = stream if stream is not None else sys.stderr
    p = Path(trace)
    try:
        size = sum(f.stat().st_size for f in p.glob("*.json*")) if p.is_dir() else p.stat().st_size
    except OSError:
        size = 0
    if size < PROGRESS_BYTES or not getattr(stream, "isatty", lambda: False)():
        return contextlib.nullcontext()
    from rich.console import Console
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    progress = Progress(TextColumn(f"loading {p.name} ({size / 1e6:.0f} MB)"), BarColumn(), TimeElapsedColumn(),
                        console=Console(file=stream, markup=False, highlight=False), transient=True)

    @contextlib.contextmanager
    def bar():
        with progress:
            progress.add_task("load", total=None)        # the loader reports no fraction: a pulsing bar
            yield
    return bar()


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
    by: By = typer.Option(By.kernel, "--by", help="Top table groups by kernel (name, op, shapes), op or category"),
    sort: Sort = typer.Option(Sort.time, "--sort", help="Top table order, largest first: time, gap (time over "
                              "floor), floor or count (per step)"),
    filter: Optional[str] = typer.Option(None, "--filter", help="Top table: only kernels whose name or op matches "
                                         "this regex (Python syntax, searched)"),
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
    devices: Optional[str] = typer.Option(None, "--devices", help="Floors on these devices side by side, e.g. "
                                          "h200,rtx5090,apple-m5-pro (spec ids or files; measured ÷ floor on the "
                                          "trace's own device): docs/compare.md"),
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
    kept = None
    if not multi_rank and format is Format.json and not (html or perfetto or devices) and not no_cache:
        from tracekit.model import doc_cache          # a warm cache: the output itself, before pandas is imported
        kept = doc_cache.doc_key(trace, step_marker, device, spec, skip_steps, et)
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
    from tracekit.analyze import analyze_path
    from tracekit.model import cache
    from tracekit.report.emit import emit

    if multi_rank:
        from tracekit.cli.ranks import run_ranks
        single = [name for name, given in (("--html", html), ("--perfetto", perfetto), ("--fusion", fusion),
                                           ("--et", et), ("--filter", filter), ("--devices", devices)) if given]
        if single:
            raise TracekitError(f"{trace} holds one trace per rank: {', '.join(single)} applies to one trace "
                                "(name one rank's trace or folder)")
        return run_ranks(trace, format.value, workers=workers, dask=dask, use_cache=not no_cache, skip=skip_steps,
                         step_marker=step_marker, device=device, spec=spec)
    pattern = UserRegex(filter, "--filter") if filter is not None else None     # refused before loading
    if devices is not None:
        from tracekit.cost.multi import parse_devices
        specs = parse_devices(devices)                                             # refused before loading
    with cache.settings(not no_cache), _loading(trace):
        results = analyze_path(trace, step_marker=step_marker, device=device, spec=spec, skip=skip_steps,
                               **({"et": et} if et else {}))
    written = emit(results, format.value, top=top, fusion=fusion, wide=wide, html=html, perfetto=perfetto,
                   by=by.value, sort=sort.value, pattern=pattern, devices=specs if devices is not None else None)
    if kept is not None and written is not None:
        from tracekit.model import doc_cache
        doc_cache.write(kept, *written)


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
