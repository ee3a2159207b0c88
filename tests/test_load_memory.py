"""Peak memory of reading a trace (issues 26 and 27), tested by its mechanism, never by timing or RSS:
a trace over ``reader.WHOLE_BYTES`` of JSON goes through the chunked path and gives the same trace as
holding it whole; the last stretch the chunked reader copies is short; step marks are kept as columns;
a long JSON list is written in pieces. The figures themselves are in bench/ (docs/performance.md).

Real traces are committed ones (bench/traces, captures/, tests/data/peers); the marks and the list
built here are synthetic."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest

from conftest import H200, PEERS, ROOT
from tracekit.load import chunks, reader
from tracekit.load.kineto import load_trace

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
