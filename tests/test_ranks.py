"""Multi-rank runs (tracekit.ranks; ``tracekit ranks DIR`` and ``tracekit explain DIR``) on real traces:
HTA's two NCCL ranks (tests/data/ranks), HTA's A100 NCCL trace, the committed 2-rank CPU/gloo DDP
bundle, and a small SYNTHETIC set from bench/make_ranks.py. Every expected figure is derived here from
the raw trace JSON (plain Python, no tracekit code), then set against the DuckDB answers."""

from __future__ import annotations

import gzip
import json
import math
import shutil
import statistics
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import DATA, PEERS, ROOT, run_cli

HTA2 = DATA / "ranks" / "hta_trace_filter"
NCCL = PEERS / "hta" / "nccl_parser_config_nccl_data.json.gz"
DDP2 = ROOT / "captures" / "cpu" / "ddp2" / "bundle"
ITEM = {"long": 8, "unsigned char": 1, "signed char": 1, "int": 4, "float": 4}


def events(path: Path) -> list[dict]:
    return [e for e in json.loads(gzip.decompress(path.read_bytes()))["traceEvents"] if e.get("ph") == "X"]


def ranks_doc(folder: Path, *extra) -> dict:
    proc = run_cli("ranks", folder, "--format", "json", "--workers", "1", *extra)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def merged(spans: list[tuple[float, float]]) -> list[list[float]]:
    out: list[list[float]] = []
    for b, e in sorted(spans):
        if out and b <= out[-1][1]:
            out[-1][1] = max(out[-1][1], e)
        else:
            out.append([b, e])
    return out


def overlapped(comm: list[dict], compute: list[dict]) -> float:
    busy = merged([(k["ts"], k["ts"] + k["dur"]) for k in compute if k["dur"] > 0])
    return sum(max(0.0, min(k["ts"] + k["dur"], e) - max(k["ts"], b)) for k in comm for b, e in busy)


def launchers(ev: list[dict], comm: list[dict]) -> list[dict]:
    """The CPU op that launched each kernel: the innermost CPU op around its runtime launch (same
    correlation) on the launch's thread."""
    launch = {e["args"]["correlation"]: e for e in ev if e.get("cat") == "cuda_runtime" and "correlation" in e["args"]}
    ops = [e for e in ev if e.get("cat") == "cpu_op"]
    out = []
    for k in comm:
        run = launch[k["args"]["correlation"]]
        out.append(min((o for o in ops if o["tid"] == run["tid"] and o["ts"] <= run["ts"] <= o["ts"] + o["dur"]),
                       key=lambda o: o["dur"]))
    return out


def collective(kernel: dict, op: dict) -> tuple[str, float | None]:
    """(collective, S bytes): a c10d op names it, else the kernel name; S the op's largest tensor."""
    name = "all_gather" if op["name"] == "c10d::_allgather_base_" else \
        "send_recv" if op["name"] == "record_param_comms" and "SendRecv" in kernel["name"] else None
    sizes = [ITEM[t] * math.prod(d) for d, t in zip(op["args"]["Input Dims"], op["args"]["Input type"])
             if t in ITEM and d]
    return name, (float(max(sizes)) if sizes else None)


@pytest.fixture(scope="module")
def hta2() -> dict:
    return ranks_doc(HTA2)


def test_each_rank_kernel_time_steps_and_overlap_come_from_its_own_trace(hta2):
    assert [(r["key"], r["rank"], r["label"]) for r in hta2["ranks"]] == \
        [(0, 0, "sampled_rank-0.json.gz"), (1, 1, "sampled_rank-1.json.gz")]
    for row in hta2["ranks"]:
        ev = events(HTA2 / row["label"])
        kernels = [e for e in ev if e.get("cat") == "kernel"]
        comm = [k for k in kernels if k["name"].startswith("ncclKernel_")]
        compute = [k for k in kernels if not k["name"].startswith("ncclKernel_")]
        steps = [e["dur"] for e in ev if e.get("cat") == "user_annotation" and e["name"].startswith("ProfilerStep#")]
        assert row["kernels"] == len(kernels) and len(comm) == 10
        assert row["kernel_us"] == sum(k["dur"] for k in kernels)
        assert row["comm_kernel_us"] == sum(k["dur"] for k in comm)
        assert row["compute_us"] == sum(k["dur"] for k in compute)
        assert row["steps"] == len(steps) == 2 and row["step_us_median"] == statistics.median(steps)
        assert row["overlap_us"] == pytest.approx(overlapped(comm, compute))
        assert row["overlap_pct"] == pytest.approx(100 * overlapped(comm, compute) / sum(k["dur"] for k in comm))
    kernel_us = [sum(e["dur"] for e in events(HTA2 / r["label"]) if e.get("cat") == "kernel") for r in hta2["ranks"]]
    assert kernel_us == [606519.0, 651026.0]            # each rank its own figure (HTA gave its span)


