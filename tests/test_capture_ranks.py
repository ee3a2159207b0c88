"""Multi-rank capture (``tracekit capture --nproc N``) on CPU with gloo: one bundle per rank, the worst
exit code, and ``tracekit ranks`` / ``explain`` on the result. Expected figures are derived here from
the raw trace JSON, independently of tracekit.report.ranks."""

from __future__ import annotations

import gzip
import json
import shutil
from collections import Counter
from pathlib import Path

import pytest

from conftest import ROOT, explain_json, run_cli
from tracekit import bundle
from tracekit.capture.launch import launcher_rank_out, worst_exit_code
from tracekit.errors import TracekitError

torch = pytest.importorskip("torch")
pytest.importorskip("torch.distributed")
DDP2 = ROOT / "captures" / "cpu" / "ddp2"
SCRIPT = DDP2 / "ddp_train.py"
COMMITTED = DDP2 / "bundle"
GRAD_BYTES = (64 * 128 + 128 + 128 * 10 + 10) * 4        # the model's fp32 gradients: one DDP bucket
SIZE = {"float": 4, "long int": 8, "int": 4}


def events(trace: Path) -> list[dict]:
    return json.loads(gzip.decompress(trace.read_bytes()))["traceEvents"]


def raw_counts(trace: Path) -> dict:
    """What the test expects, straight from the events: CPU ops, c10d ops, gloo work (count, bytes)."""
    ev = [e for e in events(trace) if e.get("ph") == "X"]
    gloo: dict[str, list[int]] = {}
    for e in ev:
        if e["name"].startswith("gloo:"):
            a = e.get("args", {})
            n = 1
            for d in (a.get("Input Dims") or [[None]])[0]:
                n = n * d if d is not None else 0
            size = n * SIZE[a["Input type"][0]] if a.get("Input type") else None
            cur = gloo.setdefault(e["name"], [0, 0])
            cur[0] += 1
            cur[1] = None if size is None or cur[1] is None else cur[1] + size
    return {"cpu_ops": sum(e.get("cat") == "cpu_op" for e in ev),
            "c10d_ops": sum(e.get("cat") == "cpu_op" and e["name"].startswith("c10d::") for e in ev),
            "steps": sum(e.get("cat") == "user_annotation" and e["name"].startswith("ProfilerStep#") for e in ev),
            "gloo": gloo}


def ranks_json(folder: Path) -> list[dict]:
    proc = run_cli("ranks", folder, "--format", "json")
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)["ranks"]


