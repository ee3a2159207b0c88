"""Issue 16: never hang, never pass a gate that should fail, no internal error on bad input.

Every input here is synthetic: made by the test, small, often a real trace with one thing broken.
docs/limits.md states the limits these tests hold tracekit to."""

from __future__ import annotations

import gzip
import json
import os
import shutil
import subprocess
import sys
import time
import xml.dom.minidom
import zlib

import pytest

from conftest import H200, PEERS, ROOT, run_cli

EAGER = H200 / "seed_eager_b1.json.gz"                        # NVIDIA H200, 5 ProfilerSteps
SMALL = PEERS / "hta/triton_example_triton_example.json.gz"
FORMATS = ("table", "json", "csv")


def _doc(path=EAGER) -> dict:
    return json.loads(gzip.decompress(path.read_bytes()))


def _write(tmp_path, doc, name="t.json"):
    """JSON text of ``doc``; a "__DEEP_<n>__" string becomes a list nested n deep (past json's recursion)."""
    path = tmp_path / name
    text = json.dumps(doc)
    for n in (300, 990):
        text = text.replace(f'"__DEEP_{n}__"', "[" * n + "]" * n)
    path.write_text(text)
    return path


def _one_line_error(proc, *words):
    assert proc.returncode == 2, (proc.returncode, proc.stderr)
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("tracekit: "), proc.stderr
    assert "Traceback" not in proc.stderr and "internal error" not in proc.stderr
    for w in words:
        assert w in lines[0], lines[0]
    return lines[0]


def _same_code_every_format(path, *extra) -> tuple[int, str]:
    procs = {f: run_cli("explain", path, "--format", f, *extra) for f in FORMATS}
    codes = {f: p.returncode for f, p in procs.items()}
    assert len(set(codes.values())) == 1, codes
    for p in procs.values():
        assert "internal error" not in p.stderr and "Traceback" not in p.stderr, p.stderr
        assert all(line.startswith("tracekit: ") for line in p.stderr.splitlines()), p.stderr
    return codes["json"], procs["json"].stderr


# synthetic events: one kernel, its launch, the op that launched it
def K(**kw):
    return {"ph": "X", "cat": "kernel", "name": "k", "ts": 10, "dur": 2, "args": {"correlation": 1}, **kw}


def L(**kw):
    return {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "ts": 5, "dur": 1, "tid": 1,
            "args": {"correlation": 1, "External id": 7}, **kw}


def O(**kw):
    return {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "ts": 4, "dur": 5, "tid": 1,
            "args": {"External id": 7, "Input Dims": [[2, 2], [2, 2]], "Input type": ["float", "float"]}, **kw}


def _trace(*events, props=None):
    doc = {"traceEvents": list(events)}
    doc["deviceProperties"] = [{"name": "NVIDIA H100 80GB HBM3"}] if props is None else props
    return doc


def _deep(n):
    return f"__DEEP_{n}__"                  # _write makes it a list nested n deep


# --- internal errors → one-line input errors naming the event, or a warning; same code in every format ---

