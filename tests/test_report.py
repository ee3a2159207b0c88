"""Reports people look at (issue 12): the diagnosis, the HTML report, the Perfetto-annotated trace,
tables that fit 80 and 120 columns, Markdown. Every expectation is derived here from the raw trace
or the explain JSON with plain Python, not copied from tracekit's output."""

from __future__ import annotations

import gzip
import html
import json
import math
import re
from collections import defaultdict
from html.parser import HTMLParser
from pathlib import Path

import pytest
from conftest import H200, PEERS, analyze, explain_json, run_cli

MODELS = H200 / "models"
LLAMA = MODELS / "llama_decode_eager"          # eager decode: ~367 small kernels per step, GPU mostly idle
GPT = MODELS / "gpt_train_eager"
LOWP = MODELS / "lowp_mm"                      # one fp8 or int8 4096³ GEMM per step
GRAPHED = MODELS / "llama_decode_reduce_overhead"
DEVICE_CATS = {"kernel", "gpu_memcpy", "gpu_memset"}


def raw_events(path: Path) -> list[dict]:
    p = path / "trace.json.gz" if path.is_dir() else path
    with gzip.open(p) as f:
        return json.load(f)["traceEvents"]


def raw_steps(events: list[dict]) -> list[dict]:
    """Per ProfilerStep range, from the raw events: the device events whose launch lies inside it (kernel
    count, the union of their intervals over their span: GPU busy %, and the share of time in GEMMs)."""
    launch_ts = {e["args"]["correlation"]: e["ts"] for e in events
                 if e.get("cat") in ("cuda_runtime", "cuda_driver") and "correlation" in (e.get("args") or {})}
    steps = sorted({(e["ts"], e["ts"] + e["dur"]) for e in events
                    if e.get("cat") in ("cpu_op", "user_annotation") and re.fullmatch(r"ProfilerStep#\d+", e["name"])})
    out = []
    for s0, s1 in steps:
        ks = [e for e in events if e.get("cat") in DEVICE_CATS and e.get("ph") == "X"
              and s0 <= launch_ts.get(e["args"].get("correlation"), -1) < s1]
        spans = sorted((e["ts"], e["ts"] + e["dur"]) for e in ks)
        busy, cur0, cur1 = 0.0, None, None
        for a, b in spans:
            if cur1 is None or a > cur1:
                busy += 0.0 if cur1 is None else cur1 - cur0
                cur0, cur1 = a, b
            else:
                cur1 = max(cur1, b)
        busy += cur1 - cur0
        window = spans[-1][1] - spans[0][0] if spans else 0.0
        gemm = sum(e["dur"] for e in ks if re.search(r"gemm|nvjet|cutlass", e["name"], re.I))
        out.append({"kernels": len(ks), "busy_pct": 100 * busy / window, "gemm_share": gemm / sum(e["dur"] for e in ks)})
    return out


# ---- the diagnosis -----------------------------------------------------------------------------------

def test_eager_llama_decode_is_launch_bound_and_told_to_use_cuda_graphs():
    steps = raw_steps(raw_events(LLAMA))
    assert len(steps) == 3 and all(s["kernels"] >= 300 and s["busy_pct"] < 10 for s in steps)
    d = explain_json(LLAMA)["summary"]["diagnosis"]
    assert d["verdict"] == "launch-bound"
    assert d["text"].startswith("Launch-bound") and "CUDA graph" in d["next"]
    assert len(d["lines"]) == 2 and d["text"] == "\n".join(d["lines"])
    f = d["facts"]
    assert f["kernels_per_step"] == pytest.approx(sum(s["kernels"] for s in steps) / 3)
    assert f"{round(f['kernels_per_step'])} kernels per step" in d["text"]
    # busy over the three steps together: mean of the raw per-step unions, weighted by their spans
    assert f["busy_pct"] == pytest.approx(sum(s["busy_pct"] for s in steps) / 3, rel=0.1)
    assert f"GPU busy {f['busy_pct']:.0f}%" in d["text"]


def test_gemm_dominated_steps_are_kernel_bound_without_cuda_graph_advice():
    steps = raw_steps(raw_events(LOWP))
    assert all(s["gemm_share"] > 0.98 for s in steps)
    d = explain_json(LOWP)["summary"]["diagnosis"]
    assert d["verdict"] == "kernel-bound"
    assert "CUDA graph" not in d["text"] and "launch-bound" not in d["text"].lower()
    assert "gemm 100%" in d["lines"][0]          # by time: the GEMMs are all of it


