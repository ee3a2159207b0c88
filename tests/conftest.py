"""Shared test helpers: paths to committed real traces, the CLI runners and a per-session explain cache.

``run_cli`` runs ``tracekit ARGS`` inside the test process: typer's CliRunner isolation (stdout and
stderr kept apart) around ``tracekit.cli.app.run``, the function the console script's ``main`` calls,
so exit codes and the one-line error mapping are the ones a user gets. ``capture`` always runs in a
subprocess (it executes scripts that exit, signal, replace sys.stdout, import torch), as does
anything given to ``run_cli_subprocess``: the few true end-to-end tests.

Analyses are cached per session: ``tracekit.analyze.analyze_path`` is wrapped so that each input and
set of arguments is analysed once and every caller (the CLI in process, load_side, a test)
gets its own deep copy. The key holds each input file's size and mtime (all files of a bundle), so a
file a test rewrites is analysed afresh. ``TRACEKIT_TEST_NO_CACHE=1`` turns the cache off.
"""

from __future__ import annotations

import copy
import inspect
import json
import os
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from typer.testing import CliRunner      # not click.testing: recent typer vendors its own click

ROOT = Path(__file__).resolve().parents[1]
DATA = Path(__file__).resolve().parent / "data"
PEERS = DATA / "peers"
H200 = ROOT / "captures" / "h200"

SUBPROCESS_COMMANDS = {"capture"}       # runs user scripts: os._exit, signals, closed stdio


@dataclass
class CliResult:
    """What a test reads of one CLI run; the fields a ``subprocess.CompletedProcess`` has."""

    args: list[str]
    returncode: int
    stdout: str
    stderr: str = field(repr=False)


def traced(fn, *args, **kwargs):
    """(``fn(*args, **kwargs)``, the bytes tracemalloc saw held after it, and their peak while it ran)."""
    import tracemalloc
    tracemalloc.start()
    try:
        result = fn(*args, **kwargs)
        held, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return result, held, peak


def run_cli_subprocess(*args, cwd: Path | None = None, env: dict | None = None) -> subprocess.CompletedProcess:
    """``python -m tracekit ARGS`` in a fresh interpreter, as a user would run it."""
    return subprocess.run([sys.executable, "-m", "tracekit", *map(str, args)], capture_output=True, text=True,
                          cwd=cwd or ROOT, env=env)


def _runner() -> CliRunner:
    try:
        return CliRunner(mix_stderr=False)      # typer on click < 8.2 mixes stderr into stdout unless told
    except TypeError:
        return CliRunner()                      # click ≥ 8.2, and typer's own copy, keep stderr apart


def run_cli(*args, cwd: Path | None = None):
    """``tracekit ARGS``: in this process (``capture`` in a subprocess); .returncode, .stdout, .stderr."""
    argv = [str(a) for a in args]
    if argv and argv[0] in SUBPROCESS_COMMANDS:
        return run_cli_subprocess(*argv, cwd=cwd)
    from tracekit.cli.app import run

    before = os.getcwd()
    with _runner().isolation() as streams:
        try:
            os.chdir(cwd or ROOT)
            code = run(argv)
        finally:
            os.chdir(before)
            sys.stdout.flush()
            sys.stderr.flush()
        out = streams[0].getvalue().decode("utf-8", "replace").replace("\r\n", "\n")
        err = streams[1].getvalue().decode("utf-8", "replace").replace("\r\n", "\n")
    return CliResult(argv, code, out, err)


def _fingerprint(path) -> tuple:
    """A key that changes when the file, or any file in the folder (a bundle, or the ``<stem>.kernels/``
    sources kept beside a raw trace), changes."""
    p = Path(path).resolve()
    if p.is_file():
        sources = p.parent / (p.name.split(".json")[0] + ".kernels")
        return (str(p), p.stat().st_mtime_ns, p.stat().st_size) + (_fingerprint(sources) if sources.is_dir() else ())
    if p.is_dir():
        files = sorted(f for f in p.rglob("*") if f.is_file())
        return (str(p), tuple((str(f), f.stat().st_mtime_ns, f.stat().st_size) for f in files))
    return (str(p),)


_EXPLAIN: dict[tuple, str] = {}


def explain_json(path, *extra: str) -> dict:
    """``tracekit explain PATH --format json EXTRA``, parsed; each (input, args) is analysed once per
    session and every call gets its own parsed copy (tests may change it freely)."""
    key = (_fingerprint(path), tuple(map(_arg_key, extra)))
    if key not in _EXPLAIN or os.environ.get("TRACEKIT_TEST_NO_CACHE"):
        proc = run_cli("explain", path, "--format", "json", *extra)
        assert proc.returncode == 0, proc.stderr
        _EXPLAIN[key] = proc.stdout
    return json.loads(_EXPLAIN[key])


_ANALYSES: dict[tuple, list] = {}


def _arg_key(value):
    """An argument as part of a cache key: files and folders (a --spec file, an --et file) by content."""
    try:
        if isinstance(value, (str, Path)) and str(value) and Path(value).exists():
            return _fingerprint(value)
    except (OSError, ValueError):          # not a possible path (a regex, a NUL byte)
        pass
    return repr(value)


def _cached_analyze(real):
    signature = inspect.signature(real)

    def analyze_path(path, *args, **kwargs):
        bound = signature.bind(path, *args, **kwargs)      # defaults filled in: the CLI passes every option
        bound.apply_defaults()
        rest = list(bound.arguments.items())[1:]
        key = (_fingerprint(path), *((name, _arg_key(v)) for name, v in rest))
        if key not in _ANALYSES:
            _ANALYSES[key] = real(path, *args, **kwargs)        # an error is raised each time, never kept
        return copy.deepcopy(_ANALYSES[key])
    analyze_path.__wrapped__ = real
    analyze_path.__doc__ = real.__doc__
    return analyze_path


@pytest.fixture(scope="session", autouse=True)
def _analysis_cache():
    """Each input analysed once per session (see the module docstring)."""
    if os.environ.get("TRACEKIT_TEST_NO_CACHE"):
        yield
        return
    import tracekit.analyze as analyze
    real = analyze.analyze_path
    analyze.analyze_path = _cached_analyze(real)
    try:
        yield
    finally:
        analyze.analyze_path = real


@pytest.fixture(scope="session", autouse=True)
def _trace_cache_off(tmp_path_factory):
    """tracekit's own cache of normalised tables (tracekit.model.cache) is off in tests, and points into
    this session's temporary folder: tests/test_cache.py turns it on where it tests it."""
    patch = pytest.MonkeyPatch()
    patch.setenv("TRACEKIT_CACHE_DIR", str(tmp_path_factory.mktemp("trace-cache")))
    patch.setenv("TRACEKIT_NO_CACHE", "1")
    yield
    patch.undo()


def analyze(path, **kwargs) -> list:
    """``tracekit.analyze.analyze_path`` through the session cache (a fresh copy on every call)."""
    import tracekit.analyze
    return tracekit.analyze.analyze_path(path, **kwargs)


@pytest.fixture(scope="session")
def peer_traces() -> list[Path]:
    return sorted(PEERS.glob("*/*.json.gz"))