def test_steps_stragglers_and_skew(hta2):
    durs = {}
    for row in hta2["ranks"]:
        durs[row["rank"]] = {e["name"]: e["dur"] for e in events(HTA2 / row["label"])
                             if e.get("cat") == "user_annotation" and e["name"].startswith("ProfilerStep#")}
    assert durs == {0: {"ProfilerStep#551": 607312, "ProfilerStep#552": 622928},
                    1: {"ProfilerStep#551": 607904, "ProfilerStep#552": 630639}}
    for s in hta2["steps"]:
        mine = [durs[0][s["name"]], durs[1][s["name"]]]
        assert (s["min_us"], s["max_us"], s["median_us"]) == (min(mine), max(mine), statistics.median(mine))
        assert s["slowest_rank"] == 1 and s["excess_pct"] == pytest.approx(100 * (max(mine) / statistics.median(mine) - 1))
    straggler = hta2["summary"]["straggler"]
    assert (straggler["rank"], straggler["slowest_steps"]) == (1, 2)
    medians = [statistics.median(d.values()) for d in durs.values()]
    assert hta2["summary"]["step_skew_pct"] == pytest.approx(100 * (max(medians) - min(medians)) / statistics.median(medians))


def test_collectives_are_matched_by_order_and_waiting_is_split_from_transfer(hta2):
    calls = {}             # rank -> collective -> [(kernel, S)] in time order
    for row in hta2["ranks"]:
        ev = events(HTA2 / row["label"])
        comm = sorted((e for e in ev if e.get("cat") == "kernel" and e["name"].startswith("ncclKernel_")),
                      key=lambda k: k["ts"])
        for k, op in zip(comm, launchers(ev, comm)):
            name, size = collective(k, op)
            calls.setdefault(row["rank"], {}).setdefault(name, []).append((k, size))
    assert {n: len(v) for n, v in calls[0].items()} == {n: len(v) for n, v in calls[1].items()} == \
        {"send_recv": 8, "all_gather": 2}
    by = {c["collective"]: c for c in hta2["collectives"]}
    wait = {0: 0.0, 1: 0.0}
    last = {0: 0, 1: 0}
    for name in ("send_recv", "all_gather"):
        pairs = list(zip(calls[0][name], calls[1][name]))
        shortest = [min(a[0]["dur"], b[0]["dur"]) for a, b in pairs]
        c = by[name]
        assert (c["calls"], c["ranks"], c["partial_calls"]) == (len(pairs), 2, 0)
        assert c["transfer_us"] == sum(shortest)
        assert c["bytes"] == sum(max(x for x in (a[1], b[1]) if x is not None) for a, b in pairs
                                 if a[1] is not None or b[1] is not None)
        for (a, b), m in zip(pairs, shortest):
            wait[0] += a[0]["dur"] - m
            wait[1] += b[0]["dur"] - m
            last[0] += a[0]["dur"] < b[0]["dur"]
            last[1] += b[0]["dur"] < a[0]["dur"]
    assert by["all_gather"]["bytes"] == 2 * 1073741824        # the gathered 1 GiB buffer, twice
    for row in hta2["ranks"]:
        assert row["wait_us"] == wait[row["rank"]] and row["last_arrivals"] == last[row["rank"]]
    assert any("world size 128 but 2 rank trace(s)" in w for w in hta2["warnings"])


def test_two_traces_claiming_one_rank_keep_two_rows(tmp_path):
    for name in ("a_rank0.json.gz", "b_rank0.json.gz"):
        shutil.copy(HTA2 / "sampled_rank-0.json.gz", tmp_path / name)
    proc = run_cli("ranks", tmp_path, "--format", "json", "--workers", "1")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert [(r["key"], r["rank"], r["label"]) for r in doc["ranks"]] == [(0, 0, "a_rank0.json.gz"), (1, 0, "b_rank0.json.gz")]
    assert doc["ranks"][0]["kernel_us"] == doc["ranks"][1]["kernel_us"] == 606519.0
    assert "rank 0 is claimed by 2 traces (a_rank0.json.gz, b_rank0.json.gz)" in proc.stderr