def test_graph_replayed_decode_is_not_told_to_use_cuda_graphs():
    d = explain_json(GRAPHED)["summary"]["diagnosis"]
    assert d["facts"]["graph_share"] > 0.9 and "CUDA graph" not in (d["next"] or "")


def test_eager_transformer_block_is_host_bound():
    steps = raw_steps(raw_events(H200 / "block_eager.json.gz"))
    assert all(s["busy_pct"] < 20 and s["kernels"] < 20 for s in steps)
    d = explain_json(H200 / "block_eager.json.gz")["summary"]["diagnosis"]
    assert d["verdict"] == "host-bound" and "CUDA graph" not in d["text"]


def test_fusion_is_advised_only_where_unfused_memory_bound_kernels_take_time():
    doc = explain_json(LLAMA)
    steps = {s["step"] for s in doc["steps"]}
    mem = [k for k in doc["kernels"] if k["step"] in steps and k["bound"] in ("memory", "launch")
           and k["category"] in ("elementwise", "reduction", "norm", "softmax")]
    assert len(mem) / 3 >= 10 and "fuse the" in doc["summary"]["diagnosis"]["next"]
    assert "fuse" not in explain_json(LOWP)["summary"]["diagnosis"]["text"].lower()


# ---- HTML --------------------------------------------------------------------------------------------

class Page(HTMLParser):
    """What the tests read of a page: external references, marks with their data, the diagnosis text."""

    def __init__(self):
        super().__init__()
        self.refs, self.marks, self.svgs, self.scripts = [], [], {}, 0
        self.in_diag, self.diag, self.depth = False, [], 0

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag in ("script", "link", "img", "iframe", "image", "use", "source", "embed", "object"):
            self.refs += [v for k, v in attrs if k in ("src", "href", "xlink:href", "data") and v]
        self.scripts += tag == "script"
        if tag == "svg":
            self.svgs[a.get("id")] = a
            self.current_svg = a.get("id")
        if tag == "circle" and "mark" in (a.get("class") or ""):
            self.marks.append(dict(a, svg=self.current_svg))
        if tag == "div" and a.get("id") == "diagnosis":
            self.in_diag = True
        if self.in_diag:
            self.depth += 1

    def handle_endtag(self, tag):
        if self.in_diag:
            self.depth -= 1
            self.in_diag = self.depth > 0

    def handle_data(self, data):
        if self.in_diag:
            self.diag.append(data)


def html_report(tmp_path, path) -> tuple[str, Page]:
    out = tmp_path / "report.html"
    proc = run_cli("explain", path, "--html", out, "--format", "json")
    assert proc.returncode == 0, proc.stderr
    text = out.read_text(encoding="utf-8")
    page = Page()
    page.feed(text)
    page.close()
    return text, page


def expected_groups(doc: dict) -> tuple[list, list]:
    """Kernel groups from the JSON rows (in steps): (name, op, shapes, category, dtype, bound, fused ops),
    per-step sums; those with FLOPs and bytes (roofline) and those with bytes only (bandwidth strip)."""
    steps = {s["step"] for s in doc["steps"]}
    g = defaultdict(lambda: [0.0, 0.0, 0.0])
    # a kernel whose op call's cost another kernel carries (cost_note names it) groups with that kernel's
    # dtype and bound: the chunks of a fused optimizer are one group with all their time
    carrier = {(k["step"], k["op"], k["name"][:60]): (k["dtype"], k["bound"]) for k in doc["kernels"]
               if k["floor_us"] is not None}
    sibling = "op cost counted on sibling kernel "
    for k in doc["kernels"]:
        if k["step"] not in steps:
            continue
        dims = " ".join("x".join(map(str, d)) if isinstance(d, list) and d and all(isinstance(v, int) for v in d)
                        else "" for d in (k["op_dims"] or [])).strip() if isinstance(k["op_dims"], list) else ""
        dtype, bound = k["dtype"], k["bound"]
        if (k["cost_note"] or "").startswith(sibling):
            dtype, bound = carrier[(k["step"], k["op"], k["cost_note"][len(sibling):])]
        key = (k["name"], k["op"], dims, k["category"], dtype, bound, tuple(k["fused_ops"] or ()))
        s = g[key]
        s[0] += k["flops"] or 0.0
        s[1] += k["bytes"] or 0.0
        s[2] += k["dur_us"] or 0.0
    roof = [(f / b, f / (t * 1e-6)) for f, b, t in g.values() if f > 0 and b > 0 and t > 0]
    flat = [b / (t * 1e-6) for f, b, t in g.values() if not f > 0 and b > 0 and t > 0]
    return sorted(roof), sorted(flat)


