"""The trace loader's three ways of reading (issue 14): typed records (msgspec), the lenient decoder
(orjson and the per-event checks) and chunked reading of a large file give the same trace; its
vectorised joins give what the original one-op-at-a-time sweeps give.

Real traces are committed ones; the inputs built here (random intervals, events whose names hold
"},{", a document written with its fields after the event list) are synthetic."""

from __future__ import annotations

import gzip
import json
import random
import re

import msgspec
import numpy as np
import pytest

from conftest import H200, PEERS, ROOT, analyze, explain_json, run_cli
from tracekit.errors import TracekitError
from tracekit.load import chunks, graph_replay, parts, reader
from tracekit.load.kineto import load_trace
from tracekit.load.link import _top_level, innermost_ops
from tracekit.load.pieces import OP, Piece

TRACES = [H200 / "seed_eager_b128.json.gz",                               # H200, 5 steps
          H200 / "graph_capture_and_replay_b128.json.gz",                 # CUDA graph capture + replay
          PEERS / "tracelens/h100__Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz",   # python_function events
          PEERS / "hta/trace_diff_control_control.json.gz",               # launches whose op is found by time
          PEERS / "hta/amd_trace_mi250_minitoy_train_ROCm6_2_kineto.json.gz",  # string stream args
          PEERS / "hta/triton_example_triton_example.json.gz",            # grid given as a string
          PEERS / "hta/mtia_inference_trace_mtia_inference_rank_0.json.gz",    # MTIA device events (mtia_ccp_events), waits
          PEERS / "tracelens/mi300__gaunernst_bert-small-uncased__1016001.json.gz"]  # bytes as strings


def _same(a, b) -> None:
    """Two Traces hold the same table (values, dtypes, order), steps, warnings and metadata; op_id is an
    identity, compared as such."""
    ka, kb = a.kernels.copy(), b.kernels.copy()
    assert list(ka.columns) == list(kb.columns)
    assert [str(t) for t in ka.dtypes] == [str(t) for t in kb.dtypes]
    for df in (ka, kb):
        df["op_id"] = df["op_id"].factorize()[0]
    for col in ka.columns:
        assert [repr(v) for v in ka[col]] == [repr(v) for v in kb[col]], col
    assert a.steps == b.steps and a.step_rule == b.step_rule
    assert a.warnings == b.warnings
    assert repr(a.metadata) == repr(b.metadata)
    assert a.device_name == b.device_name and a.device_properties == b.device_properties


def _lenient(monkeypatch):
    def refuse(text):
        raise msgspec.ValidationError("refused by the test: decode leniently")
    monkeypatch.setattr(parts, "decode_fast", refuse)          # whole and chunked reading decode through parts


def _small_chunks(monkeypatch, whole=64 << 10, chunk=16 << 10):
    monkeypatch.setattr(reader, "WHOLE_BYTES", whole)
    monkeypatch.setattr(chunks, "CHUNK", chunk)


@pytest.mark.parametrize("path", TRACES, ids=lambda p: p.name[:40])
@pytest.mark.parametrize("marker", [None, r"^ProfilerStep#\d+$"])
def test_fast_lenient_and_chunked_reads_give_the_same_trace(monkeypatch, path, marker):
    fast = _load(path, marker)
    for ways in ((_lenient,), (_small_chunks,), (_small_chunks, _lenient)):
        with monkeypatch.context() as m:
            for way in ways:
                way(m)
            other = _load(path, marker)
        if isinstance(fast, str):            # the same error (the MTIA trace has no ProfilerStep)
            assert other == fast
        else:
            _same(fast, other)


def _load(path, marker):
    try:
        return load_trace(path, marker)
    except TracekitError as exc:
        return str(exc)


@pytest.mark.parametrize("path", TRACES, ids=lambda p: p.name[:40])
def test_parts_compact_as_they_are_decoded_give_the_same_trace(monkeypatch, path):
    """Each part's records are compacted before the next part is decoded (issue 26): the same trace as
    keeping every op's own record, with parts of 64 KiB so that the small committed traces have many; each
    trace held as one document (records kept uncompacted point into the text, which chunked reading
    drops as it goes)."""
    monkeypatch.setattr(parts, "PART_BYTES", 64 << 10)
    monkeypatch.setattr(reader, "WHOLE_BYTES", 1 << 30)
    compacted = _load(path, None)
    with monkeypatch.context() as m:
        m.setattr(parts, "compact", lambda piece, shared, fast=False: piece)        # the records as decoded
        kept = _load(path, None)
    if isinstance(compacted, str):
        assert kept == compacted
    else:
        _same(compacted, kept)


