"""Run the per-rank stage over every rank (serially, on a local process pool, or on Dask distributed),
hand each rank's table (Parquet bytes) to the cross-rank queries (and to ``--keep``'s folder).

Default: a ``concurrent.futures.ProcessPoolExecutor`` with min(ranks, CPUs) workers (spawned, so a
worker starts from a clean interpreter). ``workers=1``: in this process. ``dask``: a scheduler address
(``tcp://host:8786``), ``"local"`` for a ``distributed.LocalCluster`` on this machine, or a
``distributed.Client`` already made; the stage is the same function either way.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import re
import sys
from pathlib import Path

from tracekit.errors import TracekitError
from tracekit.errors import warn as say_warning
from tracekit.ranks.discover import rank_inputs
from tracekit.ranks.query import STEPS_FILE, cross_rank, steps_table


def kernels_file(key: int) -> str:
    return f"kernels-{key:06d}.parquet"


def tasks_of(folder: Path, step_marker=None, device=None, spec=None, skip: int = 0, use_cache: bool = True,
             graph_captures=None) -> list[dict]:
    return [{"key": r.key, "label": r.label, "path": r.path, "rank_hint": r.rank_hint, "step_marker": step_marker,
             "device": device, "spec": spec, "skip": skip, "cache": use_cache,
             "graph_captures": None if graph_captures is None else str(graph_captures)} for r in rank_inputs(folder)]


def usable_cpus() -> int:
    """CPUs this process may run on (its affinity mask: a container's or taskset's share, not the host's
    count that ``os.cpu_count`` reports)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):         # macOS and Windows have no affinity mask
        return os.cpu_count() or 1


def run_stages(tasks: list[dict], workers: int | None = None, dask=None) -> list[dict]:
    """The stage's result for every task, in task order."""
    from tracekit.ranks.stage import rank_stage

    if dask is not None:
        return _on_dask(tasks, dask)
    n = min(len(tasks), workers or usable_cpus())
    with ranks_progress(len(tasks)) as done:
        if n <= 1:
            return [done(rank_stage(t)) for t in tasks]
        from concurrent.futures import ProcessPoolExecutor
        with ProcessPoolExecutor(max_workers=n, mp_context=multiprocessing.get_context("spawn")) as pool:
            return [done(r) for r in pool.map(rank_stage, tasks)]


@contextlib.contextmanager
def ranks_progress(total: int, stream=None):
    """A transient "ranks analysed: k/N" bar on stderr, only when stderr is a terminal (nothing in pipes,
    files or tests); yields ``done(result)``, which counts one rank and hands its result back."""
    stream = stream if stream is not None else sys.stderr
    if total < 2 or not getattr(stream, "isatty", lambda: False)():
        yield lambda r: r
        return
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    with Progress(TextColumn("ranks analysed"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=Console(file=stream, markup=False, highlight=False), transient=True) as bar:
        task = bar.add_task("ranks", total=total)

        def done(result):
            bar.advance(task)
            return result
        yield done


def _on_dask(tasks: list[dict], dask) -> list[dict]:
    """The stages on Dask distributed: ``dask`` is an address, "local" or a Client."""
    try:
        from distributed import Client, LocalCluster
    except ImportError:
        raise TracekitError("--dask needs Dask distributed: pip install 'tracekit[dask]'") from None
    from tracekit.ranks.stage import rank_stage

    if isinstance(dask, Client):
        return dask.gather(dask.map(rank_stage, tasks, pure=False))
    if dask == "local":
        with LocalCluster(n_workers=min(len(tasks), usable_cpus()), threads_per_worker=1,
                          dashboard_address=None) as cluster, Client(cluster) as client:
            return client.gather(client.map(rank_stage, tasks, pure=False))
    try:
        client = Client(dask, timeout="20s")
    except (OSError, TimeoutError, ValueError) as exc:
        raise TracekitError(f"--dask {dask}: cannot reach the scheduler ({type(exc).__name__}: {exc})") from None
    with client:
        return client.gather(client.map(rank_stage, tasks, pure=False))


def write_tables(results: list[dict], out: Path) -> None:
    """Each rank's table as kernels-KEY.parquet, and every rank's steps in one steps.parquet (``--keep``);
    the folder's earlier tables (its own files, tracekit.outputs checked that) are replaced."""
    import io

    import pyarrow.parquet as pq

    from tracekit.outputs import write_atomic

    try:
        out.mkdir(parents=True, exist_ok=True)
        for old in out.iterdir():
            if is_table_file(old):
                old.unlink()
    except OSError as exc:
        raise TracekitError(f"--keep {out}: cannot write ({exc.strerror or exc})") from None
    for r in results:
        if r["table"] is not None:
            write_atomic(out / kernels_file(r["key"]), r["table"], "--keep")
    buf = io.BytesIO()
    pq.write_table(steps_table(results).combine_chunks(), buf)
    write_atomic(out / STEPS_FILE, buf.getvalue(), "--keep")


def is_table_file(entry) -> bool:
    """A file ``--keep`` writes (and may replace): kernels-KEY.parquet or steps.parquet."""
    return entry.is_file() and not entry.is_symlink() and (
        entry.name == STEPS_FILE or re.fullmatch(r"kernels-\d{6,}\.parquet", entry.name) is not None)


def analyse_ranks(folder: str | Path, step_marker=None, device=None, spec=None, skip: int = 0,
                  workers: int | None = None, dask=None, use_cache: bool = True, keep: str | Path | None = None,
                  graph_captures=None) -> dict:
    """The cross-rank document of a multi-rank folder (ranks.query.cross_rank), its per-rank stages run
    in parallel. ``keep``: also write the Parquet tables there."""
    tasks = tasks_of(Path(folder), step_marker, device, spec, skip, use_cache, graph_captures)
    results = run_stages(tasks, workers, dask)
    if all(r["error"] for r in results):
        raise TracekitError(f"{folder}: no rank could be analysed ({results[0]['label']}: {results[0]['error']})")
    if keep is not None:
        write_tables(results, Path(keep))
    return cross_rank(results)


def warn(doc: dict) -> None:
    for w in doc.get("warnings", []):
        say_warning(w)
