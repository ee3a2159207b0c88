"""Peak memory of reading a trace (issues 26 and 27), tested by its mechanism, never by timing or RSS:
a trace over ``reader.WHOLE_BYTES`` of JSON goes through the chunked path and gives the same trace as
holding it whole; the last stretch the chunked reader copies is short; step marks are kept as columns;
a long JSON list is written in pieces. The figures themselves are in bench/ (docs/performance.md).

Real traces are committed ones (bench/traces, captures/, tests/data/peers); the marks and the list
built here are synthetic."""

from __future__ import annotations

import gzip
from array import array
from pathlib import Path

import orjson
import pytest

from conftest import H200, PEERS, ROOT
from tracekit.load import chunks, reader
from tracekit.load.kineto import _steps, load_trace
from tracekit.outputs import ROWS_PER_PIECE, json_bytes, json_chunks

BIG = ROOT / "bench" / "traces" / "big_train_24layers_6steps.json.gz"     # 42.3 MB of JSON, 6 steps


def _spy(monkeypatch) -> dict:
    """Counts of chunked reads and the bytes each last stretch held (buffer length past its start)."""
    seen = {"chunked": 0, "last": []}
    read, last = chunks.read_chunked, chunks._last

    def read_chunked(*a, **k):
        seen["chunked"] += 1
        return read(*a, **k)

    def _last(path, buf, pos, *a, **k):
        seen["last"].append(len(buf) - pos)
        return last(path, buf, pos, *a, **k)

    monkeypatch.setattr(chunks, "read_chunked", read_chunked)
    monkeypatch.setattr(chunks, "_last", _last)
    return seen


def _same(a, b) -> None:
    ka, kb = a.kernels.copy(), b.kernels.copy()
    for df in (ka, kb):
        df["op_id"] = df["op_id"].factorize()[0]                   # an identity: compared as such
    assert list(ka.columns) == list(kb.columns)
    for col in ka.columns:
        assert [repr(v) for v in ka[col]] == [repr(v) for v in kb[col]], col
    assert a.steps == b.steps and a.step_rule == b.step_rule
    assert a.warnings == b.warnings and repr(a.metadata) == repr(b.metadata)


@pytest.mark.parametrize("path", [BIG,                                                  # 42 MB, 71,520 CPU ops
                                  H200 / "models2" / "vit_train" / "trace.json.gz",      # 12.7 MB
                                  PEERS / "tracelens" / "b200__eager_trace.json.gz"],    # 14.2 MB
                         ids=lambda p: p.parent.name + "/" + p.name[:24])
def test_a_trace_over_the_threshold_is_read_in_chunks_as_if_whole(monkeypatch, path):
    """Each of these real traces is over WHOLE_BYTES of JSON, so it is read in chunks (its text never held
    whole), with a last stretch of at most 2 MiB (the end of the stream is cut like the rest: the last
    stretch is copied once, with the fields after the array); the trace is the one read as one
    document."""
    size = len(gzip.decompress(path.read_bytes()))
    assert size > reader.WHOLE_BYTES
    with monkeypatch.context() as m:
        seen = _spy(m)
        chunked = load_trace(path)
    assert seen["chunked"] == 1
    assert len(seen["last"]) == 1 and seen["last"][0] <= 2 * chunks.TAIL
    with monkeypatch.context() as m:
        m.setattr(reader, "WHOLE_BYTES", size + 1)                # held as one document
        seen = _spy(m)
        whole = load_trace(path)
    assert seen["chunked"] == 0
    _same(chunked, whole)


def test_a_held_document_keeps_nothing_of_its_text():
    """Below the threshold a document is held whole; read, its text is not kept (no graph launches)."""
    path = H200 / "seed_eager_b128.json.gz"
    assert len(gzip.decompress(path.read_bytes())) <= reader.WHOLE_BYTES
    piece, _, again = reader.read_trace(Path(path), None)
    assert again() == []


def test_step_marks_are_columns_not_tuples():
    """The 2,000 ProfilerStep marks of the CPU trace (bench/traces) are kept as typed columns (8 bytes a
    number, one shared name each), not as a tuple a mark (about 150 bytes each: 15 MB on 100k steps)."""
    path = ROOT / "bench" / "traces" / "cpu_small_model_2000steps.json.gz"
    piece, _, _ = reader.read_trace(path, None)
    assert not hasattr(piece, "steps")
    assert isinstance(piece.s_idx, array) and piece.s_idx.typecode == "q"
    assert isinstance(piece.s_ts, array) and piece.s_ts.typecode == "d"
    assert isinstance(piece.s_dur, array) and piece.s_dur.typecode == "d"
    assert len(piece.s_name) == len(piece.s_ts) == 2000
    doc = orjson.loads(gzip.decompress(path.read_bytes()))
    marks = sorted((e["ts"], e["name"]) for e in doc["traceEvents"] if e.get("name", "").startswith("ProfilerStep#"))
    steps = load_trace(path).steps
    assert [(s.start_us, s.name) for s in steps] == [(float(t), n) for t, n in marks]


def test_steps_from_columns_keep_the_first_mark_of_each_name_and_start():
    """SYNTHETIC marks (event index, name, ts, dur), out of order: steps by start, then event order; of
    two marks with the same name and start the one earlier in the file (smaller index) is kept, its
    duration with it; a name that is not ProfilerStep#N is left out while ProfilerSteps exist."""
    idx = array("q", [7, 3, 5, 9, 1])
    names = ["ProfilerStep#2", "ProfilerStep#1", "ProfilerStep#1", "other", "ProfilerStep#0"]
    ts = array("d", [300.0, 200.0, 200.0, 100.0, 100.0])
    dur = array("d", [50.0, 40.0, 99.0, 10.0, 80.0])
    steps, rule = _steps((idx, names, ts, dur), None, None)
    assert rule == "ProfilerStep"
    assert [(s.index, s.name, s.start_us, s.end_us) for s in steps] == [
        (0, "ProfilerStep#0", 100.0, 180.0), (1, "ProfilerStep#1", 200.0, 240.0), (2, "ProfilerStep#2", 300.0, 350.0)]


def test_a_long_list_is_written_in_pieces_with_the_same_bytes():
    """The kernels list of an explain document (9,684 rows, 9.5 MB of JSON for the 42 MB trace) is
    written ROWS_PER_PIECE rows at a time: the same bytes as one dump, never the whole text at once
    (SYNTHETIC rows here)."""
    doc = {"summary": {"steps": 3}, "kernels": [{"name": f"k{i}", "us": i / 7, "shape": [i, None]}
                                                 for i in range(4 * ROWS_PER_PIECE + 5)]}
    pieces = list(json_chunks(doc))
    assert b"".join(pieces) == json_bytes(doc)
    assert max(map(len, pieces)) < len(json_bytes(doc["kernels"])) / 3
