"""The explain command's work, without typer: the typer command (``cli.app.explain``) and the console
entry point's fast path (``cli.main``) both call ``explain_run`` with plain values, so the two give the
same output by construction."""

from __future__ import annotations

import os
import sys

from tracekit.cli.progress import loading
from tracekit.errors import TracekitError
from tracekit.gcpause import with_collector_paused


@with_collector_paused
def explain_run(trace: str, format: str = "table", step_marker: str | None = None, device: str | None = None,
                spec: str | None = None, top: int = 15, by: str | None = None, sort: str = "time",
                filter: str | None = None, depth: int | None = None, fusion: bool = False, skip_steps: int = 0,
                et: str | None = None, html: str | None = None, perfetto: str | None = None, force: bool = False,
                wide: bool = False, width: int | None = None, xlsx: str | None = None, devices: str | None = None,
                graph_captures: str | None = None, workers: int | None = None, dask: str | None = None,
                no_cache: bool = False):
    """``tracekit explain`` with its options as plain values (``format``, ``by``, ``sort``: the choice's
    text); returns what a multi-rank run returns, else None."""
    from pathlib import Path

    from tracekit.lean import cache_off_by_env, pandas_without_arrow
    from tracekit.limits import UserRegex
    from tracekit.ranks.discover import is_multi_rank

    multi_rank = is_multi_rank(Path(trace))
    if multi_rank:
        single = [name for name, given in (("--html", html), ("--perfetto", perfetto), ("--fusion", fusion),
                                           ("--et", et), ("--filter", filter), ("--devices", devices),
                                           ("--xlsx", xlsx), ("--by module", by == "module"),
                                           ("--depth", depth)) if given]
        if single:
            raise TracekitError(f"{trace} holds one trace per rank: {', '.join(single)} applies to one trace "
                                "(name one rank's trace or folder)")
    if depth is not None and by != "module":
        raise TracekitError("--depth sets how much of the module tree --by module shows: add --by module")
    pattern = UserRegex(filter, "--filter") if filter is not None else None     # refused before loading
    kept = None
    if not multi_rank and format == "json" and not (html or perfetto or devices or xlsx) \
            and by != "module" and not no_cache:
        from tracekit.model import doc_cache          # a warm cache: the output itself, before pandas is imported
        kept = doc_cache.doc_key(trace, step_marker, device, spec, skip_steps, et, graph_captures)
        got = doc_cache.read(kept)
        if got is not None:
            out, lines = got
            for line in lines:
                print(line, file=sys.stderr)
            doc_cache.copy_out(out, sys.stdout.buffer)
            sys.stdout.flush()
            return None
    if not multi_rank and (no_cache or cache_off_by_env()):
        pandas_without_arrow()                    # no Parquet to read or write: pandas needs no pyarrow
    if multi_rank:
        from tracekit.cli.ranks import run_ranks
        return run_ranks(trace, format, workers=workers, dask=dask, use_cache=not no_cache, skip=skip_steps,
                         step_marker=step_marker, device=device, spec=spec, graph_captures=graph_captures)
    from tracekit.api import load
    from tracekit.report.emit import emit

    check_outputs({"--html": html, "--perfetto": perfetto, "--xlsx": xlsx}, [trace, et, spec, graph_captures], force)
    if devices is not None:
        from tracekit.cost.multi import parse_devices
        specs = parse_devices(devices)                                             # refused before loading
    with loading(trace):
        analysis = load(trace, step_marker=step_marker, device=device, spec=spec, skip_steps=skip_steps,
                        et=et or None, cache=not no_cache, graph_captures=graph_captures)
    emit(analysis.traces, format, top=top, fusion=fusion, wide=wide, html=html, perfetto=perfetto,
                   by=by or "kernel", sort=sort, pattern=pattern,
                   devices=specs if devices is not None else None, xlsx=xlsx, width=width,
                   csv_by=by, depth=depth, keep_key=kept)
    return None


def check_outputs(outputs: dict, inputs: list, force: bool) -> None:
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