MALFORMED = {
    "correlation as a list": (_trace(K(args={"correlation": [1]}), L(), O()), 2, ["event #0", "'correlation'", "list"]),
    "correlation as a dict": (_trace(K(), L(args={"correlation": {"a": 1}}), O()), 2, ["event #1", "dict"]),
    "External id as a list": (_trace(K(), L(), O(args={"External id": [7]})), 2, ["event #2", "'External id'"]),
    "kernel name an int": (_trace(K(name=5), L(), O()), 2, ["event #0", "name that is not a string"]),
    "op name a list": (_trace(K(), L(), O(name=["aten::mm"])), 2, ["event #2", "name that is not a string"]),
    "launch without ts": (_trace(K(), {k: v for k, v in L().items() if k != "ts"}, O()), 2,
                          ["event #1", "'cudaLaunchKernel'", "no 'ts'"]),
    "launch with a string ts": (_trace(K(), L(ts="abc"), O()), 2, ["event #1", "non-numeric", "'abc'"]),
    "dur 'nan'": (_trace(K(dur="nan"), L(), O()), 2, ["event #0", "non-finite dur", "'nan'"]),
    "ts 'inf'": (_trace(K(ts="inf"), L(), O()), 2, ["event #0", "ts"]),
    "dur implausible": (_trace(K(dur=1e300), L(), O()), 2, ["event #0", "implausible dur"]),
    "tid a list": (_trace(K(), L(tid=[1]), O()), 2, ["event #1", "'tid'", "list"]),
    "an event that is a list": (_trace([K()], L(), O()), 2, ["event #0", "not a JSON object"]),
    "cat a list": (_trace(K(cat=["kernel"]), L(), O()), 2, ["event #0", "'cat'"]),
    "deviceProperties a dict": (_trace(K(), L(), O(), props={"name": "NVIDIA H100"}), 0,
                                ["deviceProperties is a dict", "unknown device"]),
    "deviceProperties an int": (_trace(K(), L(), O(), props=5), 0, ["deviceProperties is a int"]),
    "memcpy bytes a string": (_trace(K(cat="gpu_memcpy", name="Memcpy HtoD", args={"correlation": 1, "bytes": "lots"}),
                                     L(), O()), 0, ["1 memcpy/memset events have a 'bytes' that is not a number"]),
    "shape/type length mismatch": (_trace(K(), L(), O(args={"External id": 7, "Input Dims": [[2, 2], [2, 2]],
                                                             "Input type": ["float"]})), 0,
                                   ["1 ops have Input Dims/type", "shapes are unknown"]),
    "Input Dims nested 990 deep": (_trace(K(), L(), O(args={"External id": 7, "Input Dims": [_deep(990)]})), 0,
                                   ["1 ops have Input Dims/type"]),
    "grid nested deep": (_trace(K(args={"correlation": 1, "grid": _deep(300)}), L(), O()), 0, ["grid or block"]),
}


@pytest.mark.parametrize("case", list(MALFORMED))
def test_malformed_event_is_a_named_input_error_or_a_warning(tmp_path, case):
    """Synthetic: one kernel/launch/op trace with one field broken (the issue's list)."""
    doc, code, words = MALFORMED[case]
    path = _write(tmp_path, doc)
    got, stderr = _same_code_every_format(path)
    assert got == code, stderr
    line = stderr.strip().splitlines()[0] if code == 2 else stderr
    for w in words:
        assert w in line, stderr


def test_graph_replay_with_malformed_capture_events(tmp_path):
    """Synthetic: a CUDA-graph replay whose capture marks carry a 5,000-digit graph number and a string
    ts (int() of those digits raised ValueError); the replay stays unmapped with a warning."""
    replay = [{"ph": "X", "cat": "kernel", "name": "k", "ts": 100, "dur": 2, "args": {"correlation": 9}},
              {"ph": "X", "cat": "cuda_runtime", "name": "cudaGraphLaunch", "ts": 90, "dur": 1, "tid": 1,
               "args": {"correlation": 9}},
              {"ph": "X", "cat": "user_annotation", "name": "tracekit::graph_capture#" + "9" * 5000, "ts": 1,
               "dur": 50, "tid": 1},
              {"ph": "X", "cat": "user_annotation", "name": "tracekit::graph_replay#1", "ts": "x", "dur": 50, "tid": 1},
              {"ph": "X", "cat": "cuda_runtime", "name": "cudaStreamBeginCapture", "ts": "5", "dur": [1], "tid": 1}]
    code, stderr = _same_code_every_format(_write(tmp_path, _trace(*replay)))
    assert code == 0 and "graph replays: 1 of 1 replayed rows left unmapped" in stderr


def test_mlx_sidecar_with_null_shape_is_a_warning(tmp_path):
    """Synthetic: a real MLX graph whose shape sidecar has an array with shape null and one with a
    string dtype list; the graph is read, those kernels lose their floor, and stderr says so."""
    src = ROOT / "captures/mlx/seed_lazy_bf16_b128/graphs"
    (tmp_path / "001.dot").write_text((src / "001.dot").read_text())
    info = json.loads((src / "001.json").read_text())
    first, second = list(info["arrays"])[:2]
    info["arrays"][first]["shape"] = None
    info["arrays"][second]["dtype"] = ["bf16"]
    info["warnings"] = "not a list"
    (tmp_path / "001.json").write_text(json.dumps(info))
    code, stderr = _same_code_every_format(tmp_path / "001.dot")
    assert code == 0 and "2 arrays have no usable shape or dtype" in stderr


