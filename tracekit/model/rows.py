"""Per-step rows of the explain document made on demand: a trace of 100k steps without kernels (issue 27)
held 100k step dicts and 100k fusion dicts (about 250 MB for 13 MB of JSON); ``Rows`` keeps the rows
that carry figures as dicts and writes the others from one template and a few columns when read.

It reads like a list of dicts (len, iteration, indexing, slices, ==); each read of a made row is a new
dict, so a change to it is not kept. ``tracekit.outputs.json_chunks`` writes it in pieces."""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Sequence


class ListLike(Sequence):
    """A sequence that equals a list or tuple of the same items (and another of its own class), item by
    item, as the list it stands for would."""

    __slots__ = ()

    def __eq__(self, other) -> bool:
        if isinstance(other, (type(self), list, tuple)):
            return len(self) == len(other) and all(a == b for a, b in zip(self, other))
        return NotImplemented

    __hash__ = None


class Rows(ListLike):
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
        """One key of every row, as a list (no row made): ``Column``'s whole slice."""
        return Column(self, key)[:]

    def column(self, key: str):
        """``values(key)`` as a lazy ``Column`` when most rows are made from the template (it then holds no
        list of its own: 100k steps' 16 summary lists took 13 MB), else that list."""
        if self.n <= LAZY_FROM or len(self.kept) > self.n // 2:
            return self.values(key)
        return Column(self, key)

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

    def __repr__(self) -> str:
        return f"Rows({self.n} rows, {len(self.kept)} kept)"

    def __reduce__(self):
        return Rows, (self.n, self.template, self.columns, self.kept, self.more)


LAZY_FROM = 2048          # rows up to this many: a plain list per column


class Column(ListLike):
    """One key of every row of a ``Rows``, read on demand: ``rows.values(key)`` without the list. It reads
    like that list (len, iteration, indexing, slices, ==); ``tracekit.outputs.json_chunks`` writes it in
    pieces."""

    __slots__ = ("rows", "key", "col", "default", "over")

    def __init__(self, rows: Rows, key: str):
        self.rows, self.key = rows, key
        self.col, self.default = rows.columns.get(key), rows.template.get(key)
        # rows whose value is not the column's: kept rows, and rows whose extra keys hold this key
        self.over = sorted({*rows.kept, *(i for i, row in rows.more.items() if key in row)})

    def __len__(self) -> int:
        return self.rows.n

    def _at(self, i: int):
        row = self.rows.kept.get(i)
        if row is not None:
            return row.get(self.key)
        extra = self.rows.more.get(i)
        if extra and self.key in extra:
            return extra[self.key]
        return self.default if self.col is None else self.col[i]

    def __getitem__(self, i):
        n = self.rows.n
        if isinstance(i, slice):
            lo, hi, step = i.indices(n)
            if step != 1:
                return [self._at(k) for k in range(lo, hi, step)]
            hi = max(lo, hi)
            out = list(self.col[lo:hi]) if self.col is not None else [self.default] * (hi - lo)
            for k in self.over[bisect_left(self.over, lo):bisect_left(self.over, hi)]:
                out[k - lo] = self._at(k)
            return out
        if i < 0:
            i += n
        if not 0 <= i < n:
            raise IndexError("column index out of range")
        return self._at(i)

    def __iter__(self):
        for lo in range(0, self.rows.n, LAZY_FROM):
            yield from self[lo:lo + LAZY_FROM]

    def __repr__(self) -> str:
        return f"Column({self.key!r}, {self.rows.n} rows)"

    def __reduce__(self):
        return Column, (self.rows, self.key)


class Values(ListLike):
    """An array read as a list of Python values (a column of ``Rows``): NumPy ``values`` (``None`` where
    the bool array ``none`` is true), an Arrow string array, or positions into ``lookup``. An item is a
    Python value, a slice a list; it holds no list of its own."""

    __slots__ = ("values", "lookup", "none")

    def __init__(self, values, lookup: list | None = None, none=None):
        self.values, self.lookup, self.none = values, lookup, none

    def __len__(self) -> int:
        return len(self.values)

    def __getitem__(self, i):
        if isinstance(i, slice):
            lo, hi, step = i.indices(len(self))
            if step != 1:
                return [self[k] for k in range(lo, hi, step)]
            got = self.values[lo:hi]
            out = got.to_pylist() if hasattr(got, "to_pylist") else got.tolist()
            if self.lookup is not None:
                return [self.lookup[k] for k in out]
            if self.none is not None:
                return [None if n else v for v, n in zip(out, self.none[lo:hi].tolist())]
            return out
        got = self.values[i]
        got = got.as_py() if hasattr(got, "as_py") else got.item()
        if self.lookup is not None:
            return self.lookup[got]
        return None if self.none is not None and self.none[i] else got

    def __reduce__(self):
        return Values, (self.values, self.lookup, self.none)


def plain(value):
    """``value`` with every ``Rows`` inside its dicts and lists made a list of dicts (for callers that
    want plain Python objects: the API's documents)."""
    if isinstance(value, (Rows, Column)):
        return list(value)
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [plain(v) for v in value]
    return value
