"""Linear in the kernels of one step (issue 26): the paths that had been quadratic give what the old
code gave. Real inputs: the H200 CUDA-graph bundles with tracekit::graph_replay marks; SYNTHETIC
(labelled) op calls for the dataflow lists. Nothing is timed: bench/bench_scale.py measures."""

from __future__ import annotations

import gzip
from pathlib import Path

import orjson
import pytest

from tracekit.fusion.dataflow import link
from tracekit.fusion.nodes import Node
from tracekit.load import graph_replay
from tracekit.ops import IO, Tensor

ROOT = Path(__file__).resolve().parents[1]
MARKED = [ROOT / "captures/bundles/seed_graph/trace.json.gz", ROOT / "captures/bundles/seed_graph_two/trace.json.gz",
          ROOT / "captures/h200/models/llama_decode_reduce_overhead/trace.json.gz"]


def replay_ids_by_scan(events: list) -> dict:
    """The old _replay_ids: every mark tested for every graph launch (the last enclosing mark wins)."""
    events = graph_replay._usable(events)
    marks = [e for e in events if graph_replay.REPLAY_MARK.match(e["name"])]
    out = {}
    for e in events:
        if not (e["name"] in graph_replay.GRAPH_LAUNCHES and e.get("cat") in graph_replay.LAUNCH_CATEGORIES):
            continue
        t = float(e.get("ts", -1))
        for m in marks:
            if m.get("tid") == e.get("tid") and float(m["ts"]) <= t <= float(m["ts"]) + float(m.get("dur", 0)):
                out[(e.get("args") or {}).get("correlation")] = int(graph_replay.REPLAY_MARK.match(m["name"]).group(1))
    return out


@pytest.mark.parametrize("path", MARKED, ids=lambda p: p.parent.name)
def test_replay_ids_by_binary_search_match_the_scan_on_real_captures(path):
    events = orjson.loads(gzip.decompress(path.read_bytes()))["traceEvents"]
    got = graph_replay._replay_ids(events)
    assert got == replay_ids_by_scan(events) and len(got) > 0


def test_overlapping_or_unsorted_marks_keep_the_last_enclosing_one():
    """SYNTHETIC marks: out of time order (the binary search), and nested (the scan)."""
    def mark(g, ts, dur, tid=1):
        return {"name": f"tracekit::graph_replay#{g}", "ph": "X", "cat": "user_annotation", "ts": ts, "dur": dur,
                "tid": tid, "pid": 1}

    def launch(corr, ts, tid=1):
        return {"name": "cudaGraphLaunch", "ph": "X", "cat": "cuda_runtime", "ts": ts, "dur": 1, "tid": tid,
                "pid": 1, "args": {"correlation": corr}}
    unsorted = [mark(2, 100, 50), mark(1, 0, 50), launch(7, 120), launch(8, 10), launch(9, 75), launch(10, 20, tid=2)]
    nested = [mark(1, 0, 100), mark(2, 10, 20), launch(7, 15), launch(8, 50)]
    for events in (unsorted, nested):
        assert graph_replay._replay_ids(events) == replay_ids_by_scan(events)
    assert graph_replay._replay_ids(unsorted) == {7: 2, 8: 1}
    assert graph_replay._replay_ids(nested) == {7: 2, 8: 1}


def test_outside_reads_list_each_reader_once_in_launch_order():
    """SYNTHETIC op calls: 3 calls each read one 1-element fp32 tensor from outside (call 1 twice: its
    two reads are two tensors, nth 0 and 1) and write a 4-element one; call 2 reads call 0's output.
    Merged outside values: (1 fp32, nth 0) read by calls 0, 1, 2 once each; (1 fp32, nth 1) by call 1."""
    scalar, out4 = Tensor((1,), "fp32", 4), Tensor((4,), "fp32", 4)
    ios = [IO((scalar,), (out4,)), IO((scalar, scalar), (out4,)), IO((scalar, out4), (out4,))]
    nodes = [Node(i, [i], [f"k{i}"], "aten::add", [], io, 0.0, 0.0, 0.0, 0.0) for i, io in enumerate(ios)]
    values, merged = link(nodes)
    assert sorted((len(m.readers), m.readers) for m in merged) == [(1, [1]), (3, [0, 1, 2])]
    outside = [v for v in values if v.producer is None]
    assert [v.readers for v in outside] == [[0], [1], [1], [2]]
    assert [v.readers for v in values if v.producer == 1] == [[2]]           # call 2 reads the latest write