def test_explain_of_a_multi_rank_capture_bundle_analyses_every_rank():
    proc = run_cli("explain", DDP2, "--format", "json", "--workers", "1")
    assert proc.returncode == 0, proc.stderr                 # was "the bundle holds no trace"
    doc = json.loads(proc.stdout)
    assert [(r["rank"], r["label"], r["exit_code"], r["error"]) for r in doc["ranks"]] == \
        [(0, "rank0", 0, None), (1, "rank1", 0, None)]
    # the collectives at top level of each rank's trace (not nested in another CPU op of its thread)
    for row in doc["ranks"]:
        ops = [e for e in events(DDP2 / row["label"] / "trace.json.gz") if e.get("cat") == "cpu_op"]
        top = [e for e in ops if e["name"].startswith("c10d::") and not any(
            o is not e and o["tid"] == e["tid"] and o["ts"] <= e["ts"] and e["ts"] + e["dur"] <= o["ts"] + o["dur"]
            for o in ops)]
        assert sorted(e["name"] for e in top) == ["c10d::allgather_", "c10d::allreduce_", "c10d::barrier"] + \
            ["c10d::broadcast_"] * 4
    assert {c["collective"]: c["calls"] for c in doc["collectives"]} == \
        {"broadcast": 4, "all_gather": 1, "barrier": 1, "all_reduce": 1}
    assert run_cli("explain", DDP2, "--html", "x.html").returncode == 2


def test_a_collectives_bytes_and_floor_on_a100(tmp_path):
    """HTA's A100 trace: PyTorch wrote each NCCL kernel's collective into its args; bus bytes and the
    NVLink floor (A100 SXM: 600 GB/s both ways, 300 per direction) from those."""
    shutil.copy(NCCL, tmp_path / "rank0.json.gz")
    doc = ranks_doc(tmp_path)
    ev = events(NCCL)
    kernels = [e for e in ev if e.get("cat") == "kernel" and e["name"].startswith("ncclKernel_")]
    size = {"allreduce": 0, "broadcast": 0}
    for k in kernels:
        a = k["args"]
        assert a["Group size"] == 2
        size[a["Collective name"]] += a["In msg nelems"] * {"Float": 4, "Long": 8}[a["dtype"]]
    by = {c["collective"]: c for c in doc["collectives"]}
    assert (by["all_reduce"]["calls"], by["broadcast"]["calls"]) == (15, 6)
    assert by["all_reduce"]["bytes"] == size["allreduce"] and by["broadcast"]["bytes"] == size["broadcast"]
    # two ranks: all-reduce bus bytes 2(n-1)/n S = S; broadcast S; floor = bus bytes / 300 GB/s
    assert by["all_reduce"]["bus_bytes"] == size["allreduce"]
    assert by["all_reduce"]["floor_us"] == pytest.approx(size["allreduce"] / 300e3)
    assert by["broadcast"]["floor_us"] == pytest.approx(size["broadcast"] / 300e3)
    (row,) = doc["ranks"]
    assert row["comm_floor_us"] == pytest.approx((size["allreduce"] + size["broadcast"]) / 300e3)


def test_the_dask_path_and_the_process_pool_give_the_serial_answer():
    distributed = pytest.importorskip("distributed")
    from tracekit.ranks.run import analyse_ranks

    serial = analyse_ranks(HTA2, workers=1)
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False,
                                  dashboard_address=None) as cluster, distributed.Client(cluster) as client:
        on_dask = analyse_ranks(HTA2, dask=client)
    assert on_dask == serial
    assert analyse_ranks(HTA2, workers=2) == serial          # two spawned worker processes


def test_a_planted_straggler_in_a_synthetic_set(tmp_path):
    """SYNTHETIC: 4 ranks made from HTA's A100 trace, rank 2 running its compute 20% longer and reaching
    every collective last (bench/make_ranks.py)."""
    out = tmp_path / "syn"
    subprocess.run([sys.executable, str(ROOT / "bench" / "make_ranks.py"), "--ranks", "4", "--out", str(out),
                    "--straggler", "2", "--slow", "1.2"], check=True, capture_output=True)
    doc = ranks_doc(out)
    s = doc["summary"]
    assert (s["ranks"], s["world_size"], s["straggler"]["rank"], s["straggler"]["slowest_steps"]) == (4, 4, 2, 3)
    assert s["straggler"]["excess_pct"] == pytest.approx(20.0)
    assert {c["collective"]: (c["calls"], c["ranks"]) for c in doc["collectives"]} == \
        {"all_reduce": (15, 4), "broadcast": (6, 4)}
    rows = {r["rank"]: r for r in doc["ranks"]}
    assert rows[2]["last_arrivals"] == 21 and rows[2]["wait_us"] == 0
    assert all(rows[r]["wait_us"] > 0 for r in (0, 1, 3))


