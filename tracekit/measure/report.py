"""The measurement document as JSON (``OUT.json``), Markdown (``OUT.md``) and a plain table on stderr."""

from __future__ import annotations

from pathlib import Path

import orjson

from tracekit.errors import say_error
from tracekit.report.fmt import fmt_us


def _pct(x) -> str:
    return "-" if x is None else f"{x:.1f} %"


def _x(x) -> str:
    return "-" if x is None else f"{x:.2f}×"


def rows(doc: dict) -> list[list[str]]:
    out = []
    for s in doc["scopes"]:
        if not s["available"]:
            out.append([s["label"], "-", "-", "-", "0", "-", "not measured: " + s.get("reason", "")])
            continue
        out.append([s["label"], fmt_us(s["median_us"]), _pct(s["spread_pct"]),
                    f"{fmt_us(s['min_us'])} – {fmt_us(s['max_us'])}", str(s["n"]), _x(s.get("x_floor")),
                    "; ".join(x for x in (s["timer"], s.get("note")) if x)])
    return out


HEADER = ["scope", "median", "spread (IQR/median)", "min – max", "n", "× floor", "how"]


def energy_lines(doc: dict) -> list[str]:
    e = doc.get("energy") or {}
    if not e.get("available"):
        return [f"energy: not measured: {e.get('reason')}"]
    lines = [f"energy: {e['j_per_step']:.4g} J/step, {e['avg_w']:.1f} W average over {e['window_s']:.2f} s "
             f"({e['calls']} calls back to back)" + ("" if e["window_ok"] else "; FLAGGED: " + "; ".join(e["flags"]))]
    if e.get("tok_per_j") is not None:
        lines.append(f"tokens: {e['tokens_per_step']:g}/step → {e['tok_per_j']:.4g} tok/J, {e['tok_per_s']:.4g} tok/s")
    d, m = e.get("device") or {}, (e.get("samples") or {}).get("middle") or {}
    lines.append(f"device: power limit {d.get('power_limit_w')} W; SM clock {m.get('sm_clock_mhz')} MHz "
                 f"(max {d.get('max_sm_clock_mhz')}), memory clock {m.get('mem_clock_mhz')} MHz, "
                 f"NVML power {m.get('power_w')} W, {m.get('temperature_c')} °C mid-window")
    return lines


def breakdown_line(doc: dict) -> str | None:
    b = doc.get("breakdown")
    if not b:
        return None
    return (f"where a step's time goes (profiled, median of hot steps): wall {fmt_us(b['wall_us'])}, kernels "
            f"{fmt_us(b['kernel_us'])} ({b['kernels']} kernels), idle between kernels {fmt_us(b['idle_us'])}, "
            f"{b['launches']} launches taking {fmt_us(b['launch_us'])} of CPU, host time between launches "
            f"{fmt_us(b['host_us'])}, syncs {fmt_us(b['sync_us'])}")


def to_markdown(doc: dict) -> str:
    f = doc["floor"]
    lines = [f"# tracekit measure: {' '.join(map(str, doc.get('command') or []))}", "",
             f"Device: {doc['device']['name']} ({doc['device']['device']}), torch {doc['device']['torch_version']}, "
             f"CUDA {doc['device']['cuda_version']}; step rule `{doc['step_rule']}` ({doc['step']}); "
             f"floor {fmt_us(f.get('us'))} ({f.get('source')}, spec {f.get('spec')}, costed share "
             f"{_pct(f.get('costed_pct'))}).", "",
             "| " + " | ".join(HEADER) + " |", "|" + "---|" * len(HEADER)]
    lines += ["| " + " | ".join(c.replace("|", "\\|") for c in r) + " |" for r in rows(doc)]
    lines += ["", *(f"- {x}" for x in energy_lines(doc))]
    if (b := breakdown_line(doc)) is not None:
        lines.append(f"- {b}")
    lines += [f"- warning: {w}" for w in doc.get("warnings", [])]
    return "\n".join(lines) + "\n"


def to_text(doc: dict) -> str:
    table = [HEADER[:6]] + [r[:6] for r in rows(doc)]
    widths = [max(len(r[i]) for r in table) for i in range(6)]
    text = ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in table]
    text += [f"  {s['label']}: {s.get('reason')}" for s in doc["scopes"] if not s["available"]]
    text += energy_lines(doc)
    if (b := breakdown_line(doc)) is not None:
        text.append(b)
    text += [f"warning: {w}" for w in doc.get("warnings", [])]
    return "\n".join(text) + "\n"


def write_outputs(doc: dict, options, show: bool = True) -> None:
    from tracekit.outputs import write_atomic

    out = Path(options.out)
    write_atomic(out, orjson.dumps(doc, option=orjson.OPT_INDENT_2 | orjson.OPT_SERIALIZE_NUMPY
                                   | orjson.OPT_NON_STR_KEYS) + b"\n", "-o", make_parents=True)
    write_atomic(out.with_suffix(".md"), to_markdown(doc).encode("utf-8", "backslashreplace"), "-o")
    if show:
        say_error(to_text(doc) + f"tracekit: wrote {out} and {out.with_suffix('.md').name}\n")
