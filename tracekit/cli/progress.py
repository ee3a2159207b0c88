"""Progress on stderr while a large input loads (explain, check, diff): a transient bar, drawn only when
stderr is a terminal."""

from __future__ import annotations

import sys

PROGRESS_BYTES = 8 << 20     # inputs at least this large on disk get a progress bar (on a TTY)


def loading(trace: str, stream=None):
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
