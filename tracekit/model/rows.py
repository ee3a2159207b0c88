"""Per-step rows of the explain document made on demand: a trace of 100k steps without kernels (issue 27)
held 100k step dicts and 100k fusion dicts (about 250 MB for 13 MB of JSON); ``Rows`` keeps the rows
that carry figures as dicts and writes the others from one template and a few columns when read.

It reads like a list of dicts (len, iteration, indexing, slices, ==); each read of a made row is a new
dict, so a change to it is not kept. ``tracekit.outputs.json_chunks`` writes it in pieces."""

from __future__ import annotations

from collections.abc import Sequence


class Rows(Sequence):
    """``n`` dict rows: ``kept[i]`` where given, else ``template`` (its key order) with ``columns[key][i]``
    for the keys that vary, then ``more.get(i)``'s keys; dict and list values are copied per row."""

    __slots__ = ("n", "template", "columns", "kept", "more", "_mutable")

    def __init__(self, n: int, template: dict, columns: dict | None = None, kept: dict | None = None,
                 more: dict | None = None):
        self.n, self.template, self.columns = n, template, columns or {}
        self.kept, self.more = kept or {}, more or {}
        self._mutable = [k for k, v in template.items() if isinstance(v, (dict, list)) and k not in self.columns]

    def __len__(self) -> int:
        return self.n

    def _row(self, i: int) -> dict:
        got = self.kept.get(i)
        if got is not None:
            return got
        row = self.template.copy()                # the template's key order; varying keys set in place
        for k, col in self.columns.items():
            row[k] = col[i]
        for k in self._mutable:
            row[k] = row[k].copy()
        extra = self.more.get(i)
        if extra:
            row.update(extra)
        return row

    def values(self, key: str) -> list:
        """One key of every row, as a list (no row made)."""
        col = self.columns.get(key)
        default = self.template.get(key)
        out = list(col) if col is not None else [default] * self.n
        for i, row in self.kept.items():
            out[i] = row.get(key)
        for i, row in self.more.items():
            if key in row:
                out[i] = row[key]
        return out

    def keys(self) -> list[str]:
        """Every key of the rows, in the order a list of them would first show it."""
        seen = dict.fromkeys(self.template if self.n > len(self.kept) else ())
        for i in sorted(self.kept):
            seen.update(dict.fromkeys(self.kept[i]))
        for row in self.more.values():
            seen.update(dict.fromkeys(row))
        return list(seen)

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self._row(k) for k in range(*i.indices(self.n))]
        if i < 0:
            i += self.n
        if not 0 <= i < self.n:
            raise IndexError("row index out of range")
        return self._row(i)

    def __iter__(self):
        return map(self._row, range(self.n))

    def __eq__(self, other) -> bool:
        if isinstance(other, (Rows, list, tuple)):
            return len(self) == len(other) and all(a == b for a, b in zip(self, other))
        return NotImplemented

    __hash__ = None

    def __repr__(self) -> str:
        return f"Rows({self.n} rows, {len(self.kept)} kept)"

    def __reduce__(self):
        return Rows, (self.n, self.template, self.columns, self.kept, self.more)


def plain(value):
    """``value`` with every ``Rows`` inside its dicts and lists made a list of dicts (for callers that
    want plain Python objects: the API's documents)."""
    if isinstance(value, Rows):
        return list(value)
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [plain(v) for v in value]
    return value
