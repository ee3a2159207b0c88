"""Collectives: names (NCCL, RCCL, c10d, PyTorch's Collective name), NCCL-tests' bus bytes, the [link]
section of a spec, and the floor of a real A100 all-reduce."""

from __future__ import annotations

import gzip
import json

import pytest

from conftest import PEERS, analyze
from tracekit.classify.categories import category_of
from tracekit.cost.devices import _parse, spec_by_id
from tracekit.errors import TracekitError
from tracekit.ops.collectives import bus_bytes, collective_of, message_bytes

KERNELS = {
    "ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long, ncclWork*)": "all_reduce",
    "ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)": "all_gather",
    "ncclDevKernel_ReduceScatter_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)": "reduce_scatter",
    "ncclKernel_Broadcast_RING_LL_Sum_int8_t(ncclDevComm*, unsigned long, ncclWork*)": "broadcast",
    "ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t(ncclDevComm*, unsigned long, ncclWork*)": "send_recv",
    "ncclDevKernel_SendRecv(ncclDevKernelArgsStorage<4096ul>)": "send_recv",
    "ncclKernel_Reduce_RING_LL_Sum_half(ncclDevComm*, unsigned long, ncclWork*)": "reduce",
    "ncclDevKernel_Generic_4(ncclDevKernelArgsStorage<4096ul>)": None,       # RCCL/NCCL: names no collective
}
OPS = {"c10d::allreduce_": "all_reduce", "c10d::_allgather_base_": "all_gather", "c10d::alltoall_base_": "all_to_all",
       "c10d::_reduce_scatter_base_": "reduce_scatter", "nccl:all_reduce": "all_reduce", "gloo:broadcast": "broadcast",
       "c10d::barrier": "barrier", "c10d::send": "send_recv", "c10d::recv_": "send_recv",
       "allgather_into_tensor_coalesced": "all_gather", "reduce_scatter_tensor_coalesced": "reduce_scatter",
       "allreduce": "all_reduce", "all_to_allv": "all_to_all", "record_param_comms": None, "aten::add": None}


@pytest.mark.parametrize("name,want", [*KERNELS.items(), *OPS.items()])
def test_collective_names(name, want):
    assert collective_of(name) == want


@pytest.mark.parametrize("name", KERNELS)
def test_nccl_and_rccl_kernels_are_communication(name):
    assert category_of(name, "kernel", None) == "communication"


def test_bus_bytes_follow_nccl_tests():
    s = 1_000_000.0
    assert bus_bytes("all_reduce", s, 8) == 2 * 7 / 8 * s == 1_750_000.0
    assert bus_bytes("all_gather", s, 8) == bus_bytes("reduce_scatter", s, 8) == bus_bytes("all_to_all", s, 8) == 875_000.0
    assert bus_bytes("broadcast", s, 8) == bus_bytes("reduce", s, 8) == bus_bytes("send_recv", s, 8) == s
    assert bus_bytes("all_reduce", s, 1) == 0.0 and bus_bytes("barrier", s, 8) is None
    assert bus_bytes("all_reduce", None, 8) is None and bus_bytes("all_reduce", s, None) is None
    # S is the whole buffer: an all_gather's output, a reduce_scatter's input (PyTorch records per-rank parts)
    assert message_bytes("all_gather", 1024, 8192, 2, 8) == 16384.0
    assert message_bytes("all_gather", 1024, None, 2, 8) == 16384.0
    assert message_bytes("reduce_scatter", 8192, 1024, 2, 8) == 16384.0
    assert message_bytes("all_reduce", 1024, 1024, 4, 8) == 4096.0


def test_link_section_of_a_spec():
    h200 = spec_by_id("h200")
    assert h200.links == {"nvlink_gbs": 450.0, "pcie_gbs": 64.0} and h200.link_gbs == 450.0
    assert "900GB/s" in h200.sources["link.nvlink_gbs"]
    assert spec_by_id("mi300x").link_gbs == 448.0 and spec_by_id("b200").link_gbs == 900.0
    assert spec_by_id("l4").link_gbs is None
    base = 'id = "x"\nname = "x"\nvendor = "nvidia"\n[memory]\nbandwidth_gbs = { value = 1, source = "s" }\n'
    with pytest.raises(TracekitError, match="unknown \\[link\\] key 'infiniband_gbs'"):
        _parse((base + '[link]\ninfiniband_gbs = { value = 50, source = "s" }\n').encode(), "x.toml")
    with pytest.raises(TracekitError, match="needs a non-empty source"):
        _parse((base + '[link]\nnvlink_gbs = { value = 50, source = "" }\n').encode(), "x.toml")