@pytest.mark.parametrize("bundle", [LLAMA, GPT], ids=["llama_decode_eager", "gpt_train_eager"])
def test_html_report_is_offline_holds_the_diagnosis_and_one_mark_per_group(tmp_path, bundle):
    text, page = html_report(tmp_path, bundle)
    assert text.startswith("<!DOCTYPE html>")
    assert page.refs == [] and page.scripts == 0                      # nothing to fetch, no script at all
    assert "http://" not in text and "https://" not in text and "@import" not in text and "url(" not in text
    assert len(text.encode()) < 300_000                              # ~140-160 KB on these bundles
    doc = explain_json(bundle)
    assert " ".join(page.diag).split() == " ".join(doc["summary"]["diagnosis"]["lines"]).split()
    roof, flat = expected_groups(doc)
    marks = [m for m in page.marks if m["svg"] == "roofline"]
    strip = [m for m in page.marks if m["svg"] == "bandwidth"]
    assert len(marks) == len(roof) > 10 and len(strip) == len(flat)
    got = sorted((float(m["data-ai"]), float(m["data-perf"])) for m in marks)
    for (ai, perf), (ai2, perf2) in zip(got, roof):
        assert ai == pytest.approx(ai2, rel=1e-5) and perf == pytest.approx(perf2, rel=1e-5)
    assert sorted(float(m["data-bps"]) for m in strip) == pytest.approx(flat, rel=1e-5)
    # each circle sits where its numbers say on the log-log axes the svg declares
    svg = page.svgs["roofline"]
    x0, x1, y0, y1 = (float(svg[k]) for k in ("data-left", "data-right", "data-top", "data-bottom"))
    xmin, xmax, ymin, ymax = (int(svg[k]) for k in ("data-xmin", "data-xmax", "data-ymin", "data-ymax"))
    for m in marks:
        cx = x0 + (math.log10(float(m["data-ai"])) - xmin) / (xmax - xmin) * (x1 - x0)
        cy = y0 + (ymax - math.log10(float(m["data-perf"]))) / (ymax - ymin) * (y1 - y0)
        assert float(m["cx"]) == pytest.approx(cx, abs=0.06) and float(m["cy"]) == pytest.approx(cy, abs=0.06)
    # the device's roofs: the H200's bf16 989.5 and fp8 1979 TFLOP/s, and its 4.8 TB/s
    assert "bf16/fp16 989.5 T" in text and "fp8/int8 1979 T" in text and "4.8 TB/s" in text
    for part in ("timeline", "By category", "By op", "Largest gaps", "Fusion chain"):
        assert part in text
    assert text.count('class="idle"') >= 2                            # the idle track of each drawn step


def test_html_names_every_category_and_step_on_the_page(tmp_path):
    text, _ = html_report(tmp_path, GPT)
    doc = explain_json(GPT)
    plain = html.unescape(text)
    for cat in doc["summary"]["by_category"]:
        assert f"<td class=\"l\">{cat}</td>" in text
    for s in doc["steps"]:
        assert s["name"] in plain


# ---- Perfetto ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("source, suffix", [(LLAMA, ".json.gz"),
                                            (PEERS / "tracelens/h100__gaunernst_bert-small-uncased__1016001.json.gz",
                                             ".json")])
