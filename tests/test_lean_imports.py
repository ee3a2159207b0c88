"""Imports a command pays only when it uses them (issue 26): explain -f json without the cache imports
neither networkx nor rich nor pyarrow, and hiding pyarrow from pandas leaves its output unchanged.
Real trace: the H200 eager block capture. Subprocesses, so that this test's own imports do not count;
nothing here is timed."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import orjson

ROOT = Path(__file__).resolve().parents[1]
TRACE = ROOT / "captures" / "h200" / "block_eager.json.gz"
HEAVY = ("networkx", "rich", "pyarrow", "statistics")
RUN = ("import sys; from tracekit.cli.app import run; code = run(sys.argv[1:]); "
       "print(sorted(m for m in {heavy!r} if m in sys.modules), code, file=sys.stderr)")


def _explain(*args: str, env: dict | None = None, prelude: str = "") -> tuple[bytes, str]:
    out = subprocess.run([sys.executable, "-c", prelude + RUN.format(heavy=HEAVY), "explain", str(TRACE), *args],
                         capture_output=True, cwd=ROOT, timeout=300,
                         env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})})
    return out.stdout, out.stderr.decode().strip().splitlines()[-1]


def test_json_explain_without_cache_imports_no_networkx_rich_or_pyarrow():
    _, loaded = _explain("-f", "json", "--no-cache")
    assert loaded == "[] 0"
    _, loaded = _explain("-f", "json", env={"TRACEKIT_NO_CACHE": "1"})       # the cache off by environment
    assert loaded == "[] 0"


def test_people_table_still_draws_with_rich():
    _, loaded = _explain("--no-cache")
    assert loaded.startswith("['networkx', 'rich']") and loaded.endswith(" 0")


def test_hiding_pyarrow_from_pandas_changes_no_output():
    lean, _ = _explain("-f", "json", "--no-cache")
    full, loaded = _explain("-f", "json", "--no-cache", prelude="import pyarrow, pandas; ")
    assert "pyarrow" in loaded
    doc = orjson.loads(lean)
    assert doc == orjson.loads(full)
    assert doc["summary"]["kernels"] > 0
