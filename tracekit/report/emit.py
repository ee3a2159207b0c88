"""explain's output: one format on stdout (table, JSON, CSV or Markdown), warnings on stderr, and the
files asked for (--html, --perfetto). Every format is written from one explain document per trace
(``diagnosis.document``: the JSON contract with ``summary.diagnosis``)."""

from __future__ import annotations

import sys

import orjson

from tracekit.errors import TracekitError, one_line
from tracekit.model.trace import Trace
from tracekit.report.diagnosis import document
from tracekit.report.document import to_csv


def emit(traces: list[Trace], fmt: str, top: int = 15, fusion: bool = False, wide: bool = False,
         html: str | None = None, perfetto: str | None = None, by: str = "kernel", sort: str = "time",
         pattern=None, devices: list | None = None) -> tuple[bytes, list[str]] | None:
    """Write one format to stdout and the --html / --perfetto files; warnings go to stderr. ``by``,
    ``sort``, ``pattern`` (a ``limits.UserRegex``): what the top table of the table and Markdown formats
    shows (JSON, CSV and HTML keep every kernel). ``devices`` (specs, explain --devices): stdout holds
    the floors on each device (``report.devices``; JSON: the document gains a ``devices`` key).
    Returns the JSON written and the warning lines of a plain JSON explain (what ``model.doc_cache`` keeps)."""
    lines = [f"tracekit: warning: {one_line(w, 500)}" for t in traces for w in t.warnings]  # trace text: bounded
    for line in lines:
        print(line, file=sys.stderr)
    docs = [document(t) for t in traces] if fmt != "csv" or html or perfetto else []
    if perfetto:
        if len(traces) != 1:
            raise TracekitError("--perfetto annotates one torch.profiler trace; this input holds several MLX graphs")
        from tracekit.report.perfetto import write_perfetto
        info = write_perfetto(traces[0], docs[0], perfetto)
        print(f"tracekit: wrote {perfetto} ({info['annotated']} events annotated, {info['added_events']} added, "
              f"{info['bytes']:,} bytes)", file=sys.stderr)
    if html:
        from tracekit.report.html import write_html
        size = write_html(traces, docs, html, devices)
        print(f"tracekit: wrote {html} ({size:,} bytes)", file=sys.stderr)
    if devices is not None:
        from tracekit.report.devices_view import write_devices
        write_devices(traces, docs, devices, fmt, top)
    elif fmt == "json":
        doc = docs[0] if len(docs) == 1 else {"graphs": docs}
        out = orjson.dumps(doc, option=orjson.OPT_SERIALIZE_NUMPY | orjson.OPT_NON_STR_KEYS) + b"\n"
        sys.stdout.buffer.write(out)
        sys.stdout.flush()
        return (out, lines) if not (html or perfetto) else None
    elif fmt == "csv":
        sys.stdout.write(to_csv(traces))
    elif fmt == "markdown":
        from tracekit.report.markdown import markdown
        sys.stdout.write(markdown(traces, docs, top=top, by=by, sort=sort, pattern=pattern))
    else:
        from tracekit.report.table import print_tables         # rich and networkx: for people's tables only
        print_tables(traces, top=top, fusion=fusion, wide=wide, docs=docs, by=by, sort=sort, pattern=pattern)
    sys.stdout.flush()