def test_perfetto_keeps_every_event_and_annotates_every_device_event(tmp_path, source, suffix):
    out = tmp_path / f"annotated{suffix}"
    proc = run_cli("explain", source, "--perfetto", out, "--format", "json")
    assert proc.returncode == 0, proc.stderr
    raw_path = source / "trace.json.gz" if source.is_dir() else source
    with gzip.open(raw_path) as f:
        original = json.load(f)
    opened = gzip.open(out) if suffix.endswith(".gz") else open(out, "rb")
    with opened as f:
        annotated = json.load(f)
    assert {k: v for k, v in annotated.items() if k != "traceEvents"} == \
           {k: v for k, v in original.items() if k != "traceEvents"}
    before, after = original["traceEvents"], annotated["traceEvents"]
    assert len(after) > len(before)
    n = 0
    for e, a in zip(before, after):                                # in order, each byte-for-byte bar args.tracekit
        a = dict(a)
        if "tracekit" in (a.get("args") or {}):
            n += 1
            facts = a["args"]["tracekit"]
            a["args"] = {k: v for k, v in a["args"].items() if k != "tracekit"}
            assert facts["category"] and isinstance(facts.get("fused_ops", []), list)
            if "nvjet" in e["name"] or "gemm" in e["name"].lower():
                assert facts["category"] in ("gemm", "gemv")
        assert json.dumps(a, sort_keys=False) == json.dumps(e, sort_keys=False)
    device = [e for e in before if e.get("cat") in DEVICE_CATS and e.get("ph") == "X"]
    assert n == len(device)
    extra = after[len(before):]
    counters = [e for e in extra if e["ph"] == "C"]
    assert len(counters) == 2 * len(explain_json(source)["steps"])
    assert all(set(c["args"]) >= {"measured kernel time"} for c in counters)
    # the floors in the args are the kernel table's (same rows, matched by start and name)
    doc = explain_json(source)
    floors = {(k["start_us"], k["name"]): k["floor_us"] for k in doc["kernels"]}
    for e in after[: len(before)]:
        facts = (e.get("args") or {}).get("tracekit")
        if facts is not None:
            assert facts.get("floor_us") == floors[(float(e["ts"]), e["name"])]


def test_every_row_keeps_the_index_of_its_event():
    events = raw_events(LLAMA)
    df = analyze(LLAMA)[0].kernels
    assert (df["event_index"] >= 0).all()
    for idx, name, ts, dur in zip(df["event_index"], df["name"], df["start_us"], df["dur_us"]):
        e = events[idx]
        assert e["name"] == name and float(e["ts"]) == ts and float(e["dur"]) == dur


def test_perfetto_refuses_an_mlx_graph(tmp_path):
    dots = sorted((H200.parent / "mlx").rglob("*.dot"))
    proc = run_cli("explain", dots[0], "--perfetto", tmp_path / "x.json")
    assert proc.returncode == 2 and "--perfetto" in proc.stderr


# ---- tables that fit ---------------------------------------------------------------------------------

@pytest.mark.parametrize("source", [LLAMA, GPT, PEERS / "tracelens/b200__eager_trace.json.gz",
                                    PEERS / "hta/trace_diff_control_control.json.gz"],
                         ids=["llama", "gpt", "b200_eager", "hta_diff"])
@pytest.mark.parametrize("width", [80, 120])
def test_tables_fit_the_terminal(source, width):
    from tracekit.report.table import render_tables

    traces = analyze(source)
    out = render_tables(traces, width)
    lines = out.splitlines()
    assert max(len(line) for line in lines) <= width
    assert not re.search(r"[│┃]\s*…\s*[│┃]", out)                  # no column collapsed to an ellipsis
    rows = [line for line in lines if line.count("│") >= 3 and not line.startswith(("   ", " ProfilerStep"))]
    names = [line.split("│")[0].strip() for line in rows]
    assert names and all(len(n) >= 20 or not n.endswith("…") for n in names)
    for head in ("kernel", "time", "gap", "count", "floor", "GPU busy"):
        assert head in out
    doc = explain_json(source)
    assert doc["summary"]["diagnosis"]["lines"][0].split()[0] in out


def test_wide_table_and_pipes_keep_every_column():
    proc = run_cli("explain", LLAMA, "--wide")
    assert proc.returncode == 0
    for head in ("category", "op", "shapes", "dtype", "FLOPs", "bytes", "bound", "idle between kernels"):
        assert head in proc.stdout


def test_counts_per_step_print_as_integers_where_they_are():
    from tracekit.report.table import fmt_per_step
    assert fmt_per_step(32.0) == "32" and fmt_per_step(0.5) == "0.5" and fmt_per_step(5 / 3) == "1.7"


