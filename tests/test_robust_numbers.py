"""Issue 27, overflowing numbers and spec values: every number that feeds a gate is finite and ≥ 0, or the
row has no cost (a counted warning) or the input is refused (exit 2, one line).

Inputs: the committed real trace captures/h200/seed_eager_b1.json.gz (NVIDIA H200, 5 steps) with one
thing changed by the test, TraceLens's real B200 trace with its NCCL message size changed, builtin spec
files with one number changed, and test_robustness's synthetic one-kernel trace (labelled there)."""

from __future__ import annotations

import gzip
import json

import pytest

from conftest import PEERS, ROOT, run_cli
from test_robustness import EAGER, L, K, O, _doc, _one_line_error, _trace, _write

H200_SPEC = ROOT / "tracekit" / "specs" / "h200.toml"
RULES = "[max_gap]\nall = 1.0\n"     # a step at ≤ 1.0× its floor: every kernel at its roofline; no real eager step


def _kernels(proc) -> list[dict]:
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)["kernels"]


@pytest.mark.parametrize("dims, why", [
    ([[-4, 8], [8, 16]], "negative dim"),
    ([[2 ** 40, 2 ** 40], [2 ** 40, 2 ** 40]], "2^80 elements per tensor (past 2^63)"),
    ([[2 ** 54], [2]], "one dim past 2^53"),
])
def test_out_of_range_input_dims_are_dropped_and_counted(tmp_path, dims, why):
    doc = _trace(K(), L(), O(args={"External id": 7, "Input Dims": dims, "Input type": ["float", "float"]}))
    proc = run_cli("explain", _write(tmp_path, doc), "-f", "json")
    [row] = _kernels(proc)
    assert row["flops"] is None and row["bytes"] is None and row["floor_us"] is None and row["gap"] is None, why
    assert "1 ops have Input Dims/type/Strides/Concrete Inputs" in proc.stderr and "2^53" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1


def test_the_same_dims_in_range_keep_their_cost(tmp_path):
    # mm of [4, 8] x [8, 16] float: 2·4·8·16 = 1,024 FLOPs; bytes (4·8 + 8·16 + 4·16)·4 = 896
    doc = _trace(K(), L(), O(args={"External id": 7, "Input Dims": [[4, 8], [8, 16]], "Input type": ["float", "float"]}))
    [row] = _kernels(run_cli("explain", _write(tmp_path, doc), "-f", "json"))
    assert (row["flops"], row["bytes"]) == (1024.0, 896.0)


def test_max_gap_still_fails_when_one_op_claims_an_overflowing_shape(tmp_path):
    rules = tmp_path / "r.toml"
    rules.write_text(RULES)
    real = tmp_path / "real.json"
    real.write_text(json.dumps(_doc(EAGER)))
    assert run_cli("check", real, "--rules", rules).returncode == 1
    doc = _doc(EAGER)                                # per step: one addmm kernel, one clamp_min kernel
    ops = [e for e in doc["traceEvents"] if e.get("cat") == "cpu_op" and e.get("name") == "aten::addmm"]
    assert len(ops) == 5
    for op in ops:                                   # every addmm claims 2^40 x 2^40 tensors
        op["args"]["Input Dims"] = [[2 ** 40, 2 ** 40] if isinstance(d, list) and len(d) == 2 else d
                                    for d in op["args"]["Input Dims"]]
    huge = tmp_path / "huge.json"
    huge.write_text(json.dumps(doc))
    proc = run_cli("check", huge, "--rules", rules)
    assert proc.returncode == 1, proc.stdout + proc.stderr       # it passed (gap 0.00×) before issue 27
    kernels = _kernels(run_cli("explain", huge, "-f", "json"))
    floors = [k["floor_us"] for k in kernels if k["floor_us"] is not None]
    # what keeps a floor is clamp_min alone: 1,024 bf16 elements read and written, 4,096 B at 4,800 GB/s
    assert floors == pytest.approx([4096 / 4.8e6] * 5)
    assert all((k["flops"] or 0) >= 0 and (k["bytes"] or 0) >= 0 for k in kernels)


@pytest.mark.parametrize("value", ["1e-300", "inf", "nan", "5e-324", "1e308", "0", "-1", "-inf", "1e6"])
def test_a_spec_bandwidth_outside_the_sane_range_is_refused(tmp_path, value):
    spec = tmp_path / "s.toml"
    spec.write_text(H200_SPEC.read_text().replace("value = 4800,", f"value = {value},"))
    line = _one_line_error(run_cli("explain", EAGER, "--spec", spec, "-f", "json"), "bandwidth_gbs")
    assert "sane range" in line or "positive number" in line
    assert "RuntimeWarning" not in line


@pytest.mark.parametrize("section, old, new", [
    ("peak", "value = 989.5,", "value = 1e-300,"), ("peak", "value = 989.5,", "value = 1e300,"),
    ("launch", "value = 0.96,", "value = 1e-9,"), ("link", "value = 450,", "value = inf,"),
    ("memory", "value = 62914560,", "value = 1e300,"),
])
def test_every_spec_number_is_bounded(tmp_path, section, old, new):
    spec = tmp_path / "s.toml"
    text = H200_SPEC.read_text()
    assert old in text
    spec.write_text(text.replace(old, new, 1))
    _one_line_error(run_cli("explain", EAGER, "--spec", spec), f"[{section}]", "sane range")


def test_a_spec_at_the_edges_of_the_range_is_accepted(tmp_path):
    spec = tmp_path / "s.toml"
    spec.write_text(H200_SPEC.read_text().replace("value = 4800,", "value = 100000,"))
    assert run_cli("explain", EAGER, "--spec", spec, "-f", "json").returncode == 0


def _nccl_trace(tmp_path, nelems):
    doc = json.loads(gzip.decompress((PEERS / "tracelens/b200__eager_trace.json.gz").read_bytes()))
    for e in doc["traceEvents"]:
        args = e.get("args") or {}
        if "In msg nelems" in args:                  # the all_gather's record_param_comms and its kernel
            args["In msg nelems"] = args["Out msg nelems"] = nelems
    path = tmp_path / "nccl.json"
    path.write_text(json.dumps(doc))
    return path


@pytest.mark.parametrize("nelems, note", [(2 ** 62, "out of range"), (0, "0 x 0 B")])
def test_an_nccl_message_size_out_of_range_or_zero(tmp_path, nelems, note):
    kernels = _kernels(run_cli("explain", _nccl_trace(tmp_path, nelems), "-f", "json"))
    [row] = [k for k in kernels if k["name"].startswith("ncclDevKernel_AllGather")]
    assert note in row["cost_note"]
    if nelems:                                       # 2^62 bf16 elements: 9.2e18 B, floor 9e12 µs before
        assert row["floor_us"] is None and row["bytes"] is None