@pytest.fixture(scope="module")
def ddp(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("ranks") / "ddp"
    proc = run_cli("capture", "--nproc", "2", "--no-et", SCRIPT, "-o", out, "--", "--steps", "2")
    assert proc.returncode == 0, proc.stderr
    return out


def test_nproc_writes_one_bundle_per_rank(ddp):
    assert sorted(p.name for p in ddp.iterdir()) == ["meta.json", "rank0", "rank1"]
    top = json.loads((ddp / "meta.json").read_text())
    assert top["world_size"] == 2 and top["state"] == "done" and top["exit_code"] == 0
    assert [(r["rank"], r["exit_code"], r["state"]) for r in top["ranks"]] == [(0, 0, "done"), (1, 0, "done")]
    for rank in (0, 1):
        sub = ddp / f"rank{rank}"
        assert sorted(p.name for p in sub.iterdir()) == ["meta.json", "trace.json.gz"]
        own = json.loads((sub / "meta.json").read_text())
        assert (own["rank"], own["world_size"], own["distributed_backend"]) == (rank, 2, "gloo")
        doc = json.loads(gzip.decompress((sub / "trace.json.gz").read_bytes()))
        # the profiler started before init_process_group: tracekit adds what Kineto could not
        assert doc["distributedInfo"] == {"backend": "gloo", "rank": rank, "world_size": 2}


def test_ranks_counts_match_the_raw_traces(ddp):
    rows = ranks_json(ddp)
    assert [r["rank"] for r in rows] == [0, 1]
    for row in rows:
        want = raw_counts(ddp / row["trace"])
        assert row["exit_code"] == 0 and row["steps"] == want["steps"] == 2
        assert row["cpu_ops"] == want["cpu_ops"] and row["c10d_ops"] == want["c10d_ops"]
        assert {k: [v["count"], v["bytes"]] for k, v in row["comm_work"].items()} == want["gloo"]
        # DDP: one gradient all-reduce per step, plus the script's own all-reduce of the loss
        assert want["gloo"]["gloo:all_reduce"] == [3, 2 * GRAD_BYTES + 4]
        assert row["kernels"] == 0 and row["hta"] is None


def test_committed_bundle_figures():
    rows = ranks_json(COMMITTED)
    for row in rows:
        want = raw_counts(COMMITTED / row["trace"])
        assert row["cpu_ops"] == want["cpu_ops"] and row["c10d_ops"] == want["c10d_ops"] == 11
        assert {k: [v["count"], v["bytes"]] for k, v in row["comm_work"].items()} == want["gloo"] == {
            "gloo:all_gather": [1, 8], "gloo:all_reduce": [5, 4 * GRAD_BYTES + 4],
            "gloo:barrier": [1, None], "gloo:broadcast": [4, 38560]}
    assert [(r["rank"], r["exit_code"], r["steps"], r["cpu_ops"]) for r in rows] == [(0, 0, 4, 716), (1, 0, 4, 714)]
    doc = explain_json(COMMITTED / "rank0")            # explain works per rank: each rankN/ is a bundle
    assert [s["name"] for s in doc["steps"]] == [f"ProfilerStep#{i}" for i in range(4)]
    ops = Counter(k["op"] for k in doc["kernels"])
    assert ops["c10d::allreduce_"] == 1                # the loss all-reduce (the gradient ones run in autograd)


def test_a_failing_rank_sets_the_exit_code_and_loses_nothing(tmp_path):
    out = tmp_path / "fail"
    proc = run_cli("capture", "--nproc", "2", "--no-et", SCRIPT, "-o", out, "--", "--steps", "3", "--fail-rank", "1")
    assert proc.returncode == 3, proc.stderr
    top = json.loads((out / "meta.json").read_text())
    codes = {r["rank"]: r["exit_code"] for r in top["ranks"]}
    assert codes[1] == 3 and codes[0] != 0 and top["exit_code"] == 3
    rows = {r["rank"]: r for r in ranks_json(out)}
    assert rows[1]["exit_code"] == 3 and rows[1]["steps"] == 1 and rows[1]["state"] == "done"
    assert rows[0]["state"] == "done" and rows[0]["trace"] == "rank0/trace.json.gz"


def test_a_hung_rank_is_stopped_after_the_grace_and_keeps_its_bundle(tmp_path):
    job = tmp_path / "job.py"
    job.write_text("import os, sys, time, torch\nm = torch.nn.Linear(4, 2)\nm(torch.ones(1, 4))\n"
                   "if os.environ['RANK'] == '1':\n    sys.exit(5)\ntime.sleep(60)\n")
    proc = run_cli("capture", "--nproc", "2", "--no-et", "--grace", "0.5", job, "-o", tmp_path / "b")
    assert proc.returncode == 5, proc.stderr
    top = json.loads((tmp_path / "b" / "meta.json").read_text())
    assert [(r["exit_code"], r["stopped_by_tracekit"], r["state"]) for r in top["ranks"]] == \
        [(143, True, "done"), (5, False, "done")]
    assert (tmp_path / "b" / "rank0" / "trace.json.gz").is_file()


def test_worst_exit_code_is_the_first_rank_that_failed_on_its_own():
    assert worst_exit_code({0: (1.0, 0), 1: (2.0, 0)}, set()) == 0
    assert worst_exit_code({0: (3.0, 1), 1: (2.0, 3)}, set()) == 3
    assert worst_exit_code({0: (9.0, 143), 1: (2.0, 5)}, {0}) == 5
    assert worst_exit_code({0: (9.0, 143), 1: (2.0, 0)}, {0}) == 143


def test_force_replaces_a_multi_rank_bundle_but_not_a_user_file_inside_a_rank(tmp_path):
    out = tmp_path / "b"
    shutil.copytree(COMMITTED, out)
    (out / "rank1" / "notes.md").write_text("mine")
    with pytest.raises(TracekitError, match="rank1/notes.md"):
        bundle.prepare_out(out, force=True)
    assert (out / "rank1" / "notes.md").exists() and (out / "rank0" / "trace.json.gz").exists()
    (out / "rank1" / "notes.md").unlink()
    bundle.prepare_out(out, force=True)
    assert list(out.iterdir()) == []


def test_under_torchrun_each_rank_writes_its_own_folder(monkeypatch):
    monkeypatch.delenv("TRACEKIT_RANK_OF", raising=False)
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "2")
    assert launcher_rank_out("out", "train.py") == str(Path("out") / "rank1")
    assert launcher_rank_out(None, "train.py") == str(Path("train.tracekit") / "rank1")
    monkeypatch.setenv("WORLD_SIZE", "1")
    assert launcher_rank_out("out", "train.py") == "out"


def test_nproc_errors_are_one_line(tmp_path):
    proc = run_cli("capture", "--nproc", "0", SCRIPT, "-o", tmp_path / "x")
    assert proc.returncode == 2 and "--nproc must be at least 1" in proc.stderr
