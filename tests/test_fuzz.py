"""Fuzz: a few hundred mutations of committed real traces through explain (table, JSON, CSV), check
and diff, in process, with a fixed seed (tests/fuzz/engine.py says what is mutated and checked).

The inputs are synthetic: real traces, explain JSON, rules files and MLX sidecars with fields dropped,
retyped or duplicated, events cut, types swapped, huge numbers, NaN strings and wrong nesting; and
issue 27's classes (tests/fuzz/hostile.py): output paths aimed at the input (explain's files, ranks
--keep), spec numbers out of range, overflowing Input Dims under a max_gap gate and NCCL message sizes,
100 KB hostile kernel names and hostile file names; and, in their own short run, capture-script
behaviours (the script writes tracekit's file names, removes its -o folder, forks, exits from a
thread, closes stdout). Every
run must exit 0, 1 or 2 with no traceback and no internal error, stderr lines must be single
``tracekit: `` lines, explain must give the same exit code in every format, and a rules file that
could pass anything must be exit 2. The longer run: ``python tests/fuzz/run.py --cases 5000``."""

from __future__ import annotations

import pytest

from fuzz.engine import Case, SOURCES, fuzz
from fuzz.hostile import CAPTURE_MAKERS

SEED = 16                   # issue 16
CASES = 300                 # about 15-20 s on two cores


def test_mutated_real_traces_never_give_an_internal_error(tmp_path):
    result = fuzz(CASES, SEED, tmp_path)
    report = "\n".join(f"case {f['case']} ({f['kind']}: {f['note']}) {f['commands']}: {f['problems']}"
                       for f in result["failures"][:10])
    assert not result["failures"], f"{len(result['failures'])} of {CASES} cases failed:\n{report}"
    seconds, which = result["slowest"]
    assert seconds < 10, f"slowest case took {seconds:.1f} s: {which}"


CAPTURES = 3                # about 30 s: each captures a small torch script in a fresh process


@pytest.mark.skipif(not CAPTURE_MAKERS, reason="needs torch")
def test_capture_of_misbehaving_scripts_keeps_its_bundle(tmp_path):
    result = fuzz(CAPTURES, SEED, tmp_path, make=lambda rng, d, k: CAPTURE_MAKERS[0](rng, d, k, SOURCES, Case))
    report = "\n".join(f"case {f['case']} ({f['note']}): {f['problems']}" for f in result["failures"])
    assert not result["failures"], report
