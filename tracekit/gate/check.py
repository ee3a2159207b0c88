"""``tracekit check TRACE --baseline B --rules R``: exit 0 when every rule holds, 1 when one fails.

Output formats: text (people), json, junit (one testcase per rule) and github (workflow
annotations). Unreadable input or an invalid rules file raises TracekitError (exit 2).
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

from tracekit.errors import TracekitError
from tracekit.gate.baseline import load_side, parse_tolerance, warn
from tracekit.gate.rules import (
    Result,
    Rules,
    baseline_settings,
    confined_baseline,
    evaluate,
    evaluate_baseline,
    load_rules,
)
from tracekit.report.markdown import md_code, md_table, md_text


def run_check(trace: str, baseline: str | None = None, rules_path: str | None = None,
              tolerance: str | None = None, skip_steps: int | None = None, step_marker: str | None = None,
              device: str | None = None, spec: str | None = None, allow_device_mismatch: bool = False,
              graph_captures: str | None = None) -> dict:
    """Load everything, evaluate every rule; the ``--format json`` document. A baseline from another
    device than the trace is an error unless ``allow_device_mismatch`` (then a warning)."""
    if not baseline and not rules_path:
        raise TracekitError("check needs --baseline, --rules or both")
    rules: Rules | None = load_rules(rules_path) if rules_path else None
    tol = parse_tolerance(tolerance, {}) if tolerance else None
    skip = skip_steps if skip_steps is not None else (rules.skip_steps if rules else 0)
    baseline = baseline or (confined_baseline(rules) if rules else None)
    if rules and rules.baseline and not baseline:
        raise TracekitError(f"{rules.path}: [baseline] rules need a baseline (--baseline or [baseline] path)")
    modules = bool(rules and rules.doc.get("module"))
    side = load_side(trace, step_marker, device, spec, skip, graph_captures, modules=modules)
    warn(side)
    base = None
    if baseline:
        base = load_side(baseline, step_marker, device, spec, skip, graph_captures)
        warn(base)
    return verdict(side, rules, base, tol, baseline, allow_device_mismatch)


def check_side(side, rules=None, base=None, tolerance: str | None = None, allow_device_mismatch: bool = False,
               baseline_path: str | None = None) -> dict:
    """``run_check`` on sides already loaded (the Python API): ``rules`` a rules file path or ``Rules``."""
    rules = load_rules(rules) if rules is not None and not isinstance(rules, Rules) else rules
    if base is None and rules is None:
        raise TracekitError("check needs rules, a baseline or both")
    tol = parse_tolerance(tolerance, {}) if tolerance else None
    return verdict(side, rules, base, tol, baseline_path or (base.path if base is not None else None),
                   allow_device_mismatch)


def verdict(side, rules: "Rules | None", base, tol: dict | None, baseline: str | None,
            allow_device_mismatch: bool = False) -> dict:
    """Every rule evaluated on ``side`` (and against ``base``): the ``--format json`` document."""
    results: list[Result] = evaluate(rules, side) if rules else []
    if base is not None:
        from tracekit.gate.diff import compare
        settings = baseline_settings(rules, tol)
        results += evaluate_baseline(compare(base, side, settings["tol"], allow_device_mismatch), settings)
    if not results:
        raise TracekitError("nothing was checked: the rules and baseline settings ask for no rule "
                            "(a gate that checks nothing would pass anything)")
    failed = sum(not r.ok for r in results)
    return {"trace": side.path, "baseline": baseline, "rules": rules.path if rules else None,
            "steps": len(side.steps), "skipped_steps": side.skipped_steps, "ok": failed == 0,
            "passed": len(results) - failed, "failed": failed,
            "results": [{"rule": r.rule, "ok": r.ok, "expected": r.expected, "found": r.found,
                         "kernels": r.kernels, "message": r.line()} for r in results]}


def to_markdown(doc: dict) -> str:
    """A PR comment: the verdict, then one table row per rule (the explain Markdown's pieces)."""
    head = f"**tracekit check: {'OK' if doc['ok'] else 'FAILED'}** ({doc['passed']} passed, {doc['failed']} failed) on " \
        + md_code(doc["trace"]) + (f" against {md_code(doc['baseline'])}" if doc["baseline"] else "") \
        + (f" with {md_code(doc['rules'])}" if doc["rules"] else "") + f", {doc['steps']} step(s)"
    rows = [["pass" if r["ok"] else "**FAIL**", md_code(r["rule"]), md_text(r["expected"]), md_text(r["found"]),
             "<br>".join(md_code(k) for k in r["kernels"][:3])] for r in doc["results"]]
    return "\n".join([head, ""] + md_table(["", "rule", "expected", "found", "kernels"], "lllll", rows)) + "\n"


def to_text(doc: dict) -> str:
    lines = [f"tracekit check {doc['trace']}" + (f" against {doc['baseline']}" if doc["baseline"] else "")
             + (f" with {doc['rules']}" if doc["rules"] else "") + f" ({doc['steps']} step(s))"]
    lines += [r["message"] for r in doc["results"]]
    lines.append(f"{'OK' if doc['ok'] else 'FAILED'}: {doc['passed']} passed, {doc['failed']} failed")
    return "\n".join(lines) + "\n"


# characters XML 1.0 cannot hold at all (not even escaped): C0 controls but tab/newline/CR, surrogates,
# U+FFFE/U+FFFF; trace text (kernel names) may carry any of them
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


def _x(text) -> str:
    """Text safe in an XML attribute or element: characters XML cannot hold written as \\xNN / \\uNNNN."""
    return _NOT_XML.sub(lambda m: f"\\x{ord(m.group()):02x}" if ord(m.group()) < 256 else f"\\u{ord(m.group()):04x}",
                        str(text))


def to_junit(doc: dict) -> str:
    n, f = str(len(doc["results"])), str(doc["failed"])
    suites = ET.Element("testsuites", name="tracekit check", tests=n, failures=f, errors="0")
    suite = ET.SubElement(suites, "testsuite", name=_x(f"tracekit check {doc['trace']}"), tests=n, failures=f,
                          errors="0", skipped="0")
    group = "tracekit.gate.check." + (doc["rules"] or "baseline").replace("/", ".").removesuffix(".toml")
    for r in doc["results"]:
        case = ET.SubElement(suite, "testcase", classname=_x(group), name=_x(r["rule"]))
        if not r["ok"]:
            fail = ET.SubElement(case, "failure", message=_x(r["message"]), type="RuleFailed")
            fail.text = _x("\n".join([f"expected: {r['expected']}", f"found: {r['found']}"]
                                     + [f"kernel: {k}" for k in r["kernels"]]))
    ET.indent(suites)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(suites, encoding="unicode") + "\n"


def _gh_data(s: str) -> str:
    return s.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _gh_prop(s: str) -> str:
    return _gh_data(s).replace(":", "%3A").replace(",", "%2C")


def to_github(doc: dict) -> str:
    """GitHub workflow commands: one ``::error`` per failed rule, one ``::notice`` summary."""
    where = f"file={_gh_prop(doc['rules'])}," if doc["rules"] else ""
    lines = [f"::error {where}title={_gh_prop('tracekit check: ' + r['rule'])}::{_gh_data(r['message'])}"
             for r in doc["results"] if not r["ok"]]
    lines.append(f"::notice title=tracekit check::{_gh_data(doc['trace'])}: {doc['passed']} passed, "
                 f"{doc['failed']} failed")
    return "\n".join(lines) + "\n"

