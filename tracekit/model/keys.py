"""Hashable stand-ins for a table's decoded JSON values (op shapes, grids), for the memo keys of the
stages that work once per distinct kernel signature (twins, fused ops, io, cost)."""

from __future__ import annotations

SHARED_COLUMNS = ("op_dims", "op_types", "op_strides", "op_concrete", "grid", "block")
"""Columns whose rows share one decoded object per distinct text (the loader and the cache decode
each text once); no stage changes these objects in place."""


class ValueKeys:
    """``keys(v)``: ``repr(v)``, worked out once per list or dict object. Rows that share a decoded
    object (``SHARED_COLUMNS``) cost one repr, not one each; equal values held in distinct objects
    still get equal keys."""

    def __init__(self) -> None:
        self._seen: dict[int, tuple] = {}

    def __call__(self, value) -> str | None:
        if value is None:
            return None
        if type(value) is not list and type(value) is not dict:
            return repr(value)
        got = self._seen.get(id(value))
        if got is None:                 # the object is kept with its key: its id is not reused meanwhile
            got = self._seen[id(value)] = (value, repr(value))
        return got[1]


def ids(values: list) -> list[int]:
    """Each value's ``id``: a key column for ``first_rows`` where the values are lists or dicts (rows
    that share a decoded object, ``SHARED_COLUMNS``, share its id)."""
    return list(map(id, values))


def first_rows(*columns: list) -> list[int]:
    """For each row, the index of the first row whose values in every column are equal (a column of
    ``ids`` compares objects by identity). A stage memoised per row key works a row out only where
    this gives the row itself and copies the answer to the others: ~0.2 µs a row, not a key made in
    Python per row (model.keys: the loops of fused ops, io and cost). Raises TypeError on a value
    that cannot be hashed."""
    first: dict = {}
    return [first.setdefault(key, i) for i, key in enumerate(zip(*columns))]
