"""The Python API: ``tracekit.load(path) -> Analysis``, explain's numbers as pandas frames and dicts.

The CLI's explain, check and diff read the same functions (analyze, report, gate); docs/api.md has the
schema of every frame and a worked example.
"""

from __future__ import annotations

from pathlib import Path

import orjson
import pandas as pd

from tracekit.errors import TracekitError
from tracekit.model.trace import Trace


def load(path, step_marker: str | None = None, device: str | None = None, spec: str | None = None,
         et=None, skip_steps: int = 0, cache: bool = True, graph_captures=None) -> "Analysis":
    """Analyse a trace file, capture bundle, multi-rank folder or MLX graph as ``tracekit explain`` does.

    ``step_marker``, ``device``, ``spec``, ``et``, ``skip_steps``, ``graph_captures`` (a serving engine's
    capture traces, docs/serving.md) are explain's options of those names;
    ``cache=False`` reads the trace itself rather than the normalised table kept from an earlier run.
    Unusable input raises ``TracekitError`` (the message the CLI prints)."""
    from tracekit.analyze import analyze_path
    from tracekit.model import cache as table_cache
    from tracekit.ranks.discover import is_multi_rank, rank_inputs

    p = Path(path)
    options = {"step_marker": step_marker, "device": device, "spec": spec, "skip": skip_steps}
    if graph_captures is not None:
        options["graph_captures"] = graph_captures
    with table_cache.settings(cache):
        if is_multi_rank(p):
            if et is not None:
                raise TracekitError(f"{p} holds one trace per rank: et applies to one trace")
            ranks = rank_inputs(p)
            traces = [analyze_path(r.path, **options)[0] for r in ranks]
            return Analysis(str(p), traces, options, labels=[r.label for r in ranks], multi_rank=True)
        traces = analyze_path(p, **options, **({"et": et} if et is not None else {}))
    analysis = Analysis(str(p), traces, options)
    analysis.execution_trace = et
    return analysis


