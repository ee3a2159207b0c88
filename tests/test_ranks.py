"""tracekit ranks: HTA's per-rank breakdown on a real A100 NCCL trace (HTA's own test data)."""

from __future__ import annotations

import json
import shutil

import pytest

from conftest import PEERS, run_cli

pytest.importorskip("hta")


def test_rank_breakdown_of_a_real_nccl_trace(tmp_path):
    shutil.copy(PEERS / "hta/nccl_parser_config_nccl_data.json.gz", tmp_path / "rank0.json.gz")
    proc = run_cli("ranks", tmp_path, "--format", "json")
    assert proc.returncode == 0, proc.stderr
    (rank,) = json.loads(proc.stdout)["ranks"]          # stdout holds the JSON alone
    assert rank["rank"] == 0
    assert rank["kernel_us"] == 435586.0
    assert (rank["compute_pct"], rank["non_compute_pct"], rank["idle_pct"]) == (17.26, 4.97, 77.78)
    assert rank["comm_comp_overlap_pct"] == 14.31


def test_ranks_errors_are_one_line(tmp_path):
    proc = run_cli("ranks", tmp_path / "missing")
    assert proc.returncode == 2 and "not a folder" in proc.stderr and "Traceback" not in proc.stderr
    proc = run_cli("ranks", tmp_path)
    assert proc.returncode == 2 and "holds no" in proc.stderr
