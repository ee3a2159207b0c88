"""The cycle collector is paused only inside tracekit's analysis and always restored after it."""

from __future__ import annotations

import gc

import pytest
from conftest import H200, run_cli

from tracekit.gcpause import collector_paused, with_collector_paused


def test_paused_inside_and_restored_after_an_error():
    assert gc.isenabled()
    with pytest.raises(ValueError):
        with collector_paused():
            assert not gc.isenabled()
            raise ValueError("boom")
    assert gc.isenabled()


def test_a_caller_that_paused_it_keeps_it_paused():
    gc.disable()
    try:
        with collector_paused():
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_decorated_function_keeps_its_signature_and_result():
    @with_collector_paused
    def f(a: int, b: int = 2) -> int:
        """adds"""
        return a + b if not gc.isenabled() else -1
    assert f(1) == 3 and f.__doc__ == "adds" and f.__wrapped__.__name__ == "f"


def test_explain_pauses_the_collector_while_it_works_and_leaves_it_on(monkeypatch):
    import tracekit.analyze as analyze
    import tracekit.report.emit as emit
    seen = []
    real_analyze, real_emit = analyze.analyze_path, emit.emit

    def watched_analyze(*a, **k):
        seen.append(("analyze", gc.isenabled()))
        return real_analyze(*a, **k)

    def watched_emit(*a, **k):
        seen.append(("emit", gc.isenabled()))
        return real_emit(*a, **k)
    monkeypatch.setattr(analyze, "analyze_path", watched_analyze)
    monkeypatch.setattr(emit, "emit", watched_emit)
    result = run_cli("explain", H200 / "seed_eager_b1.json.gz", "-f", "json", "--no-cache")
    assert result.returncode == 0 and '"kernels"' in result.stdout
    assert seen == [("analyze", False), ("emit", False)] and gc.isenabled()


def test_a_rank_stage_pauses_the_collector_in_its_own_process():
    from tracekit.ranks.stage import rank_stage
    import tracekit.analyze as analyze
    seen = []
    real = analyze.analyze_path

    def watched(*a, **k):
        seen.append(gc.isenabled())
        return real(*a, **k)
    analyze.analyze_path = watched
    try:
        out = rank_stage({"key": "0", "label": "r0", "path": str(H200 / "seed_eager_b1.json.gz"), "cache": False})
    finally:
        analyze.analyze_path = real
    assert out["error"] is None and seen == [False] and gc.isenabled()