def test_mlx_sidecar_of_the_wrong_type_everywhere(tmp_path):
    """Synthetic: arrays, compiled and device fields of the wrong JSON type."""
    src = ROOT / "captures/mlx/seed_lazy_bf16_b128/graphs"
    (tmp_path / "001.dot").write_text((src / "001.dot").read_text())
    (tmp_path / "001.json").write_text(json.dumps({"arrays": [1], "compiled": "x", "device_type": 5,
                                                    "device_name": ["gpu"]}))
    code, stderr = _same_code_every_format(tmp_path / "001.dot")
    assert code == 0 and "compiled" in stderr and "device_type is a int" in stderr


# --- silent loss ---

def test_device_events_that_are_not_complete_are_counted_and_warned(tmp_path):
    """Synthetic: one kernel as a complete event, two as B/E halves and one without ph."""
    doc = _trace(K(), L(), O(), K(ph="B", ts=20), K(ph="E", ts=22), {k: v for k, v in K(ts=30).items() if k != "ph"})
    code, stderr = _same_code_every_format(_write(tmp_path, doc))
    assert code == 0
    assert "3 device events (kernel) whose ph is not 'X'" in stderr


def test_mtia_device_events_without_a_launch_are_rows_and_warned(tmp_path):
    """Synthetic: an MTIA-style trace (mtia_ccp_events as in HTA's MTIA test traces) with one CPU op: three
    launch-less jobs become rows (one warning), a wait is no row (its own warning), a B/E half is skipped."""
    ccp = [{"ph": "X", "cat": "mtia_ccp_events", "name": "pe_exe", "pid": 17, "tid": 3910, "ts": 100 + i,
            "dur": 1, "args": {"stream": 112}} for i in range(3)]
    wait = {**ccp[0], "name": "event_wait", "ts": 110, "dur": 5}
    half = {**ccp[0], "ph": "B", "ts": 120}
    path = _write(tmp_path, _trace(*ccp, wait, half, O(), props=[{"name": "ARTEMIS"}]))
    code, stderr = _same_code_every_format(path)
    assert code == 0 and "not read" not in stderr
    assert stderr.count("3 MTIA device events name no launch") == 1
    assert "1 event_wait (5.00 µs) left out of kernel time" in stderr
    assert "1 device events (mtia_ccp_events) whose ph is not 'X'" in stderr
    doc = json.loads(run_cli("explain", path, "--format", "json").stdout)
    assert [(k["name"], k["kind"], k["stream"]) for k in doc["kernels"]] == [("pe_exe", "kernel", 112)] * 3


@pytest.mark.parametrize("doc", [{"traceEvents": []}, [], {"traceEvents": [{"ph": "M", "name": "process_name"}]}])
def test_a_trace_with_nothing_to_explain_is_exit_2(tmp_path, doc):
    """Synthetic: no events, or only metadata: exit 2 in every format (docs/limits.md says why)."""
    path = _write(tmp_path, doc)
    for fmt in FORMATS:
        _one_line_error(run_cli("explain", path, "--format", fmt), "nothing to explain")
    _one_line_error(run_cli("check", path, "--baseline", EAGER), "nothing to explain")


# --- trace text is not markup, and long text does not stall ---

def test_markup_in_a_kernel_name_is_shown_as_written(tmp_path):
    """Synthetic: kernel names holding rich markup ('[/]' crashed the table, '[link=...]' renamed)."""
    names = ["[/]bad", "[link=http://example.com]evil[/link]", "[bold red]x"]
    doc = _trace(*(K(name=n, ts=10 + 5 * i, args={"correlation": i}) for i, n in enumerate(names)),
                 *(L(ts=5 + 5 * i, args={"correlation": i, "External id": 7}) for i in range(3)), O(dur=20))
    proc = run_cli("explain", _write(tmp_path, doc))
    assert proc.returncode == 0, proc.stderr
    for n in names:
        assert n in proc.stdout


def test_a_100_kb_device_name_does_not_stall_the_table(tmp_path):
    """Synthetic: deviceProperties name of 100,000 digits (rich's highlighter took minutes: the table prints
    with highlighting off, and the name is cut before it is printed)."""
    doc = _trace(K(), L(), O(), props=[{"name": "1" * 100_000}])
    proc = run_cli("explain", _write(tmp_path, doc), "--width", "200")      # one line, whatever $COLUMNS says
    assert proc.returncode == 0
    device = next(line for line in proc.stdout.splitlines() if line.startswith("device: "))
    assert len(device) < 200 and "…" in device
    assert all(len(line) <= 520 for line in proc.stderr.splitlines())      # the warning is cut too


