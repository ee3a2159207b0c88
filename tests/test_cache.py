"""The normalised-table cache (tracekit.model.cache): a miss writes Parquet, a hit skips the JSON and gives
the same explain, a damaged file is one warning and is written again, and the key follows the file's
bytes, the step marker and the graph-capture files. The cache is on only in these tests (conftest)."""

from __future__ import annotations

import json
import os
import shutil

import pandas as pd
import pytest

import tracekit.analyze as analyze
from conftest import DATA, H200, PEERS, ROOT, run_cli
from tracekit.model import cache

TRACES = [PEERS / "hta/nccl_parser_config_nccl_data.json.gz",            # collectives from the kernel args
          H200 / "graph_capture_and_replay_b128.json.gz",                 # graph replays mapped before caching
          ROOT / "captures/cpu/ddp2/bundle/rank0",                        # CPU-only bundle rank
          PEERS / "tracelens/b200__eager_trace.json.gz"]


@pytest.fixture
def cache_on(tmp_path, monkeypatch):
    """The cache on, in a fresh folder; analyze_path unwrapped from the test session's own memo."""
    folder = tmp_path / "cache"
    monkeypatch.setenv("TRACEKIT_CACHE_DIR", str(folder))
    monkeypatch.delenv("TRACEKIT_NO_CACHE", raising=False)
    monkeypatch.setattr(analyze, "analyze_path", getattr(analyze.analyze_path, "__wrapped__", analyze.analyze_path))
    return folder


def files(folder):
    return sorted(folder.rglob("*.parquet")) if folder.exists() else []


def explain(path, *extra) -> str:
    proc = run_cli("explain", path, "--format", "json", *extra)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


@pytest.mark.parametrize("trace", TRACES, ids=lambda p: p.name if p.suffix else p.parent.name)
def test_a_hit_gives_the_same_explain_as_reading_the_trace(cache_on, trace, monkeypatch):
    uncached = explain(trace, "--no-cache")
    assert files(cache_on) == []                                     # --no-cache writes nothing
    first = explain(trace)                                           # miss: read, normalised, written
    assert len(files(cache_on)) == 1

    def no_read(*a, **k):
        raise AssertionError("the trace was read again")
    monkeypatch.setattr(analyze, "load_trace", no_read)
    assert explain(trace) == first == uncached                       # hit: no JSON read, same document


def test_the_cached_table_keeps_every_column_and_value(cache_on):
    path = PEERS / "hta/nccl_parser_config_nccl_data.json.gz"
    fresh = analyze.load_normalised(path)
    kept = analyze.load_normalised(path)
    assert kept.normalised and kept.path == fresh.path
    pd.testing.assert_frame_equal(kept.kernels, fresh.kernels)
    assert (kept.steps, kept.step_rule, kept.device_name) == (fresh.steps, fresh.step_rule, fresh.device_name)
    assert (kept.metadata, kept.warnings, kept.device_properties) == \
        (fresh.metadata, fresh.warnings, fresh.device_properties)
    assert all(isinstance(k, int) for k in kept.metadata["runtime_per_step"]["step"])     # ints survive JSON
    comm = kept.kernels[kept.kernels["category"] == "communication"]
    assert comm["collective"].iloc[0] == {"name": "broadcast", "bytes": 212480.0, "dtype": "fp32", "group": "0",
                                          "group_size": 2, "source": "kernel args"}


def test_shape_lists_read_back_shared_as_the_loader_shares_them(cache_on, monkeypatch):
    """Rows with one op-shape text hold one decoded list, fresh or from the cache, so that the stages'
    per-signature memos (model.keys.ValueKeys) work out each key once."""
    path = H200 / "seed_eager_b128.json.gz"
    fresh = analyze.load_normalised(path)                                          # a miss: the loader's

    def no_read(*a, **k):
        raise AssertionError("the trace was read again")
    monkeypatch.setattr(analyze, "load_trace", no_read)
    for trace in (fresh, analyze.load_normalised(path)):                          # then a hit: the cache's
        dims = [d for d in trace.kernels["op_dims"] if isinstance(d, list)]
        texts = {repr(d) for d in dims}
        assert len(dims) > len(texts) and len({id(d) for d in dims}) == len(texts)