def test_compact_names():
    from tracekit.report.fmt import compact_name
    assert compact_name("Memcpy HtoD (Pinned -> Device)") == "Memcpy HtoD (Pinned -> Device)"
    name = ("void at::native::vectorized_elementwise_kernel<8, at::native::CUDAFunctor_add<c10::BFloat16>, "
            "std::array<char*, 3ul> >(int, at::native::CUDAFunctor_add<c10::BFloat16>, std::array<char*, 3ul>)")
    assert compact_name(name, 80) == "vectorized_elementwise_kernel<8,CUDAFunctor_add<…>,array<…>>"
    short = compact_name("nvjet_sm90_tst_64x8_64x16_4x1_v_bz_splitK_TNT", 30)
    assert len(short) == 30 and short.endswith("splitK_TNT") and short.startswith("nvjet_sm90")


# ---- Markdown ----------------------------------------------------------------------------------------

def test_markdown_has_the_diagnosis_the_steps_and_the_top_kernels():
    proc = run_cli("explain", LLAMA, "--format", "markdown", "--top", "10")
    assert proc.returncode == 0, proc.stderr
    md = proc.stdout
    doc = explain_json(LLAMA)
    first = doc["summary"]["diagnosis"]["lines"][0]
    assert f"> **{first}**" in md
    for s in doc["steps"]:
        assert f"| {s['name']} | {s['kernels']} |" in md
    tables = [line for line in md.splitlines() if line.startswith("|")]
    top = [line for line in tables if line.startswith("| `")]
    assert len(top) == 10
    phases = len(doc["phases"])                                   # the per-phase table: a label + one per phase
    assert phases == 1
    for line in tables:                                           # every row has its table's column count
        assert len(re.findall(r"(?<!\\)\|", line)) in (5, 6, 9, 2 + phases)


# ---- explain --by / --sort / --filter (issue 12 item 4) ----------------------------------------------

def _json_groups(doc: dict, key, pattern: str | None = None) -> dict:
    """Per-step sums of the steps' kernels grouped by ``key(kernel)``, from the explain JSON alone:
    count, time, floor (the floors there are) and whether every kernel of the group has one."""
    steps = {s["step"] for s in doc["steps"]}
    out = defaultdict(lambda: {"count": 0, "time": 0.0, "floor": 0.0, "gap_floor": 0.0, "all": True})
    for k in doc["kernels"]:
        if k["step"] not in steps:
            continue
        if pattern and not (re.search(pattern, k["name"]) or (k["op"] and re.search(pattern, k["op"]))):
            continue
        g = out[key(k)]
        g["count"] += 1
        g["time"] += k["dur_us"] or 0.0
        g["floor"] += k["floor_us"] or 0.0
        g["gap_floor"] += k["gap_floor_us"] or 0.0      # max(floor, launch floor): what gap divides by
        g["all"] = g["all"] and k["floor_us"] is not None
    n = len(steps)
    return {name: {"count": g["count"] / n, "time": g["time"] / n, "floor": g["floor"] / n,
                   "gap_floor": g["gap_floor"] / n, "all": g["all"]}
            for name, g in out.items()}


def _top_rows(out: str) -> list[list[str]]:
    """The cells of the top table's rows (its second lines left out)."""
    part = out[out.index("\ntop ") if "\ntop " in out else out.index(" top "):]
    rows = [line.replace("┃", "│") for line in part.splitlines()
            if line.count("│") + line.count("┃") >= 3 and not line.startswith("   ")]
    return [[c.strip() for c in line.split("│")] for line in rows]


def _fmt_count(x: float) -> str:
    return str(round(x)) if abs(x - round(x)) < 1e-9 else f"{x:.1f}"


