"""Shared test helpers: paths to committed real traces and a CLI runner."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DATA = Path(__file__).resolve().parent / "data"
PEERS = DATA / "peers"
H200 = ROOT / "captures" / "h200"


def run_cli(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    """``python -m tracekit ARGS`` as a user would run it."""
    return subprocess.run([sys.executable, "-m", "tracekit", *map(str, args)], capture_output=True, text=True,
                          cwd=cwd or ROOT)


def explain_json(path, *extra: str) -> dict:
    proc = run_cli("explain", path, "--format", "json", *extra)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


@pytest.fixture(scope="session")
def peer_traces() -> list[Path]:
    return sorted(PEERS.glob("*/*.json.gz"))