def test_error_and_warning_lines_stay_one_line_with_newlines_in_names(tmp_path):
    """Synthetic: a newline and control characters inside the name an error quotes."""
    proc = run_cli("explain", _write(tmp_path, _trace(K(name="a\nb\x1b[31m", dur="nan"), L(), O())))
    line = _one_line_error(proc, "event #0")
    assert "\\n" in line and "\\x1b" in line


# --- user regexes ---

@pytest.mark.parametrize("pattern, why", [("(a+)+$", "quantifier inside a repeated group"),
                                          (r"(\w+\s?)+$", "quantifier inside a repeated group"),
                                          ("(a|aa)*b", "alternation"), (r"(.)\1", "backreference")])
def test_step_marker_that_can_backtrack_forever_is_refused(pattern, why):
    _one_line_error(run_cli("explain", SMALL, "--step-marker", pattern), "--step-marker", "refused", why)


def test_forbid_pattern_that_can_backtrack_forever_is_refused(tmp_path):
    """Synthetic rules file with a nested-quantifier forbid pattern."""
    rules = tmp_path / "r.toml"
    rules.write_text('[[forbid]]\npattern = "(\\\\w+\\\\s?)+$"\n')
    _one_line_error(run_cli("check", EAGER, "--rules", rules), str(rules), "forbid[0].pattern", "refused")


def test_a_slow_regex_runs_out_of_its_time_budget(monkeypatch):
    """Synthetic: '.*a.*b.*c' (allowed: no nesting, but cubic) on a 16,384-character name."""
    from tracekit.errors import TracekitError
    from tracekit.limits import UserRegex
    monkeypatch.setenv("TRACEKIT_REGEX_SECONDS", "0.3")
    rx = UserRegex(".*a.*b.*c", "--step-marker")
    t = time.perf_counter()
    with pytest.raises(TracekitError, match="spent more than 0.3 s"):
        rx.search("a" * 50_000)
    assert time.perf_counter() - t < 3
    assert UserRegex("^aten::mm$", "x").search("aten::mm")           # normal patterns are unaffected


def test_a_regex_sees_a_bounded_prefix_of_a_name():
    from tracekit.limits import MAX_MATCH_CHARS, UserRegex
    rx = UserRegex("b$", "x")
    assert rx.search("a" * 100 + "b")
    assert not rx.search("a" * MAX_MATCH_CHARS + "b")


# --- reading: regular files only, bounded, gzip streamed ---

def _run_with_timeout(*args, env=None):
    """A subprocess: a regression here would block, which must fail the test rather than hang it."""
    return subprocess.run([sys.executable, "-m", "tracekit", *map(str, args)], capture_output=True, text=True,
                          timeout=60, cwd=ROOT, env={**os.environ, **(env or {})})


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs on this platform")
def test_a_fifo_is_refused_as_trace_baseline_rules_and_dot(tmp_path):
    """Synthetic: named pipes nobody writes to, given where tracekit reads a file."""
    for name in ("trace.json", "base.json", "rules.toml", "g.dot"):
        os.mkfifo(tmp_path / name)
    for args, what in [(("explain", tmp_path / "trace.json"), "a trace"),
                       (("check", EAGER, "--baseline", tmp_path / "base.json"), "FIFO"),
                       (("check", EAGER, "--rules", tmp_path / "rules.toml"), "a rules file"),
                       (("diff", tmp_path / "base.json", EAGER), "FIFO"),
                       (("explain", tmp_path / "g.dot"), "a dot graph")]:
        _one_line_error(_run_with_timeout(*args), "FIFO", "not a regular file", what)


def test_dev_zero_is_refused():
    if not os.path.exists("/dev/zero"):
        pytest.skip("no /dev/zero")
    _one_line_error(_run_with_timeout("explain", "/dev/zero"), "character device", "not a regular file")


def test_size_limit_comes_from_the_environment(monkeypatch, tmp_path):
    """A copy of a real trace (a path of its own: the test session caches analyses per file)."""
    trace = tmp_path / "copy.json.gz"
    trace.write_bytes(EAGER.read_bytes())
    monkeypatch.setenv("TRACEKIT_MAX_INPUT_BYTES", "1K")
    _one_line_error(run_cli("explain", trace), "larger than 1 KiB", "TRACEKIT_MAX_INPUT_BYTES")
    monkeypatch.setenv("TRACEKIT_MAX_INPUT_BYTES", "lots")
    _one_line_error(run_cli("explain", trace), "TRACEKIT_MAX_INPUT_BYTES", "positive number")