def test_an_event_longer_than_a_part_is_decoded_fast_with_a_longer_part(monkeypatch, tmp_path):
    """A part is about PART_BYTES (256 KiB) of events; an event longer than that (a kernel name of 300 KB
    in the real seed trace) makes that part twice as long, not the whole document decoded leniently."""
    from tracekit.load import events

    doc = json.loads(gzip.decompress((H200 / "seed_eager_b1.json.gz").read_bytes()))
    kernel = next(e for e in doc["traceEvents"] if e.get("cat") == "kernel")
    kernel["name"] = "k" * 300_000 + kernel["name"]
    path = tmp_path / "long_name.json"
    path.write_text(json.dumps(doc))
    monkeypatch.setattr(parts, "PART_BYTES", 64 << 10)
    expected = load_trace(path)
    monkeypatch.setattr(events, "decode_lenient", lambda *a, **k: (_ for _ in ()).throw(AssertionError("lenient")))
    monkeypatch.setattr(reader, "decode_lenient", events.decode_lenient)
    got = load_trace(path)
    assert got.kernels["name"].str.len().max() > 300_000
    _same(got, expected)


def test_a_read_trace_keeps_nothing_of_its_text():
    """The 42 MB H200 training trace (bench/traces, read in chunks of 4 MiB): after reading, no op's fields
    point into the text (no msgspec.Raw) and ops with the same shapes share one record; a held document
    (the seed trace) does not keep its text for a graph replay mapping that it (no graph launches) does
    not need, one that replays graphs does."""
    from pathlib import Path

    path = ROOT / "bench" / "traces" / "big_train_24layers_6steps.json.gz"
    piece, _, again = reader.read_trace(Path(path), None)
    fields = ("input_dims", "input_type", "input_strides", "concrete")
    assert len(piece.c_detail) > 50_000
    assert not any(isinstance(getattr(a, f), msgspec.Raw) for a in piece.c_detail for f in fields)
    assert len({id(a) for a in piece.c_detail}) < len(piece.c_detail) / 10
    assert reader.read_trace(Path(H200 / "seed_eager_b128.json.gz"), None)[2]() == []
    graph, _, again = reader.read_trace(Path(H200 / "graph_capture_and_replay_b128.json.gz"), None)
    assert len(again()) == graph.n_events


def test_a_python_function_marker_is_read_only_when_asked():
    """TraceLens's H100 Qwen trace: 316 python_function events name nn.Modules; without a marker they
    are not read, with one they make the steps."""
    path = PEERS / "tracelens/h100__Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz"
    doc = json.loads(gzip.decompress(path.read_bytes()))
    layers = sorted(e["ts"] for e in doc["traceEvents"] if e.get("cat") == "python_function"
                    and e.get("name", "").startswith("nn.Module: Qwen2DecoderLayer_"))
    assert len(layers) == 24
    assert [s.name for s in load_trace(path).steps] == ["ProfilerStep#6"]
    steps = load_trace(path, r"^nn\.Module: Qwen2DecoderLayer_").steps
    assert [s.start_us for s in steps] == [float(t) for t in layers]


def test_chunked_graph_mapping_reads_the_capture_events_again(monkeypatch):
    """H200 CUDA-graph capture and replay: the replayed rows take their capture ops when the file is
    read in chunks (the events come from a second pass cut where the first one cut)."""
    path = H200 / "graph_capture_and_replay_b128.json.gz"
    whole = load_trace(path)
    graph_replay.map_graph_kernels(whole)
    with monkeypatch.context() as m:
        _small_chunks(m)
        chunked = load_trace(path)
        assert len(chunked.source_events) == len(json.loads(gzip.decompress(path.read_bytes()))["traceEvents"])
        graph_replay.map_graph_kernels(chunked)
    replayed = whole.kernels["graph"]
    assert replayed.sum() > 0 and (whole.kernels.loc[replayed, "op_source"] == "graph_capture").all()
    _same(whole, chunked)


