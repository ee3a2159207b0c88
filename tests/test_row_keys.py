"""Stages memoised per row key work a row out only where ``model.keys.first_rows`` says it starts its key
(issue 26: the per-row Python of fused ops, io, cost and the shape phases), and the diagnosis reads the
kernels' columns rather than their dicts. Both must give what working out every row gives: the whole
explain document is compared, on real traces (H200 captures, an Inductor bundle with kernel sources, a
bundle with its execution trace, a vLLM serving trace with engine steps). Nothing here is timed."""

from __future__ import annotations

import orjson
import pytest

from conftest import DATA, H200
from tracekit.model.keys import first_rows, ids

TRACES = [H200 / "block_eager.json.gz", H200 / "seed_compile_b128.json.gz", H200 / "models" / "gpt_train_eager",
          DATA / "serving" / "vllm_prefilldecode_piecewise" / "graph_execution.json.gz"]
USERS = ("tracekit.cost.roofline", "tracekit.fusion.names", "tracekit.report.phases")


def test_first_rows_points_each_row_at_the_first_alike():
    shape, same_value = [4, 8], [4, 8]
    assert first_rows(["a", "b", "a", "a"], ids([shape, shape, shape, same_value])) == [0, 1, 0, 3]
    assert first_rows([None, None], [1.5, 1.5]) == [0, 0]
    assert first_rows([], []) == []
    with pytest.raises(TypeError):
        first_rows([[1], [1]])                       # a list value: the caller falls back to every row


def _document(path, monkeypatch, every_row: bool) -> bytes:
    import importlib

    from tracekit import analyze
    from tracekit.report.diagnosis import document

    with monkeypatch.context() as m:
        if every_row:                                # each row its own first: the old per-row memo
            for name in USERS:
                m.setattr(importlib.import_module(name), "first_rows", lambda *cols: list(range(len(cols[0]))))
        real = getattr(analyze.analyze_path, "__wrapped__", analyze.analyze_path)      # not the session cache
        trace = real(path)[0]
        return orjson.dumps(document(trace), option=orjson.OPT_SERIALIZE_NUMPY | orjson.OPT_NON_STR_KEYS,
                            default=list)


@pytest.mark.parametrize("path", TRACES, ids=lambda p: p.name)
def test_rows_alike_take_the_first_ones_answer_as_every_row_worked_out(path, monkeypatch):
    fast = _document(path, monkeypatch, every_row=False)
    assert fast == _document(path, monkeypatch, every_row=True)
    doc = orjson.loads(fast)
    assert doc["summary"]["kernels"] > 0 and any(k["fused_ops"] for k in doc["kernels"])


@pytest.mark.parametrize("path", TRACES[:2], ids=lambda p: p.name)
def test_diagnosis_from_columns_is_the_diagnosis_from_the_kernel_dicts(path):
    from conftest import analyze
    from tracekit.report.diagnosis import document, facts_of

    trace = analyze(path)[0]
    doc = document(trace)                            # facts from the columns the kernels are made of
    given = doc["summary"]["diagnosis"]["facts"]
    facts = facts_of(doc, given["shortest_kernel_us"])   # facts read from the kernel dicts
    assert orjson.dumps(facts) == orjson.dumps(given)
    assert facts["kernels_per_step"] > 0 and facts["top_categories"]


@pytest.mark.parametrize("xs", [[3.0], [2.5, 1.0], [5, 1, 4, 2], [0.1, 0.7, 0.2, 0.9, 0.4], [1, 2.5]])
def test_diagnosis_median_is_statistics_median(xs):
    import statistics

    from tracekit.report.diagnosis import median

    assert median(xs) == statistics.median(xs) and type(median(xs)) is type(statistics.median(xs))