@pytest.mark.parametrize("source", [GPT, LLAMA], ids=["gpt", "llama"])
@pytest.mark.parametrize("width", [80, 120])
def test_top_table_by_op_and_category_sorted_by_each_key(source, width):
    from tracekit.report.table import render_tables

    doc = explain_json(source)
    traces = analyze(source)
    for by, key in (("op", lambda k: (k["op"] or "-").removeprefix("aten::")), ("category", lambda k: k["category"])):
        groups = _json_groups(doc, key)
        for sort, value in (("time", lambda g: g["time"]), ("count", lambda g: g["count"]),
                            ("floor", lambda g: g["floor"])):
            out = render_tables(traces, width, top=5, by=by, sort=sort)
            assert max(len(line) for line in out.splitlines()) <= width
            rows = _top_rows(out)
            assert rows[0][0] == by and len(rows) == 1 + min(5, len(groups))
            names = [r[0] for r in rows[1:]]
            expected = sorted(groups, key=lambda n: -value(groups[n]))[:5]
            # ties (equal counts) may come in either order: compare the sorted values, then each row's own
            assert [value(groups[n]) for n in names] == pytest.approx([value(groups[n]) for n in expected])
            count_col = rows[0].index("count")
            for r in rows[1:]:
                assert r[count_col] == _fmt_count(groups[r[0]]["count"])


def test_top_table_sorted_by_gap_puts_groups_without_a_floor_last():
    from tracekit.report.table import render_tables

    doc = explain_json(LLAMA)
    groups = _json_groups(doc, lambda k: k["category"])
    gaps = {n: (g["time"] / g["gap_floor"] if g["all"] and g["floor"] else None) for n, g in groups.items()}
    out = render_tables(analyze(LLAMA), 120, top=10, by="category", sort="gap")
    names = [r[0] for r in _top_rows(out)[1:]]
    with_gap = sorted((n for n in gaps if gaps[n] is not None), key=lambda n: -gaps[n])
    assert names[:len(with_gap)] == with_gap and set(names[len(with_gap):]) == {n for n in gaps if gaps[n] is None}
    assert "by gap" in out


@pytest.mark.parametrize("width", [80, 120])
def test_filter_keeps_only_matching_kernels(width):
    from tracekit.limits import UserRegex
    from tracekit.report.table import render_tables

    doc = explain_json(GPT)
    groups = _json_groups(doc, lambda k: (k["op"] or "-").removeprefix("aten::"), pattern="nvjet|gemm")
    out = render_tables(analyze(GPT), width, top=50, by="op", pattern=UserRegex("nvjet|gemm", "--filter"))
    assert max(len(line) for line in out.splitlines()) <= width
    rows = _top_rows(out)[1:]
    assert {r[0] for r in rows} == set(groups) and len(groups) >= 1
    t = rows[0][1]
    top = max(groups.values(), key=lambda g: g["time"])
    number, unit = t.split()
    assert unit == "µs"                                     # µs everywhere, whole µs from 1,000 on
    assert float(number.replace(",", "")) == pytest.approx(top["time"], abs=0.5 if "," in number else 0.005)
    assert "matching 'nvjet|gemm'" in out


def test_by_sort_filter_on_the_command_line_and_in_markdown():
    proc = run_cli("explain", GPT, "--by", "category", "--sort", "count", "--format", "markdown")
    assert proc.returncode == 0, proc.stderr
    groups = _json_groups(explain_json(GPT), lambda k: k["category"])
    rows = [line.split("|")[1:-1] for line in proc.stdout.splitlines() if line.startswith("| ")]
    head = next(i for i, r in enumerate(rows) if r[0].strip() == "category" and r[1].strip() == "count")
    body = [[c.strip() for c in r] for r in rows[head + 1:head + 1 + len(groups)]]
    assert [groups[r[0]]["count"] for r in body] == sorted((g["count"] for g in groups.values()), reverse=True)
    assert all(r[1] == _fmt_count(groups[r[0]]["count"]) for r in body)
    refused = run_cli("explain", GPT, "--filter", "(a+)+")
    assert refused.returncode == 2 and "--filter" in refused.stderr
    none = run_cli("explain", GPT, "--filter", "no_such_kernel_anywhere")
    assert none.returncode == 0 and "nvjet" not in none.stdout
    assert run_cli("explain", GPT, "--by", "shape").returncode == 2


def test_progress_bar_only_on_a_terminal(tmp_path, monkeypatch):
    import contextlib
    import io

    from tracekit.cli import app

    class Tty(io.StringIO):
        def isatty(self):
            return True

    big = tmp_path / "big.json"
    big.write_bytes(b" " * (app.PROGRESS_BYTES + 1))
    assert isinstance(app._loading(str(big), io.StringIO()), contextlib.nullcontext)        # a pipe: nothing
    assert isinstance(app._loading(str(LLAMA), Tty()), contextlib.nullcontext)              # small: nothing
    tty = Tty()
    with app._loading(str(big), tty):
        pass
    assert "loading big.json" in tty.getvalue()
    proc = run_cli("explain", LLAMA)                                       # tests run without a TTY
    assert proc.returncode == 0 and proc.stderr == ""


