"""``aten::index`` without an execution trace: Kineto records its ``Tensor?[]`` indices as '' and ``[]``,
but the op's own children carry them. ATen's ``index`` (``make_info``) restrides ``self`` with an
``aten::as_strided`` whose size is the result's (the dims before the indexed ones, the broadcast index
shape, the dims after) and reshapes each index tensor (``aten::reshape``, or ``aten::view``) to broadcast
against it; indices of different shapes are ``aten::expand``ed to one shape first. Those children's ``Input Dims``/``Input type`` are the index tensors. From them the op's list
argument is filled in the form an execution trace gives it (per-entry shapes, short dtypes, '' for a
leading ``None`` entry), so ``ops.indexing`` costs the call. A boolean mask (a ``nonzero`` child) or
children that do not add up are left alone.
"""

from __future__ import annotations

import numpy as np

from tracekit.load.events import shape_value
from tracekit.load.pieces import OP, Piece
from tracekit.ops.tensors import DTYPES

INDEX_OP = "aten::index"
_RESHAPES = ("aten::reshape", "aten::view", "aten::_reshape_alias")


def _field(args, name: str):
    value = shape_value(getattr(args, name, None))
    return value if isinstance(value, list) else None


def _ints(value) -> bool:
    return isinstance(value, list) and all(isinstance(v, int) and not isinstance(v, bool) for v in value)


def _children(p: Piece, o: int, order: np.ndarray, ts: np.ndarray, code: np.ndarray) -> list[int]:
    """The ops directly inside op ``o`` on its thread (not inside another of its children), by start."""
    t0, t1 = p.c_ts[o], p.c_ts[o] + p.c_dur[o]
    a = int(np.searchsorted(ts, t0, side="left"))
    b = int(np.searchsorted(ts, t1, side="right"))
    out, stop = [], -np.inf
    for k in order[a:b].tolist():
        if k == o or code[k] != code[o] or p.c_ts[k] + p.c_dur[k] > t1:
            continue
        if p.c_ts[k] >= stop:
            out.append(k)
            stop = p.c_ts[k] + p.c_dur[k]
    return out


def _entries(p: Piece, o: int, kids: list[int]) -> tuple[list, list] | None:
    """(index shapes, short dtypes) of op ``o``'s list argument from its children, or None."""
    names = [p.c_name[k] for k in kids]
    if "aten::nonzero" in names or "aten::as_strided" not in names:
        return None
    self_dims = _field(p.c_detail[o], "input_dims")
    if not self_dims or not _ints(self_dims[0]):
        return None
    x = self_dims[0]
    size = None
    shapes, kinds = [], []
    # indices of different shapes are expanded to one first (expand_outplace): the expand's input is the
    # index as the call passed it; otherwise the reshape to broadcast against self's restrided view is
    wanted = ("aten::expand",) if "aten::expand" in names else _RESHAPES
    for k, name in zip(kids, names):
        args = p.c_detail[k]
        dims, types, concrete = (_field(args, f) for f in ("input_dims", "input_type", "concrete"))
        if not dims or not types or not _ints(dims[0]) or not isinstance(types[0], str):
            continue
        if name == "aten::as_strided" and size is None and dims[0] == x and concrete and len(concrete) > 1:
            size = shape_value_text(concrete[1])
        elif name in wanted and types[0] in DTYPES and DTYPES[types[0]][0] in ("int64", "int32"):
            shapes.append(dims[0])
            kinds.append(DTYPES[types[0]][0])
    if not isinstance(size, list) or not shapes:
        return None
    index = _broadcast(shapes)
    if index is None:
        return None
    for before in range(len(x) - len(shapes) + 1):          # the dims before the indexed ones
        if x[:before] + index + x[before + len(shapes):] == size:
            return [[]] * before + shapes, [""] * before + kinds
    return None


def shape_value_text(text) -> list | None:
    """A Concrete Inputs entry such as '[1, 128]' as a list of ints, else None."""
    if not isinstance(text, str) or not text.startswith("["):
        return None
    try:
        values = [int(v) for v in text.strip("[]").split(",") if v.strip()]
    except ValueError:
        return None
    return values


def _broadcast(shapes: list[list]) -> list | None:
    rank = max(len(s) for s in shapes)
    out = []
    for axis in range(rank):
        sizes = {s[axis - rank + len(s)] for s in shapes if axis - rank + len(s) >= 0} - {1}
        if len(sizes) > 1:
            return None
        out.append(sizes.pop() if sizes else 1)
    return out


def index_lists(p: Piece, ops: list[int]) -> dict[int, tuple[list, list]]:
    """For each ``aten::index`` op among ``ops`` (CPU op positions), its list argument from its children."""
    targets = sorted({o for o in ops if o >= 0 and p.c_name[o] == INDEX_OP})
    if not targets:
        return {}
    roles = np.asarray(p.c_role, dtype=np.int8)
    ts_all = np.asarray(p.c_ts, dtype=float)
    codes: dict = {}
    code = np.array([codes.setdefault(t, len(codes)) for t in p.c_tid], dtype=np.int64)
    order = np.flatnonzero(roles == OP)
    order = order[np.argsort(ts_all[order], kind="stable")]
    ts = ts_all[order]
    found = {}
    for o in targets:
        got = _entries(p, o, _children(p, o, order, ts, code))
        if got is not None:
            found[o] = got
    return found