def test_ranks_errors_are_one_line(tmp_path):
    proc = run_cli("ranks", tmp_path / "missing")
    assert proc.returncode == 2 and "not a folder" in proc.stderr and "Traceback" not in proc.stderr
    proc = run_cli("ranks", tmp_path)
    assert proc.returncode == 2 and "holds no" in proc.stderr
    (tmp_path / "rank1.json").write_text("{")                       # one rank unusable: the others still count
    shutil.copy(HTA2 / "sampled_rank-0.json.gz", tmp_path / "rank0.json.gz")
    proc = run_cli("ranks", tmp_path, "--format", "json", "--workers", "1")
    assert proc.returncode == 0, proc.stderr
    rows = json.loads(proc.stdout)["ranks"]
    assert rows[0]["kernel_us"] == 606519.0 and "invalid JSON" in rows[1]["error"]
    (tmp_path / "rank0.json.gz").unlink()
    (tmp_path / "rank2.json").write_text("[]")
    proc = run_cli("ranks", tmp_path, "--workers", "1")
    assert proc.returncode == 2 and "no rank could be analysed" in proc.stderr


def test_hta_cross_check_of_the_overlap(tmp_path):
    pytest.importorskip("hta")
    shutil.copy(NCCL, tmp_path / "rank0.json.gz")
    (row,) = ranks_doc(tmp_path, "--hta")["ranks"]
    kernels = [e for e in events(NCCL) if e.get("cat") == "kernel"]
    comm = [k for k in kernels if k["name"].startswith("ncclKernel_")]
    exact = 100 * overlapped(comm, [k for k in kernels if k not in comm]) / sum(k["dur"] for k in comm)
    assert row["overlap_pct"] == pytest.approx(exact) and round(exact, 2) == 15.61
    # HTA reads times as whole µs (15.35% on rounded times) and sorts kernels by its own name patterns
    assert row["hta"]["comm_comp_overlap_pct"] == 14.31


def test_table_markdown_and_csv_of_the_same_run(hta2):
    csv_out = run_cli("explain", HTA2, "--format", "csv", "--workers", "1").stdout.splitlines()
    assert len(csv_out) == 3 and csv_out[0].startswith("key,rank,label,error,steps")
    assert [line.split(",")[9] for line in csv_out[1:]] == [str(r["kernel_us"]) for r in hta2["ranks"]]
    md = run_cli("ranks", HTA2, "--format", "markdown", "--workers", "1").stdout
    assert "Straggler: rank 1" in md and "| send_recv | - | 8 |" in md and "| all_gather | - | 2 |" in md
    table = run_cli("ranks", HTA2, "--workers", "1").stdout
    assert max(len(line) for line in table.splitlines()) <= 80 and "ProfilerStep#552" in table


def test_many_steps_are_columns_not_a_dict_per_step(tmp_path):
    """SYNTHETIC (bench/bench_many_steps.py's trace: ProfilerStep#i at 100·i µs lasting 90 µs, one CPU
    op): two ranks of 20k steps keep their steps as columns in the stage result and the per-step rows of
    the document are made when read (issue 27), with the values of a 5-step run."""
    import pyarrow as pa

    sys.path.insert(0, str(ROOT / "bench"))
    from bench_many_steps import write_trace

    from tracekit.model.rows import Rows
    from tracekit.ranks.run import analyse_ranks, tasks_of
    from tracekit.ranks.stage import rank_stage

    docs = {}
    for n in (20_000, 5):
        folder = tmp_path / f"s{n}"
        folder.mkdir()
        for r in (0, 1):
            write_trace(folder / f"rank{r}.json", n)
        if n > 5:
            got = rank_stage(tasks_of(folder, use_cache=False)[0])
            assert isinstance(got["steps"], pa.Table) and got["steps"].num_rows == n    # no list of dicts
        docs[n] = analyse_ranks(folder, workers=1, use_cache=False)
    big, small = docs[20_000], docs[5]
    assert isinstance(big["steps"], Rows) and len(big["steps"]) == 20_000 and not big["steps"].kept
    assert big["steps"][:4] == small["steps"][:4]
    assert big["steps"][19_999]["name"] == "ProfilerStep#19999"
    for s in big["steps"][:4]:                     # the two ranks are copies: every step 90 µs, no skew
        assert (s["ranks"], s["median_us"], s["min_us"], s["max_us"], s["excess_pct"], s["skew_pct"]) == \
            (2, 90.0, 90.0, 90.0, 0.0, 0.0)
    assert [(r["steps"], r["step_us_median"]) for r in big["ranks"]] == [(20_000, 90.0)] * 2
    from tracekit.report.multirank import to_markdown
    md = to_markdown(big)                          # the first and last 20 of 20k steps, as explain's table
    assert "40 of 20,000 steps" in md and "| ProfilerStep#19 |" in md and "| ProfilerStep#19980 |" in md
    assert "| ProfilerStep#20 |" not in md and "| ProfilerStep#19979 |" not in md
