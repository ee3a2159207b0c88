"""Issue 27: a trace's steps as columns (``model.steps``). ``Steps`` reads like the list of ``Step`` it
replaces; ``StepNames`` keeps ``ProfilerStep#N`` names as a prefix and numbers and any other names as
text, exactly as written. Loading 20k ProfilerSteps (SYNTHETIC, ``test_robust_limits._many_steps``) keeps
no object per step, in the whole-document and the chunked reader alike."""

from __future__ import annotations

import pickle

import numpy as np
import pytest

from conftest import traced
from test_robust_limits import _many_steps

from tracekit.load import chunks, reader
from tracekit.load.kineto import load_trace
from tracekit.model.steps import Step, StepNames, Steps


def test_numbered_names_are_a_prefix_and_numbers_and_read_back_exactly():
    names = StepNames([f"ProfilerStep#{k}" for k in range(5)])
    names += [f"ProfilerStep#{k}" for k in (17, 9)]                 # read in two chunks
    assert names.texts is None and names.prefix == "ProfilerStep#"
    assert list(names.numbers) == [0, 1, 2, 3, 4, 17, 9]
    assert names[5] == "ProfilerStep#17" and names[-1] == "ProfilerStep#9" and names[1:3] == ["ProfilerStep#1",
                                                                                             "ProfilerStep#2"]
    assert names.take(np.array([6, 0])) == ["ProfilerStep#9", "ProfilerStep#0"]


@pytest.mark.parametrize("odd", ["ProfilerStep#01", "ProfilerStep#+1", "ProfilerStep# 1", "ProfilerStep#1_0",
                                 "ProfilerStep#99999999999999999999", "step 3", "ProfilerStep#"])
def test_a_name_of_another_form_keeps_every_name_as_written(odd):
    first = StepNames([f"ProfilerStep#{k}" for k in range(3)])
    first.extend([odd, "ProfilerStep#4"])
    assert first.texts is not None
    assert list(first) == ["ProfilerStep#0", "ProfilerStep#1", "ProfilerStep#2", odd, "ProfilerStep#4"]


def test_codes_are_equal_exactly_where_names_are():
    for names in (["a1", "a2", "a1"], ["x", "y", "x"], ["ProfilerStep#3", "ProfilerStep#3", "ProfilerStep#30"]):
        codes = StepNames(names).codes()
        assert [(a == b) for a in codes for b in codes] == [(a == b) for a in names for b in names]


def test_steps_read_like_a_list_of_step():
    listed = [Step(0, "ProfilerStep#5", 10.0, 20.0), Step(1, "ProfilerStep#6", 20.0, 31.5),
              Step(2, "ProfilerStep#7", 31.5, 40.0)]
    steps = Steps.of(listed)
    assert steps == listed and list(steps) == listed and len(steps) == 3 and steps
    assert steps[-1] == listed[-1] and steps[1:] == listed[1:] and isinstance(steps[1:], Steps)
    assert steps.name_of(1) == "ProfilerStep#6" and steps.name_of(9, "whole trace") == "whole trace"
    assert steps.column("name")[0:2] == ["ProfilerStep#5", "ProfilerStep#6"] and steps.column("index")[2] == 2
    steps.set_end(-1, 35.0)
    assert steps[-1].end_us == 35.0 and listed[-1].end_us == 40.0
    assert pickle.loads(pickle.dumps(steps)) == steps
    assert not Steps.of([])
    with pytest.raises(IndexError):
        steps[3]


@pytest.mark.parametrize("chunked", [False, True], ids=["whole", "chunked"])
def test_loading_many_steps_keeps_no_object_per_step(tmp_path, monkeypatch, chunked):
    n = 20_000
    path = _many_steps(tmp_path / "steps.json", n)                    # SYNTHETIC
    if chunked:
        monkeypatch.setattr(reader, "WHOLE_BYTES", 1 << 16)
        monkeypatch.setattr(chunks, "CHUNK", 1 << 18)
        monkeypatch.setattr(chunks, "TAIL", 1 << 16)
    trace, kept, _ = traced(load_trace, path)
    steps = trace.steps
    assert len(steps) == n and steps.names.texts is None
    assert steps[n - 1] == Step(n - 1, f"ProfilerStep#{n - 1}", (n - 1) * 100.0, (n - 1) * 100.0 + 90.0)
    # 8 B a value: the steps' four columns (32 B a step) and the seven host figures (56 B); before, the
    # Step objects, their names and the figures' lists of Python numbers kept 280 B a step
    assert kept < 110 * n, kept


def test_devices_on_many_empty_steps_make_one_entry_for_them(tmp_path):
    """explain --devices: the 4,999 steps without kernels share one entry (243 s and 400 MB on 100k steps
    as a dict each); a row made from it equals the entry worked out for that step alone."""
    from tracekit.analyze import analyze_path
    from tracekit.cost.devices import load_spec
    from tracekit.model.rows import Rows
    from tracekit.report.devices import _step_entry, devices_section
    from tracekit.report.devices_view import _names, step_label

    [trace] = analyze_path(_many_steps(tmp_path / "steps.json", 5000))          # SYNTHETIC
    section = devices_section(trace, [load_spec("h200"), load_spec("h100-sxm")])
    steps = section["steps"]
    assert isinstance(steps, Rows) and list(steps.kept) == [0] and len(steps) == 5000
    views = [(s, trace, False) for s in (load_spec("h200"), load_spec("h100-sxm"))]
    from tracekit.report.document import step_table
    tables = [step_table(trace, ["step", "kernel_us", "floor_us", "costed_us"]).set_index("step")] * 2
    alone = _step_entry(4321, trace.kernels.iloc[0:0], views, tables)
    assert steps[4321] == dict(alone, name="ProfilerStep#4321")
    groups = section["step_groups"]
    assert [g["steps"][:2] for g in groups] == [[0], [1, 2]] and len(groups[1]["steps"]) == 4999
    assert step_label(groups[1], _names(section)) == "ProfilerStep#1–4999, alike"


def test_no_steps_is_the_whole_trace_as_one():
    whole = Steps.of([]).or_whole()
    assert list(whole) == [Step(0, "whole trace", float("-inf"), float("inf"))]
    steps = Steps.of([Step(3, "ProfilerStep#3", 1.0, 2.0)])
    assert steps.or_whole() is steps