def test_a_gzip_bomb_is_refused_by_ratio_without_expanding(tmp_path):
    """Synthetic: 1 GiB of spaces inside a JSON array, compressed to about 1 MB (ratio ~1000)."""
    bomb = tmp_path / "bomb.json.gz"
    z = zlib.compressobj(9, zlib.DEFLATED, 31)
    chunk = b" " * (1 << 24)
    with bomb.open("wb") as fh:
        fh.write(z.compress(b'{"traceEvents": ['))
        for _ in range(64):
            fh.write(z.compress(chunk))
        fh.write(z.compress(b"]}") + z.flush())
    t = time.perf_counter()
    _one_line_error(run_cli("explain", bomb), "gzip expands more than 100×", "TRACEKIT_MAX_GZIP_RATIO")
    assert time.perf_counter() - t < 20


def test_a_multi_member_gzip_reads_like_the_whole(tmp_path):
    """Synthetic: a real trace's JSON cut in two and gzipped as two members (as `cat a.gz b.gz`)."""
    text = gzip.decompress(EAGER.read_bytes())
    two = tmp_path / "two.json.gz"
    two.write_bytes(gzip.compress(text[:1000]) + gzip.compress(text[1000:]))
    got, want = (json.loads(run_cli("explain", x, "--format", "json").stdout) for x in (two, EAGER))
    assert got.pop("trace") != want.pop("trace") and got == want


def test_bytes_after_the_gzip_stream_are_an_error(tmp_path):
    bad = tmp_path / "tail.json.gz"
    bad.write_bytes(EAGER.read_bytes() + b"junk")
    _one_line_error(run_cli("explain", bad), "bad gzip")


# --- gates fail closed ---

@pytest.mark.parametrize("text, words", [
    ("[baseline]\ntolerance = nan\n", ["baseline.tolerance", "finite"]),
    ("[max_gap]\nall = inf\n", ["max_gap.all", "finite"]),
    ("max_idle_fraction = nan\n", ["max_idle_fraction", "finite"]),
    ("", ["defines no rule"]),
    ('description = "nothing to see"\nskip_steps = 1\n', ["defines no rule"]),
    ("[kernels_per_step]\n", ["defines no rule"]),
])
def test_a_rules_file_that_could_pass_anything_is_exit_2(tmp_path, text, words):
    """Synthetic rules files: NaN/inf numbers (nan passed every comparison) and files with no rule."""
    rules = tmp_path / "r.toml"
    rules.write_text(text)
    _one_line_error(run_cli("check", EAGER, "--rules", rules, "--baseline", EAGER), str(rules), *words)


def test_a_check_that_checks_nothing_is_exit_2(tmp_path):
    rules = tmp_path / "r.toml"
    rules.write_text("[baseline]\nkernels = false\nfused = false\ntime = false\n")
    _one_line_error(run_cli("check", EAGER, "--rules", rules, "--baseline", EAGER), "defines no rule")


def test_nan_strings_in_a_trace_fail_the_check(tmp_path):
    """Synthetic: the eager H200 trace with every kernel's dur written as the string 'nan'."""
    doc = _doc()
    for e in doc["traceEvents"]:
        if e.get("cat") == "kernel":
            e["dur"] = "nan"
    path = _write(tmp_path, doc)
    _one_line_error(run_cli("check", path, "--baseline", EAGER), "non-finite dur")
    _one_line_error(run_cli("check", EAGER, "--baseline", path), "non-finite dur")


def test_nan_strings_in_an_explain_json_baseline_fail_the_check(tmp_path):
    """Synthetic: an explain JSON baseline whose kernel time per step and a kernel's dur are 'nan'."""
    doc = json.loads(run_cli("explain", EAGER, "--format", "json").stdout)
    doc["kernels"][0]["dur_us"] = "nan"
    base = _write(tmp_path, doc, "base.json")
    _one_line_error(run_cli("check", EAGER, "--baseline", base), "kernels[0].dur_us", "not a finite number")