def test_value_keys_are_reprs_worked_out_once_per_object():
    from tracekit.model.keys import ValueKeys
    keys = ValueKeys()
    a, b = [[128, 64], [64]], [[128, 64], [64]]
    assert keys(a) == keys(b) == "[[128, 64], [64]]" and keys(a) is keys(a)
    assert keys(None) is None and keys(3) == "3" and keys("fp32") == "'fp32'" and keys({"k": 1}) == "{'k': 1}"


def test_a_damaged_cache_file_is_a_warning_and_is_written_again(cache_on):
    path = PEERS / "hta/nccl_parser_config_nccl_data.json.gz"
    good = explain(path)
    (entry,) = files(cache_on)
    for junk in (b"not parquet at all", entry.read_bytes()[: entry.stat().st_size // 2]):
        entry.write_bytes(junk)
        for kept in cache_on.rglob("*.explain.json"):            # the kept output would answer first
            kept.unlink()
        proc = run_cli("explain", path, "--format", "json")
        assert proc.returncode == 0 and proc.stdout == good
        assert "cache file" in proc.stderr and "unreadable" in proc.stderr and "Traceback" not in proc.stderr
        assert cache.read(cache.key(path, None), str(path)) is not None        # rewritten, readable


def test_the_key_follows_bytes_marker_and_graph_captures(tmp_path):
    a = tmp_path / "a.json.gz"
    shutil.copy(PEERS / "hta/triton_example_triton_example.json.gz", a)
    k = cache.key(a, None)
    assert k == cache.key(a, None) and k != cache.key(a, "ProfilerStep")
    capture = tmp_path / "graph_capture_0.json.gz"
    capture.write_bytes(b"1")
    assert cache.key(a, None, [capture]) not in (k, None)
    with_capture = cache.key(a, None, [capture])
    capture.write_bytes(b"2")
    assert cache.key(a, None, [capture]) != with_capture
    a.write_bytes(a.read_bytes() + b"\n")
    assert cache.key(a, None) != k
    fifo = tmp_path / "fifo.json"
    os.mkfifo(fifo)
    assert cache.key(fifo, None) is None                              # never opened: a FIFO would block


def test_off_switches_and_a_folder_that_cannot_be_written(cache_on, monkeypatch, tmp_path):
    path = PEERS / "hta/triton_example_triton_example.json.gz"
    with cache.settings(False):
        assert cache.folder() is None
        analyze.load_normalised(path)
    monkeypatch.setenv("TRACEKIT_NO_CACHE", "1")
    with cache.settings(True):
        assert cache.folder() is None                                 # the environment still wins
    assert files(cache_on) == []
    monkeypatch.delenv("TRACEKIT_NO_CACHE")
    blocked = tmp_path / "blocked"
    blocked.write_text("a file where the folder should be")
    monkeypatch.setenv("TRACEKIT_CACHE_DIR", str(blocked))
    assert analyze.load_normalised(path).normalised                  # no cache, no error
    monkeypatch.setenv("TRACEKIT_CACHE_DIR", str(cache_on))
    trace = analyze.load_normalised(path)
    assert len(files(cache_on)) == 1 and not list(cache_on.rglob("*.tmp"))     # renamed into place


def test_multi_rank_stages_fill_and_reuse_the_cache(cache_on):
    folder = DATA / "ranks" / "hta_trace_filter"
    first = run_cli("ranks", folder, "--format", "json", "--workers", "1")
    assert first.returncode == 0 and len(files(cache_on)) == 2
    again = run_cli("ranks", folder, "--format", "json", "--workers", "1")
    assert json.loads(again.stdout) == json.loads(first.stdout)
