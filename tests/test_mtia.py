"""MTIA device events (``mtia_ccp_events``) read as kernel-table rows, on HTA's two real MTIA traces.

Values are of two kinds: HTA's own (its tests/test_trace_analysis.py at the SOURCES.md revision asserts them
on ``mtia_trace_single_rank/mtia_rank_0.json.gz``), and counts made here from the raw events with plain
Python (``_raw``, ``_union``): no tracekit code is involved in them. docs/crosscheck.md §4 explains where
tracekit and HTA differ.
"""

from __future__ import annotations

import gzip
from collections import Counter

import orjson
import pytest
from conftest import PEERS, explain_json, run_cli

INFERENCE = PEERS / "hta/mtia_inference_trace_mtia_inference_rank_0.json.gz"    # no ProfilerStep, 12 streams
SINGLE = PEERS / "hta/mtia_trace_single_rank_mtia_rank_0.json.gz"                 # ProfilerStep#1, named kernels
WAITS = ("event_wait", "event_record")


def _raw(path) -> list[dict]:
    return orjson.loads(gzip.open(path).read())["traceEvents"]


def _ccp(events) -> list[dict]:
    return [e for e in events if e.get("cat") == "mtia_ccp_events" and e.get("ph") == "X"]


def _union(spans) -> tuple[float, float]:
    """(time covered by the union of [ts, ts + dur), span from the first start to the last end)."""
    spans = sorted(spans)
    busy, cur_s, cur_e = 0.0, None, None
    for s, e in spans:
        if cur_e is None or s > cur_e:
            busy += (cur_e - cur_s) if cur_e is not None else 0.0
            cur_s, cur_e = s, e
        else:
            cur_e = max(cur_e, e)
    busy += cur_e - cur_s
    return busy, max(e for _, e in spans) - spans[0][0]


def test_inference_trace_device_events_are_rows_waits_are_not():
    """1,313 mtia_ccp_events: 877 dma_request, 24 pe_exe, 36 merge, 37 remote become 974 rows (877 copies,
    97 jobs); 48 event_wait + 291 event_record are stream waits, no row. Was: 0 device rows, the 1,313
    events 'not read' and the trace explained as 3,545 top-level CPU ops."""
    ccp = _ccp(_raw(INFERENCE))
    assert Counter(e["name"] for e in ccp) == {"dma_request": 877, "event_record": 291, "event_wait": 48,
                                               "remote": 37, "merge": 36, "pe_exe": 24}
    doc = explain_json(INFERENCE)
    rows = doc["kernels"]
    assert len(rows) == 974 == len([e for e in ccp if e["name"] not in WAITS])
    assert Counter(k["kind"] for k in rows) == {"memcpy": 877, "kernel": 97}
    assert Counter(k["name"] for k in rows if k["kind"] == "kernel") == {"remote": 37, "merge": 36, "pe_exe": 24}
    # one step (no ProfilerStep): kernel time is the rows' durations, idle is the span less their union
    step = doc["steps"][0]
    kept = [e for e in ccp if e["name"] not in WAITS]
    busy, window = _union([(e["ts"], e["ts"] + e["dur"]) for e in kept])
    assert step["kernels"] == 974
    assert step["kernel_us"] == pytest.approx(sum(e["dur"] for e in kept)) == pytest.approx(459_456.313)
    assert step["window_us"] == pytest.approx(window) and step["idle_us"] == pytest.approx(window - busy)
    assert all(k["floor_us"] is None and k["gap"] is None for k in rows)       # ARTEMIS: no spec, no floor
    warnings = doc["warnings"]
    assert not any("not read" in w for w in warnings)
    assert sum("event_wait" in w for w in warnings) == 1
    wait = next(w for w in warnings if "event_wait" in w)
    assert "48 event_wait (352,569.59 µs), 291 event_record (99.26 µs)" in wait       # sums of the raw durs
    assert sum(e["dur"] for e in ccp if e["name"] == "event_wait") == pytest.approx(352_569.592)
    waits = doc["summary"]["device_waits"]
    assert waits["event_wait"]["events"] == 48 and waits["event_record"]["events"] == 291
    assert waits["event_wait"]["us"] == pytest.approx(352_569.592)


def test_inference_trace_links_jobs_and_dma_to_their_runtime_calls():
    """73 jobs (merge, remote) carry a correlation to a ``runFunction`` call; 657 DMA requests to an
    ``enqueueCommand memcpy*`` call, several requests per copy: correlation 20200001's five requests
    add up to the call's ``mem size`` of 14,139,908 bytes. 220 DMA requests and the 24 pe_exe (22 before the
    profiler's window opens) have none: rows, placed by their own start, one warning."""
    rows = explain_json(INFERENCE)["kernels"]
    launch = Counter((k["name"], k["launch"]) for k in rows)
    run = "runFunction - job_prep_and_submit_for_execution"
    assert launch[("merge", run)] == 36 and launch[("remote", run)] == 37 and launch[("pe_exe", "")] == 24
    dma = [k for k in rows if k["kind"] == "memcpy"]
    assert sum(k["launch"].startswith("enqueueCommand memcpy") for k in dma) == 657
    assert sum(k["launch"] == "" for k in dma) == 220
    copy = [k for k in dma if k["launch"] == "enqueueCommand memcpyHtoDAsync" and k["event_bytes"] == 13_712_300]
    assert copy and copy[0]["name"] == "dma_request (HOST_TO_DEVICE)"
    proc = run_cli("explain", INFERENCE, "--format", "json")
    assert proc.stderr.count("244 MTIA device events name no launch") == 1
    # no CPU op (nor annotation) on the launching thread encloses any of the 185 runtime calls: no row has an op
    events = _raw(INFERENCE)
    spans: dict = {}
    for e in events:
        if e.get("ph") == "X" and e.get("cat") in ("cpu_op", "user_annotation"):
            spans.setdefault(e["tid"], []).append((e["ts"], e["ts"] + e["dur"]))
    calls = [e for e in events if e.get("cat") == "mtia_runtime"
             and e["name"].startswith(("runFunction", "enqueueCommand memcpy"))]
    assert len(calls) == 185
    assert not any(a <= c["ts"] <= b for c in calls for a, b in spans.get(c["tid"], []))
    assert all(k["op"] is None for k in rows)
    # a copy's bytes are the trace's own (args size), once over the link: no floor without a spec
    assert all(k["bytes"] == k["event_bytes"] and k["compute_unit"] == "pcie" for k in dma)


