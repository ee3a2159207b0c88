"""Issue 27: the explain document's per-step summary lists as lazy columns of the step rows
(``model.rows.Column``), so 100k steps hold no 16 lists of 100k entries. A column reads like the list
``Rows.values`` makes and is written to the same JSON bytes.

Inputs: the committed real captures/h200/seed_eager_b1.json.gz and HTA's CPU-only trace (columns made
directly, whatever their step count); one SYNTHETIC trace of 5,000 ProfilerSteps and one CPU op
(labelled where it is made), where the document itself holds columns."""

from __future__ import annotations

import orjson
import pytest

from conftest import PEERS
from test_robust_limits import _many_steps
from test_robustness import EAGER

from tracekit.api import load
from tracekit.model.rows import Column, Rows
from tracekit.outputs import json_bytes, json_chunks
from tracekit.report.document import explain_dict

CPU_ONLY = PEERS / "hta/cpu_only_rank-34.Jul_15_10_52_41.1074.pt.trace.json.gz"
OPT = orjson.OPT_SERIALIZE_NUMPY | orjson.OPT_NON_STR_KEYS


def _doc(path):
    return explain_dict(load(str(path), cache=False).traces[0])


@pytest.mark.parametrize("path", [EAGER, CPU_ONLY], ids=["eager", "cpu_only"])
def test_a_column_reads_like_the_list_of_its_values(path):
    rows = _doc(path)["steps"]
    assert isinstance(rows, Rows) and len(rows) >= 1
    n = len(rows)
    for key in rows.keys():
        want, col = rows.values(key), Column(rows, key)
        assert len(col) == n and list(col) == want and col == want
        assert col[-1] == want[-1] and col[0] == want[0]
        for part in (slice(None), slice(1, None), slice(0, n, 2), slice(-2, None), slice(n, n + 3), slice(3, 1)):
            assert col[part] == want[part], (key, part)
        with pytest.raises(IndexError):
            col[n]


@pytest.mark.parametrize("path", [EAGER, CPU_ONLY], ids=["eager", "cpu_only"])
def test_the_summary_with_columns_writes_the_same_json(path):
    doc = _doc(path)
    before = json_bytes(doc, OPT)
    rows = doc["steps"]
    for key in rows.keys():
        if f"{key}_per_step" in doc["summary"]:
            doc["summary"][f"{key}_per_step"] = Column(rows, key)
    assert any(isinstance(v, Column) for v in doc["summary"].values())
    assert b"".join(json_chunks(doc, OPT)) == before == json_bytes(doc, OPT)


def test_many_empty_steps_hold_the_summary_as_columns(tmp_path):
    n = 5000                                      # over model.rows.LAZY_FROM (2,048)
    doc = _doc(_many_steps(tmp_path / "steps.json", n))          # SYNTHETIC
    s = doc["summary"]
    for key in ("kernels", "kernel_us", "idle_us", "wall_us", "launches"):
        assert isinstance(s[f"{key}_per_step"], Column), key
    for key in ("fusion_headroom_bytes", "fused_floor_us_per_step", "fused_floor_kind_per_step", "fusion_rule"):
        assert isinstance(s[key], Column) and s[key] == s["fusion_per_step"].values(s[key].key), key
    # the one CPU op (5 µs at ts 5) is in step 0; every step is a 90 µs annotation with no runtime call
    assert s["kernels_per_step"] == [1] + [0] * (n - 1)
    assert s["kernel_us_per_step"] == [5.0] + [0.0] * (n - 1)
    assert s["wall_us_per_step"] == [90.0] * n and s["launches_per_step"] == [0] * n
    assert s["idle_us_per_step"][1:] == [None] * (n - 1)
    assert [r["name"] for r in doc["steps"][n - 2:]] == [f"ProfilerStep#{n - 2}", f"ProfilerStep#{n - 1}"]
    assert orjson.loads(b"".join(json_chunks(doc, OPT)))["summary"]["kernels_per_step"] == [1] + [0] * (n - 1)