def _events(n: int) -> list[dict]:
    """Synthetic kernel/launch/op triples whose names and args hold '},{' and nested objects."""
    out = []
    for i in range(n):
        t = 100.0 * i
        out += [{"ph": "X", "cat": "cpu_op", "name": f'aten::mm "}},{{" #{i}', "ts": t, "dur": 50.0, "tid": 1,
                 "pid": 1, "args": {"External id": i, "Input Dims": [[2, 2], [2, 2]], "Input type": ["float", "float"],
                                    "extra": [{"a": "},{"}, {"b": [{"c": 1}]}]}},
                {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "ts": t + 10, "dur": 5.0, "tid": 1,
                 "pid": 1, "args": {"correlation": i, "External id": i}},
                {"ph": "X", "cat": "kernel", "name": "k},{" * (i % 3 + 1), "ts": t + 20, "dur": 3.0, "tid": 7,
                 "pid": 0, "args": {"correlation": i, "device": 0, "stream": 7, "grid": [1, 1, 1]}}]
    return out


@pytest.mark.parametrize("layout", ["fields first", "fields last", "bare list"])
def test_chunks_cut_only_between_events(tmp_path, monkeypatch, layout):
    """Synthetic: 600 events whose text holds '},{' inside strings and nested args, read in 4 KiB
    chunks (most first cut candidates fall inside an event); fields before or after the list."""
    events, props = _events(200), [{"name": "NVIDIA H100 80GB HBM3"}]
    if layout == "bare list":
        text = json.dumps(events, indent=1)
    else:
        doc = {"deviceProperties": props, "traceEvents": events, "traceName": "t"} if layout == "fields first" \
            else {"traceEvents": events, "deviceProperties": props, "distributedInfo": {"rank": 3}}
        text = json.dumps(doc, indent=1)
    path = tmp_path / "t.json.gz"
    path.write_bytes(gzip.compress(text.encode()))
    whole = load_trace(path)
    _small_chunks(monkeypatch, whole=8 << 10, chunk=4 << 10)
    chunked = load_trace(path)
    _same(whole, chunked)
    assert len(whole.kernels) == 200 and (whole.kernels["op"].str.startswith("aten::mm")).all()
    assert whole.device_name == (None if layout == "bare list" else "NVIDIA H100 80GB HBM3")


@pytest.mark.parametrize("path", TRACES + [ROOT / "bench" / "traces" / "big_train_24layers_6steps.json.gz"],
                         ids=lambda p: p.name[:40])
def test_the_quick_cut_of_a_document_is_the_exact_one(path):
    """A whole document's event array is found without scanning it (reader._quick_split): the same span
    and fields as decoding the document's top level (reader._split), on every committed Kineto trace."""
    raw = bytearray(gzip.decompress(path.read_bytes()))
    start = reader._SPACE.match(raw).end()
    quick = reader._quick_split(raw, start)
    assert quick is not None
    assert quick == reader._split(raw, start)


@pytest.mark.parametrize("tail", [', "deviceProperties": [{"name": "NVIDIA H100 80GB HBM3"}], "traceName": "]"}',
                                  ', "x": [1], "y": {"z": "]"}}', ', "traceEvents": []}'])
def test_fields_after_the_events_that_hold_a_bracket_read_as_before(tmp_path, monkeypatch, tail):
    """Synthetic: fields after the event list whose values hold "]" (the quick cut's first guess is wrong
    and the exact one is used) and a second traceEvents key (the last wins, as JSON decoders take it):
    the same trace as the lenient reader gives."""
    text = json.dumps({"schemaVersion": 1, "traceEvents": _events(40)})[:-1] + tail
    path = tmp_path / "t.json"
    path.write_text(text)
    fast = _load(path, None)
    with monkeypatch.context() as m:
        _lenient(m)
        lenient = _load(path, None)
    if isinstance(lenient, str):
        assert fast == lenient
    else:
        _same(fast, lenient)
        assert len(fast.kernels) == 40


def test_a_malformed_event_in_a_later_chunk_is_named_by_its_index(tmp_path, monkeypatch):
    """Synthetic: event #452's ts is "abc"; read in 4 KiB chunks, the error names it as a whole read does."""
    events = _events(200)
    events[452]["ts"] = "abc"
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"traceEvents": events}))
    _small_chunks(monkeypatch, whole=8 << 10, chunk=4 << 10)
    proc = run_cli("explain", path)
    assert proc.returncode == 2 and "event #452" in proc.stderr and "non-numeric" in proc.stderr