# ---- the fusion view fits ----------------------------------------------------------------------------

@pytest.mark.parametrize("source", [LLAMA, GPT], ids=["llama", "gpt"])
@pytest.mark.parametrize("width", [80, 120])
def test_fusion_view_fits_the_terminal(source, width):
    from tracekit.report.table import render_tables

    out = render_tables(analyze(source), width, fusion=True)
    lines = out.splitlines()
    assert max(len(line) for line in lines) <= width
    assert not re.search(r"[│┃]\s*…\s*[│┃]", out)
    fusion = explain_json(source)["summary"]["fusion_per_step"]
    part = out[out.index("fusion per step"):]
    for p in fusion:                                                      # every step's row, its kernel count
        assert re.search(rf"│\s+{p['kernels']} │\s+{p['op_calls']} │", part)
    chain = part[part.index("kernel chain"):]
    # every chain row starts with its index, in order, with no header letters folded one per line
    idx = [int(line.split("│")[0]) for line in chain.splitlines() if re.match(r"\s*\d+ │", line)]
    assert idx[:10] == list(range(10))
    assert "writes → read by" in chain


def test_every_view_writes_times_in_us(tmp_path):
    """Issue 24 ("Done when": µs everywhere). The user-profiled GPT training step (captures/h200/modules/gpt_train:
    9.72 ms of kernels per step, a 0.02 µs nll_loss floor) through every view people read: the table and its
    diagnosis, --fusion, --by module, Markdown, --devices, the HTML page. Its step had read '9.72 ms', its
    smallest floors '0.00 µs' or '20.0 ns', --devices '547 ns'. Now: no ms, s or ns anywhere; the kernel time
    of the median step (the JSON's kernel_us) as whole µs with a separator ('9,722 µs')."""
    trace = H200 / "modules" / "gpt_train" / "trace.json.gz"
    outs = [run_cli("explain", trace, *a, "--width", "120") for a in
            ([], ["--fusion"], ["--by", "module"], ["--devices", "h200,rtx5090"])]
    outs.append(run_cli("explain", trace, "--format", "markdown"))
    page = tmp_path / "r.html"
    outs.append(run_cli("explain", trace, "--fusion", "--by", "module", "--html", page))
    assert all(o.returncode == 0 for o in outs), [o.stderr for o in outs]
    texts = [o.stdout for o in outs] + [re.sub(r"<[^>]+>", " ", page.read_text())]
    for text in texts:
        assert not re.search(r"\d (ms|ns|s)\b", text), re.search(r".{30}\d (ms|ns|s)\b.{10}", text)
    doc = explain_json(trace)
    median = sorted(s["kernel_us"] for s in doc["steps"])[1]
    assert f"{median:,.0f} µs" in outs[0].stdout and f"{median:,.0f} µs" in outs[4].stdout


def test_views_name_the_steps_they_show():
    """Issue 24 ("Done when": the step each view shows is named). The user-profiled GPT training trace keeps
    ProfilerStep#2-#4 (the schedule's wait and warmup steps are not recorded), so a step's index is not its
    name: --devices had said 'steps 0-2 (3 alike)', Markdown's one-kernel floors were an unnamed list and its
    category table said only 'per step'."""
    trace = H200 / "modules" / "gpt_train" / "trace.json.gz"
    devices = run_cli("explain", trace, "--devices", "h200,rtx5090")
    assert devices.returncode == 0 and "ProfilerStep#2–4, alike: 255 kernels" in devices.stdout
    assert "steps 0-2" not in devices.stdout
    md = run_cli("explain", trace, "--format", "markdown").stdout
    assert "**By category** (per step, mean over 3 steps)" in md
    floors = next(line for line in md.splitlines() if line.startswith("One-kernel floor per step:"))
    assert [n for n in ("ProfilerStep#2", "ProfilerStep#3", "ProfilerStep#4") if n in floors] == \
        ["ProfilerStep#2", "ProfilerStep#3", "ProfilerStep#4"]