def test_the_floor_of_a_real_a100_all_reduce():
    """HTA's A100 trace: the all-reduce of 2,049,000 floats among 2 ranks moves 2(2-1)/2 x 8,196,000 B per
    rank; over the A100's NVLink (600 GB/s both ways, 300 GB/s per direction) that is 27.32 µs."""
    path = PEERS / "hta/nccl_parser_config_nccl_data.json.gz"
    raw = [e for e in json.loads(gzip.decompress(path.read_bytes()))["traceEvents"]
           if e.get("cat") == "kernel" and e["args"].get("In msg nelems") == 2049000]
    assert {(e["args"]["Collective name"], e["args"]["dtype"], e["args"]["Group size"]) for e in raw} == \
        {("allreduce", "Float", 2)} and len(raw) == 3                 # one per step
    (trace,) = analyze(path)
    assert trace.spec.id == "a100-sxm-40gb"
    for e in raw:
        row = trace.kernels[trace.kernels["start_us"] == e["ts"]].iloc[0]
        assert (row["category"], row["compute_unit"], row["bound"]) == ("communication", "link", "link")
        assert row["bytes"] == 8_196_000.0 and row["floor_us"] == pytest.approx(27.32)
        assert row["gap"] == pytest.approx(e["dur"] / 27.32)
        assert row["cost_note"] == "all_reduce bus bytes (NCCL-tests): 1 x 8196000 B, 2 ranks"


def test_a_trace_too_large_to_reparse_still_names_its_collectives(monkeypatch):
    """Kernel args are read from a second parse of the file; a trace over the whole-parse limit (read in
    chunks) cannot have one: its collectives fall back to the kernel name and op shapes, no error."""
    from tracekit import limits
    from tracekit.load import collectives, kineto

    path = PEERS / "hta/nccl_parser_config_nccl_data.json.gz"
    (trace,) = analyze(path)
    df = trace.kernels
    comm = df[df["category"] == "communication"]

    def too_large(*args, **kwargs):
        raise TracekitError(f"{path}: too large to read whole")
    monkeypatch.setattr(kineto, "read_json", too_large)
    monkeypatch.setattr(limits, "read_input", too_large)          # the light reading of args (collectives._light_args)
    rows = collectives.collective_rows(df, path, 2, None)
    named = [r for r, cat in zip(rows, df["category"]) if cat == "communication"]
    assert len(named) == len(comm) and all(r is None or r["source"].startswith("launching op") for r in named)
    assert any(r is not None and r["name"] == "all_reduce" for r in named)   # ncclKernel_AllReduce_* by name


@pytest.mark.parametrize("path", [PEERS / "tracelens/b200__eager_trace.json.gz",         # args in record_param_comms
                                  PEERS / "hta/nccl_parser_config_nccl_data.json.gz"],    # and in kernel args
                         ids=lambda p: p.name[:30])
def test_collective_args_read_lightly_are_the_parsed_documents(monkeypatch, path):
    """Issue 27: the args of communication kernels and record_param_comms ops are decoded from the text
    (one small record an event, collectives._light_args), not from the whole document parsed into dicts
    (~7x its JSON: the B200 trace's 14 MB peaked at 153 MB): the same collectives as from the dicts, on
    real traces, and the light path is the one taken."""
    from tracekit.load import collectives
    from tracekit.load.kineto import read_json, trace_events

    (trace,) = analyze(path)
    df = trace.kernels
    taken = []
    light = collectives._light_args
    monkeypatch.setattr(collectives, "_light_args", lambda *a: taken.append(1) or light(*a))
    rows = collectives.collective_rows(df, path, 2, None)
    assert taken and light(path, {0}) is not None
    events, _ = trace_events(read_json(path), path)
    assert rows == collectives.collective_rows(df, path, 2, events)
    assert any(r is not None and not r["source"].startswith("launching op") for r in rows)     # from args


def test_collective_args_fall_back_to_the_parsed_document(tmp_path):
    """A text the light types refuse (an event that is not an object; SYNTHETIC, from the real NCCL trace)
    is parsed whole as before: the same collectives."""
    from tracekit.load import collectives
    from tracekit.load.kineto import read_json, trace_events

    src = PEERS / "hta/nccl_parser_config_nccl_data.json.gz"
    doc = json.loads(gzip.decompress(src.read_bytes()))
    doc["traceEvents"].append(7)
    path = tmp_path / "odd.json"
    path.write_text(json.dumps(doc))
    (trace,) = analyze(src)
    wanted = {int(i) for i in trace.kernels["event_index"]} - {-1}
    assert collectives._light_args(path, wanted) is None
    events, _ = trace_events(read_json(path), path)
    assert collectives.collective_rows(trace.kernels, path, 2, None) == \
        collectives.collective_rows(trace.kernels, path, 2, events)