def test_invalid_utf8_in_a_field_not_read_is_still_invalid_json(tmp_path):
    """Synthetic: a byte 0xff inside a python_function name: invalid JSON as before (the fast decoder
    does not look at that string, so the loader checks the text)."""
    events = _events(3) + [{"ph": "X", "cat": "python_function", "name": "NAME", "ts": 1, "dur": 1}]
    path = tmp_path / "t.json"
    path.write_bytes(json.dumps({"traceEvents": events}).encode().replace(b"NAME", b"N\xffME"))
    proc = run_cli("explain", path)
    assert proc.returncode == 2 and "invalid JSON" in proc.stderr


def _random_ops(rng: random.Random, n: int) -> Piece:
    """Synthetic CPU ops on three threads (one a string tid): nested, sibling and overlapping intervals,
    equal starts, zero durations; a few step markers that are not ops."""
    p = Piece()
    for i in range(n):
        ts = float(rng.randrange(0, 400))
        dur = float(rng.choice([0, 1, 3, 10, 40, 150]))
        p.c_idx.append(i)
        p.c_name.append(f"op{i}")
        p.c_ts.append(ts)
        p.c_dur.append(dur)
        p.c_tid.append(rng.choice([1, 2, "3"]))
        p.c_pid.append(9)
        p.c_ext.append(None)
        p.c_role.append(OP if rng.random() > 0.05 else 1)
        p.c_detail.append(None)
    return p


@pytest.mark.parametrize("seed", range(20))
def test_innermost_op_is_the_stack_sweeps_answer(seed):
    """Synthetic intervals: link.innermost_ops (pointer jumping, numpy) against the original stack sweep
    (graph_replay._innermost_ops, one op at a time)."""
    rng = random.Random(seed)
    p = _random_ops(rng, 300)
    queries = [(rng.choice([1, 2, "3", 4]), float(rng.randrange(-5, 420))) for _ in range(200)]
    got = innermost_ops([q[0] for q in queries], [q[1] for q in queries], p)
    ops = [{"name": p.c_name[k], "ts": p.c_ts[k], "dur": p.c_dur[k], "tid": p.c_tid[k], "k": k}
           for k in range(len(p.c_idx)) if p.c_role[k] == OP]
    want = graph_replay._innermost_ops([{"tid": tid, "ts": t} for tid, t in queries], ops)
    assert got == [-1 if w is None else w["k"] for w in want]


@pytest.mark.parametrize("seed", range(20))
def test_top_level_ops_are_the_sweeps_answer(seed):
    """Synthetic sorted intervals, some overlapping their parent's end: the running-maximum shortcut or
    its fallback gives what the one-op-at-a-time sweep gives."""
    rng = random.Random(seed)
    ts = np.sort(np.array([float(rng.randrange(0, 500)) for _ in range(200)]))
    end = ts + np.array([float(rng.choice([0, 2, 5, 30, 90])) for _ in ts])
    want, stop = [], -np.inf
    for k, (t, e) in enumerate(zip(ts, end)):
        if t >= stop:
            want.append(k)
            stop = e
    assert _top_level(ts, end).tolist() == want
    nested = np.array([0.0, 1.0, 2.0, 10.0, 11.0]), np.array([9.0, 5.0, 3.0, 20.0, 12.0])
    assert _top_level(*nested).tolist() == [0, 3]


CPU_2000 = ROOT / "bench/traces/cpu_small_model_2000steps.json.gz"     # bench/make_cpu_trace.py (torch 2.13 CPU)


def test_a_2000_step_trace_shows_people_40_steps_and_json_every_step():
    """The CPU-only benchmark trace (2,000 ProfilerStep#N ranges): the per-step tables of the table view
    and of --fusion show the first and last 20 steps and say how many are left out; JSON has them all."""
    from tracekit.report.table import render_tables
    doc = json.loads(gzip.decompress(CPU_2000.read_bytes()))
    marks = [e["name"] for e in doc["traceEvents"] if str(e.get("name", "")).startswith("ProfilerStep#")]
    n = len(marks)
    assert n == 2000
    assert len(explain_json(CPU_2000)["steps"]) == n
    text = render_tables(analyze(CPU_2000), width=120, fusion=True)
    shown = [f"ProfilerStep#{i}" for i in [*range(20), *range(n - 20, n)]]
    for table in ("per step", "fusion per step"):
        part = text[text.index(table):]
        part = part[:part.index(f"ProfilerStep#{n - 1} ") + len(f"ProfilerStep#{n - 1}")]
        assert re.findall(r"ProfilerStep#\d+", part) == shown, table
        assert f"{n - 40:,} steps" in part and f"40 of {n:,} steps" in text