def test_a_baseline_from_another_device_is_an_error_unless_allowed(tmp_path):
    """Synthetic: the H200 trace with its deviceProperties renamed to an MI300X."""
    doc = _doc()
    doc["deviceProperties"][0]["name"] = "AMD Instinct MI300X"
    other = _write(tmp_path, doc, "mi300x.json")
    for args in (("check", EAGER, "--baseline", other), ("diff", other, EAGER)):
        _one_line_error(run_cli(*args), "AMD Instinct MI300X", "NVIDIA H200", "--allow-device-mismatch")
        proc = run_cli(*args, "--allow-device-mismatch")
        assert proc.returncode in (0, 1) and "warning:" in proc.stderr and "not comparable" in proc.stderr


def test_gate_functions_default_to_refusing_a_device_mismatch(tmp_path):
    from tracekit.errors import TracekitError
    from tracekit.gate.baseline import DEFAULT_TOLERANCE, load_side
    from tracekit.gate.check import run_check
    from tracekit.gate.diff import compare
    doc = _doc()
    doc["deviceProperties"][0]["name"] = "AMD Instinct MI300X"
    other = _write(tmp_path, doc, "mi300x.json")
    with pytest.raises(TracekitError, match="allow-device-mismatch"):
        run_check(str(EAGER), str(other))
    with pytest.raises(TracekitError, match="allow-device-mismatch"):
        compare(load_side(other), load_side(EAGER), dict(DEFAULT_TOLERANCE))
    assert run_check(str(EAGER), str(other), allow_device_mismatch=True)["results"]


def test_junit_is_valid_xml_with_control_characters_in_names(tmp_path):
    """Synthetic: kernel names with NUL, ESC, BEL and a vertical tab, caught by a forbid rule."""
    names = ["bad\x00kernel", "esc\x1b[31m", "bell\x07", "vt\x0bk"]
    doc = _trace(*(K(name=n, ts=10 + 5 * i, args={"correlation": i}) for i, n in enumerate(names)),
                 *(L(ts=5 + 5 * i, args={"correlation": i, "External id": 7}) for i in range(4)), O(dur=30))
    rules = tmp_path / "r.toml"
    rules.write_text('[[forbid]]\npattern = "."\nlabel = "any\\u0001kernel"\n')
    proc = run_cli("check", _write(tmp_path, doc), "--rules", rules, "--format", "junit")
    assert proc.returncode == 1, proc.stderr
    dom = xml.dom.minidom.parseString(proc.stdout.encode())
    failure = dom.getElementsByTagName("failure")[0]
    assert "kernel: bad kernel ×1" in failure.firstChild.data           # names: control characters as spaces
    assert dom.getElementsByTagName("testcase")[0].getAttribute("name") == "forbid[any\\x01kernel]"
    assert "any\\x01kernel" in failure.getAttribute("message")


def test_the_regex_timer_keeps_another_alarm():
    """The time budget uses SIGALRM; an alarm someone else set still fires, on time."""
    import signal
    if not hasattr(signal, "setitimer"):
        pytest.skip("no setitimer")
    from tracekit.limits import UserRegex
    fired = []
    old = signal.signal(signal.SIGALRM, lambda *a: fired.append(time.monotonic()))
    try:
        t0 = time.monotonic()
        signal.setitimer(signal.ITIMER_REAL, 0.3)
        rx = UserRegex("a.*b", "x")
        assert sum(rx.search(f"a{i}b") for i in range(500)) == 500
        time.sleep(0.5)
        assert fired and 0.25 < fired[0] - t0 < 0.45
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def test_a_fifo_as_spec_or_kernel_source_never_blocks(tmp_path):
    """Synthetic: a named pipe as --spec is one line, exit 2; one in a bundle's kernels/ folder (named
    like an Inductor source) is skipped, and the bundle explains."""
    os.mkfifo(tmp_path / "spec.toml")
    _one_line_error(_run_with_timeout("explain", EAGER, "--spec", tmp_path / "spec.toml"), "FIFO",
                    "not a regular file", "spec file")
    bundle = tmp_path / "bundle"
    shutil.copytree(H200.parent / "bundles" / "seed_compile", bundle)
    os.mkfifo(bundle / "kernels" / ("c" + "f" * 51 + ".py"))
    proc = _run_with_timeout("explain", bundle, "--format", "json")
    assert proc.returncode == 0, proc.stderr