def test_inference_trace_copies_of_one_call_add_up_to_its_mem_size():
    events = _raw(INFERENCE)
    call = next(e for e in events if e.get("cat") == "mtia_runtime" and e["args"].get("correlation") == 20200001)
    assert call["args"]["mem size"] == "14139908 bytes"
    doc = explain_json(INFERENCE)
    rows = [k for k in doc["kernels"] if k["kind"] == "memcpy"]
    # the JSON kernels carry no correlation: the five requests of that call are the five rows at their starts
    starts = {e["ts"] for e in _ccp(events) if e["args"].get("correlation") == 20200001}
    assert len(starts) == 5
    assert sum(k["event_bytes"] for k in rows if k["start_us"] in starts) == 14_139_908


def test_single_rank_trace_matches_htas_own_assertions():
    """HTA's tests on this trace: kernel time (first kernel start to last end) 13,328,347 µs; the kernel of
    correlation 423 ran 124.768 µs; aten::mul launched customized_fba_mul_const-dtype_Float 822 times.
    tracekit: the ProfilerStep#1 window 13,328,347.48 µs, the same kernel 124.768 µs, 822 kernels."""
    doc = explain_json(SINGLE)
    step = doc["steps"][0]
    assert int(step["window_us"]) == 13_328_347
    assert doc["summary"]["kernels_per_step"] == [25_812] and doc["summary"]["kernels_outside_steps"] == 2
    # every job was submitted by one runFunction call in the step: 3,453 launches (was 0: not a launch API)
    runs = [e for e in _raw(SINGLE) if e.get("cat") == "mtia_runtime" and e["name"].startswith("runFunction")]
    assert step["launches"] == len(runs) == 3_453
    pairs = Counter((k["op"], k["name"]) for k in doc["kernels"] if k["step"] == 0)
    assert pairs[("aten::mul", "customized_fba_mul_const-dtype_Float")] == 822
    # the HTA test's kernel of correlation 423 (its gpu_duration 124.768 µs), found in the raw events
    raw = next(e for e in _ccp(_raw(SINGLE)) if e["args"].get("correlation") == 423)
    assert raw["dur"] == 124.768
    assert [k["dur_us"] for k in doc["kernels"] if k["start_us"] == raw["ts"]] == [124.768]


def test_single_rank_trace_compute_and_idle_against_a_plain_count_and_hta():
    """Raw events in ProfilerStep#1 (by start): 3,450 + 3 jobs (7,309,063.136 µs) and 22,359 DMA requests; the
    union of all of them leaves 5,626,576.37 µs idle in the 13,328,347.48 µs window. HTA's test: compute
    7,305,596 µs, idle 5,648,827 µs: within 0.05 % and 0.4 % of these (HTA reads whole µs: docs/crosscheck.md)."""
    events = _raw(SINGLE)
    mark = next(e for e in events if e.get("name") == "ProfilerStep#1")
    inside = [e for e in _ccp(events) if mark["ts"] <= e["ts"] < mark["ts"] + mark["dur"]]
    jobs = [e for e in inside if not e["name"].startswith("dma")]
    busy, window = _union([(e["ts"], e["ts"] + e["dur"]) for e in inside])
    step = explain_json(SINGLE)["steps"][0]
    assert step["kernels"] == len(inside) == 25_812
    assert step["kernel_us"] == pytest.approx(sum(e["dur"] for e in inside))
    assert step["window_us"] == pytest.approx(window) and step["idle_us"] == pytest.approx(window - busy)
    by = explain_json(SINGLE)["summary"]["by_category"]
    compute = sum(v["dur_us"] for c, v in by.items() if c != "memcpy")
    assert compute == pytest.approx(sum(e["dur"] for e in jobs)) == pytest.approx(7_309_063.136)
    assert by["memcpy"]["count"] == 22_359
    assert compute == pytest.approx(7_305_596, rel=5e-4)          # HTA's compute_time
    assert step["idle_us"] == pytest.approx(5_648_827, rel=4e-3)  # HTA's idle_time


def test_perfetto_annotates_every_mtia_row_event(tmp_path):
    """explain --perfetto on the inference trace: the 974 row events carry tracekit's facts, the waits none.
    Was: exit 2, 'changed since it was read (event 12047 is not the kernel dma_request (DEVICE_TO_HOST))'
    (the row's name carries the direction, the event's does not)."""
    out = tmp_path / "annotated.json.gz"
    proc = run_cli("explain", INFERENCE, "--perfetto", out, "--format", "json")
    assert proc.returncode == 0, proc.stderr
    ccp = _ccp(orjson.loads(gzip.open(out).read())["traceEvents"])
    marked = Counter(e["name"] for e in ccp if "tracekit" in e["args"])
    assert marked == {"dma_request": 877, "remote": 37, "merge": 36, "pe_exe": 24}
    assert {e["args"]["tracekit"]["category"] for e in ccp if e["name"] == "dma_request"} == {"memcpy"}
