"""explain's output: one format on stdout (table, JSON, CSV or Markdown), warnings on stderr, and the
files asked for (--html, --perfetto). Every format is written from one explain document per trace
(``diagnosis.document``: the JSON contract with ``summary.diagnosis``)."""

from __future__ import annotations

import sys

import orjson

from tracekit.errors import TracekitError, one_line, warn
from tracekit.model.trace import Trace
from tracekit.report.diagnosis import document
from tracekit.outputs import json_chunks


def emit(traces: list[Trace], fmt: str, top: int = 15, fusion: bool = False, wide: bool = False,
         html: str | None = None, perfetto: str | None = None, by: str = "kernel", sort: str = "time",
         pattern=None, devices: list | None = None, xlsx: str | None = None, width: int | None = None,
         csv_by: str | None = None, depth: int | None = None,
         keep_key: str | None = None) -> None:
    """Write one format to stdout and the --html / --perfetto files; warnings go to stderr. ``by``,
    ``sort``, ``pattern`` (a ``limits.UserRegex``): what the top table of the table and Markdown formats
    shows (JSON, CSV and HTML keep every kernel). ``devices`` (specs, explain --devices): stdout holds
    the floors on each device (``report.devices``; JSON: the document gains a ``devices`` key).
    ``xlsx``: also write a workbook, one sheet per table (``report.export``); ``width``: the table's
    width in cells (default: the terminal's, else $COLUMNS, else 200); ``csv_by``: CSV rows grouped by
    kernel, op or category (None: one row per kernel execution). ``by`` "module": the module tree
    (``report.tree_view``) in every format, ``depth`` levels in the table. ``keep_key``: a plain JSON
    explain's output and warning lines are kept under this ``model.doc_cache`` key as they are written."""
    trees = _module_trees(traces) if by == "module" else None
    lines = list(dict.fromkeys(f"tracekit: warning: {one_line(w, 500)}" for t in traces for w in t.warnings))
    for t in traces:
        for w in t.warnings:
            warn(w)                                      # trace text: one bounded line, each once
    docs = [document(t) for t in traces] if fmt != "csv" or html or perfetto or xlsx else []
    if trees is not None:
        _add_modules(traces[0], docs, *trees)
    if perfetto:
        if len(traces) != 1:
            raise TracekitError("--perfetto annotates one torch.profiler trace; this input holds several MLX graphs")
        from tracekit.report.perfetto import write_perfetto
        info = write_perfetto(traces[0], docs[0], perfetto)
        print(f"tracekit: wrote {perfetto} ({info['annotated']} events annotated, {info['added_events']} added, "
              f"{info['bytes']:,} bytes)", file=sys.stderr)
    if html:
        from tracekit.report.html import write_html
        size = write_html(traces, _with_module_tree(traces, docs) if trees is None else docs, html, devices)
        print(f"tracekit: wrote {html} ({size:,} bytes)", file=sys.stderr)
    if xlsx:
        from tracekit.report.export import module_table, workbook_tables, write_xlsx
        modules = [m for m in map(module_table, traces) if m is not None]
        size = write_xlsx(workbook_tables(traces, modules[0] if len(modules) == 1 else None, frames=False), xlsx)
        print(f"tracekit: wrote {xlsx} ({size:,} bytes)", file=sys.stderr)
    if devices is not None:
        from tracekit.report.devices_view import write_devices
        write_devices(traces, docs, devices, fmt, top)
    elif fmt == "json":
        doc = docs[0] if len(docs) == 1 else {"graphs": docs}
        del docs
        keep = keep_key if not (html or perfetto or xlsx or devices is not None or trees is not None) else None
        from tracekit.model.doc_cache import Keeper
        with Keeper(keep, lines) as keeper:            # written as made: the whole text is never held
            for piece in json_chunks(doc, orjson.OPT_SERIALIZE_NUMPY | orjson.OPT_NON_STR_KEYS):
                sys.stdout.buffer.write(piece)
                keeper.write(piece)
            sys.stdout.buffer.write(b"\n")
            sys.stdout.flush()
            keeper.write(b"\n")
            keeper.commit()
        return None
    elif fmt == "csv":
        if trees is not None:
            from tracekit.report.tree_view import write_modules_csv
            write_modules_csv(traces[0], trees[0], sys.stdout)
        else:
            from tracekit.report.export import csv_text
            sys.stdout.write(csv_text(traces, csv_by))
    elif fmt == "markdown":
        from tracekit.report.markdown import markdown
        sys.stdout.write(markdown(traces, docs, top=top, by="kernel" if trees else by, sort=sort,
                                  pattern=None if trees else pattern))
        if trees is not None:
            from tracekit.report.tree_view import DEFAULT_DEPTH, modules_markdown
            sys.stdout.write(modules_markdown(traces[0], trees[0], depth or DEFAULT_DEPTH, pattern))
    else:
        from tracekit.report.table import print_tables         # rich and networkx: for people's tables only
        print_tables(traces, top=top, fusion=fusion, wide=wide, docs=docs, by=by, sort=sort, pattern=pattern,
                     width=width,
                     modules=_module_table(trees[0], depth, pattern, wide) if trees is not None else None)
    sys.stdout.flush()


def _module_trees(traces: list[Trace]):
    """explain --by module: the trees of the one trace (and its scopes)."""
    if len(traces) != 1:
        raise TracekitError("--by module reads one torch.profiler trace; this input holds several MLX graphs")
    from tracekit.report.tree_view import build
    return build(traces[0])


def _with_module_tree(traces: list[Trace], docs: list[dict]) -> list[dict]:
    """The HTML report's documents: a trace recorded with module events (its ``with_modules`` flag) gets the
    module tree section without --by module (the JSON on stdout is left as it was)."""
    if len(traces) != 1 or not docs or not traces[0].metadata.get("with_modules"):
        return docs
    from tracekit.report.tree_view import build, modules_document
    trees, scopes = build(traces[0])
    return [dict(docs[0], modules=modules_document(traces[0], trees, scopes))]


def _module_table(trees, depth: int | None, pattern, wide: bool):
    from tracekit.report.tree_view import DEFAULT_DEPTH, module_table
    return lambda trace, width: module_table(trace, trees, width, depth or DEFAULT_DEPTH, pattern, wide)


def _add_modules(trace: Trace, docs: list[dict], trees, scopes) -> None:
    """The JSON document gains ``modules`` (the trees) and each kernel record its ``module``, ``phase`` and
    ``annotations`` (the user annotations inside its innermost module)."""
    from tracekit.report.tree_view import modules_document, row_places
    if not docs:
        return
    doc = docs[0]
    doc["modules"] = modules_document(trace, trees, scopes)
    paths, phases = row_places(scopes)
    for rec, path, phase, place in zip(doc["kernels"], paths, phases, scopes.places):
        rec["module"], rec["phase"], rec["annotations"] = path, phase, list(place.annotations)
