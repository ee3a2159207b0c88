"""Issue 24: a read binds each byte to the newest version that wrote it (tracekit/fusion/exact.py,
step_dataflow), on the committed H100 Whisper re-check bundle (captures/h200/recheck/whisper_fwd:
Whisper-base widths, bf16, batch 2, 80 mels x 3,000 frames; README there).

From the ET (storage, offset and bytes of each argument; listed by hand with the node's reads and
writes): #0 the first conv writes storage 21 bytes [0, 6,144,000) (2 x 512 x 3,000 bf16), #1 its bias
``add_`` rewrites them, #2 ``gelu`` reads them; the caching allocator then hands the freed block to
the second conv, #3, which writes [0, 3,072,000) (2 x 512 x 1,500 bf16). Every later access of
storage 21 in the step lies inside [0, 3,072,000) and comes after #3's write, so only #2 reads #1's
version. Before the fix it was credited to #2, #4, #5, #8, #12, #18, ... (18 readers).
"""

from __future__ import annotations

import pytest

from conftest import H200, analyze
from tracekit.fusion.dataflow import step_fusion
from tracekit.fusion.exact import step_dataflow

BUNDLE = H200 / "recheck" / "whisper_fwd"
FIRST_CONV = 2 * 512 * 3000 * 2              # 6,144,000 B
SECOND_CONV = 2 * 512 * 1500 * 2             # 3,072,000 B


@pytest.fixture(scope="module")
def whisper():
    return analyze(BUNDLE)[0]


def _accesses(nodes, storage):
    out = []
    for n in nodes:
        if n.exact is None:
            continue
        out += [(n.index, "R", *a.region[1:]) for a in n.exact.reads if a.t.storage == storage]
        out += [(n.index, "W", *a.region[1:]) for a in n.exact.writes if a.t.storage == storage]
    return out


@pytest.mark.parametrize("step", [0, 1, 2])
def test_first_conv_output_is_read_by_gelu_only(whisper, step):
    f = step_fusion(whisper, step)
    nodes = f["nodes"]
    acc = _accesses(nodes, 21)
    # the ET's facts the test rests on (see the module docstring)
    assert acc[:5] == [(0, "W", 0, FIRST_CONV), (1, "R", 0, FIRST_CONV), (1, "W", 0, FIRST_CONV),
                       (2, "R", 0, FIRST_CONV), (3, "W", 0, SECOND_CONV)]
    assert all(hi <= SECOND_CONV for _, _, _, hi in acc[5:])
    (bias,) = [v for v in f["values"] if v.producer == 1 and v.tensor.nbytes == FIRST_CONV]
    assert bias.readers == [2]


def _naive_readers(ios) -> list[list[int]]:
    """Per write (launch order), the calls that read a byte it wrote last, the slow way: the first
    byte of an overlap not rewritten since is the overlap's start or the end of a newer write."""
    writes = [(i, a) for i, io in enumerate(ios) if io is not None for a in io.writes]
    readers = []
    for k, (i, w) in enumerate(writes):
        s, wlo, whi = w.region
        got = []
        for n in range(i + 1, len(ios)):
            if ios[n] is None:
                continue
            newer = [x.region for j, x in writes[k + 1:] if j < n and x.region[0] == s and not x.partial]
            for r in ios[n].reads:
                rs, lo, hi = r.region
                a, b = max(lo, wlo), min(hi, whi)
                if rs != s or b <= a:
                    continue
                points = {a} | {xhi for _, _, xhi in newer if a <= xhi < b}
                if any(all(not (xlo <= p < xhi) for _, xlo, xhi in newer) for p in points):
                    got.append(n)
                    break
        readers.append(got)
    return readers


def test_every_reader_reads_a_byte_its_version_wrote_last(whisper):
    """Over a whole step (136 calls, all joined to the ET): each write is credited exactly the calls
    that read a byte it wrote last (no partial writes in this step, so no unknown places)."""
    ios = [n.exact for n in step_fusion(whisper, 0)["nodes"]]
    assert all(io is not None for io in ios) and not any(a.partial for io in ios for a in io.writes)
    versions, _ = step_dataflow(ios)
    expected = _naive_readers(ios)
    assert len(versions) == len(expected)
    for v, want in zip(versions, expected):
        s = v.access.t.storage
        read = [r for r in v.readers if any(a.t.storage == s for a in ios[r].reads)]  # not the enclosing call
        assert read == want, (v.producer, read, want)