class Analysis:
    """One analysed input. ``traces``: the analysed ``Trace`` objects (one; an MLX bundle: one per graph;
    a multi-rank folder: one per rank). Tables of several traces gain a first column ``graph_index`` (MLX
    graphs, 0-based) or ``rank`` (the rank's label) saying which each row is from."""

    def __init__(self, path: str, traces: list[Trace], options: dict, labels: list[str] | None = None,
                 multi_rank: bool = False):
        self.path = path
        self.traces = traces
        self.options = options
        self.multi_rank = multi_rank
        self._labels = labels or [str(i) for i in range(len(traces))]
        self._docs: list[dict] | None = None
        self._ranks: dict | None = None

    def __repr__(self) -> str:
        return f"<tracekit.Analysis {self.path!r}: {len(self.kernels)} kernels, {len(self.steps)} steps>"

    @property
    def trace(self) -> Trace:
        """The one trace (the first rank's or graph's when there are several)."""
        return self.traces[0]

    def _one(self, what: str) -> Trace:
        if len(self.traces) != 1:
            raise TracekitError(f"{self.path} holds {len(self.traces)} traces: {what} takes one "
                                "(use analysis.traces, or load one rank's trace or one .dot graph)")
        return self.traces[0]

    def _stack(self, make) -> pd.DataFrame:
        frames = [make(t) for t in self.traces]
        if len(frames) == 1:
            return frames[0]
        key = "rank" if self.multi_rank else "graph_index"
        labels = self._labels if self.multi_rank else range(len(frames))
        return pd.concat([f.assign(**{key: label})[[key, *f.columns]] for f, label in zip(frames, labels)],
                         ignore_index=True)

    @property
    def documents(self) -> list[dict]:
        """explain's JSON document of each trace (with the diagnosis), as dicts; computed once."""
        if self._docs is None:
            from tracekit.model.rows import plain
            from tracekit.report.diagnosis import document
            self._docs = [plain(document(t)) for t in self.traces]
        return self._docs

    @property
    def kernels(self) -> pd.DataFrame:
        """One row per kernel execution (memcpy, memset; a CPU-only trace's top-level op), in time order:
        every column of ``tracekit.model.schema.COLUMNS`` (docs/api.md lists the main ones)."""
        return self._stack(lambda t: t.kernels)

    @property
    def ops(self) -> pd.DataFrame:
        """One row per launching op (explain --by op): kernels, time, floor per step, gap, FLOPs, bytes."""
        return self.groups("op")

    @property
    def categories(self) -> pd.DataFrame:
        """One row per category (explain --by category)."""
        return self.groups("category")

    def groups(self, by: str = "kernel") -> pd.DataFrame:
        """explain's top table, every group: by ``kernel`` (name, op, shapes), ``op`` or ``category``
        (``module``: the module tree, ``modules``)."""
        if by == "module":
            return self.modules
        from tracekit.report.export import group_table
        return self._stack(lambda t: group_table(t, by))

    @property
    def steps(self) -> pd.DataFrame:
        """One row per step: kernels, kernel time, floor, gap, GPU busy and idle, host-side figures."""
        from tracekit.report.document import step_table
        return self._stack(step_table)

    @property
    def phases(self) -> pd.DataFrame:
        """A serving trace's phases (prefill, decode, mixed), one row each: explain's JSON ``phases``
        (steps, kernels, time, floors, tokens, per-token figures; docs/serving.md); empty without phases."""
        frames = iter([pd.DataFrame(d.get("phases") or []) for d in self.documents])
        return self._stack(lambda _: next(frames))        # _stack calls it once per trace, in order

    @property
    def modules(self) -> pd.DataFrame | None:
        """The module tree as a flat table, one row per node (``path``: its place in the tree; the node's
        own figures as columns), or None when the trace has none (no nn.Module events in it)."""
        from tracekit.report.export import module_table
        tables = [module_table(t) for t in self.traces]
        if all(t is None for t in tables):
            return None
        if len(tables) == 1:
            return tables[0]
        key = "rank" if self.multi_rank else "graph_index"
        labels = self._labels if self.multi_rank else range(len(tables))
        return pd.concat([t.assign(**{key: label}) for t, label in zip(tables, labels) if t is not None],
                         ignore_index=True)

    @property
    def summary(self) -> dict:
        """explain's JSON ``summary`` (one trace), or the cross-rank summary of a multi-rank folder."""
        if self.multi_rank:
            return self.ranks["summary"]
        return self.documents[0]["summary"] if len(self.traces) == 1 else \
            {"graphs": [d["summary"] for d in self.documents]}

    @property
    def warnings(self) -> list[str]:
        """Every warning the analysis gave, each once, in the order given (a multi-rank folder: the
        cross-rank document's, which count the ranks each applies to)."""
        if self.multi_rank:
            return list(dict.fromkeys(self.ranks.get("warnings", [])))
        return list(dict.fromkeys(w for t in self.traces for w in t.warnings))

    @property
    def ranks(self) -> dict:
        """A multi-rank folder's cross-rank document (``tracekit ranks DIR --format json``)."""
        if not self.multi_rank:
            raise TracekitError(f"{self.path} is one trace, not a multi-rank folder")
        if self._ranks is None:
            from tracekit.ranks.run import analyse_ranks
            o = self.options
            from tracekit.model.rows import plain
            self._ranks = plain(analyse_ranks(self.path, o["step_marker"], o["device"], o["spec"], o["skip"],
                                              workers=1))
        return self._ranks

    def side(self):
        """This analysis as one side of a check or diff (``tracekit.gate.baseline.Side``)."""
        from tracekit.gate.baseline import side_of_trace
        return side_of_trace(self._one("check and diff"), self.path)

    def diff(self, other: "Analysis | str", tolerance: str | None = None,
             allow_device_mismatch: bool = False) -> dict:
        """``tracekit diff self other --format json``: this analysis is A, ``other`` (an Analysis, or a path
        to a trace, bundle or explain JSON) is B."""
        from tracekit.gate.baseline import parse_tolerance
        from tracekit.gate.diff import compare
        return compare(self.side(), _side(other, self.options), parse_tolerance(tolerance),
                       allow_device_mismatch=allow_device_mismatch)

    def check(self, rules=None, baseline: "Analysis | str | None" = None, tolerance: str | None = None,
              allow_device_mismatch: bool = False) -> dict:
        """``tracekit check --format json``: ``rules`` a rules file (TOML path), ``baseline`` an Analysis or
        path (default: the rules file's ``[baseline] path``); the document's ``ok`` says whether every rule
        held. Leading steps to skip are ``load(skip_steps=)``'s."""
        from tracekit.gate.check import check_side
        from tracekit.gate.rules import Rules, load_rules
        rules = load_rules(rules) if rules is not None and not isinstance(rules, Rules) else rules
        if baseline is None and rules is not None and rules.baseline:
            baseline = rules.baseline.get("path")        # the rules file's [baseline] path, as the CLI reads it
            if not baseline:
                raise TracekitError(f"{rules.path}: [baseline] rules need a baseline (baseline= or [baseline] path)")
        base = None if baseline is None else _side(baseline, self.options)
        return check_side(self.side(), rules, base, tolerance, allow_device_mismatch=allow_device_mismatch,
                          baseline_path=None if baseline is None else str(getattr(baseline, "path", baseline)))

    def to_json(self) -> str:
        """explain ``--format json`` (a multi-rank folder: the cross-rank document) as text."""
        if self.multi_rank:
            doc = self.ranks
        else:
            doc = self.documents[0] if len(self.traces) == 1 else {"graphs": self.documents}
        return orjson.dumps(doc, option=orjson.OPT_SERIALIZE_NUMPY | orjson.OPT_NON_STR_KEYS).decode()

    def _output(self, path, what: str, force: bool):
        """``path`` checked as the CLI checks its outputs (tracekit.outputs): never one of this analysis's
        inputs, an existing file replaced only with ``force=True``."""
        from tracekit.outputs import check_output_file
        o = self.options
        inputs = [self.path, getattr(self, "execution_trace", None), o.get("spec"), o.get("graph_captures")]
        return check_output_file(path, what, [i for i in inputs if i], force)

    def to_html(self, path, force: bool = False) -> int:
        """explain ``--html PATH``: the self-contained report; its size in bytes. An existing file is
        replaced only with ``force=True``; an input never."""
        from tracekit.report.html import write_html
        self._output(path, "to_html", force)
        return write_html(self.traces, self.documents, path)

    def to_perfetto(self, path, force: bool = False) -> dict:
        """explain ``--perfetto PATH``: the trace with tracekit's facts in each kernel's args (the same
        rules for ``path`` as ``to_html``)."""
        from tracekit.report.perfetto import write_perfetto
        trace = self._one("to_perfetto")
        self._output(path, "to_perfetto", force)
        return write_perfetto(trace, self.documents[0], path)

    def to_csv(self, by: str | None = None) -> str:
        """explain ``--format csv [--by kernel|op|category]``, formula-like text escaped."""
        from tracekit.report.export import csv_text
        return csv_text(self.traces, by)

    def to_xlsx(self, path, force: bool = False) -> int:
        """explain ``--xlsx PATH``: one sheet per table; its size in bytes (needs openpyxl; the same rules
        for ``path`` as ``to_html``)."""
        from tracekit.report.export import workbook_tables, write_xlsx
        self._output(path, "to_xlsx", force)
        return write_xlsx(workbook_tables(self.traces, self.modules, frames=False), path)


def _side(other, options: dict):
    if isinstance(other, Analysis):
        return other.side()
    from tracekit.gate.baseline import load_side
    return load_side(other, options["step_marker"], options["device"], options["spec"], options["skip"])
