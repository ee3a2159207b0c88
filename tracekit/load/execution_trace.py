"""Read a PyTorch execution trace (``torch.profiler.ExecutionTraceObserver``, the Chakra JSON format).

An execution trace (ET) is ``{"schema", "pid", "time", "start_ts", "nodes": [...], "finish_ts"}``;
each node is one op call with its ``inputs`` and ``outputs`` (``values``, ``shapes``, ``types``) and
``attrs`` (``rf_id``, ``op_schema``, ``kernel_backend``, ``kernel_file``, ...). A tensor value is
``[tensor_id, storage_id, offset, numel, itemsize, device]``: ``storage_id`` names the storage's data
pointer (the same address in the same recording gives the same id), ``offset`` is the storage offset
in elements. A Kineto ``cpu_op`` carries ``"Record function id"`` equal to its node's ``rf_id``: that is
the join.

``read_execution_trace`` streams the ``nodes`` list one node at a time (a gzip or plain file read in
blocks, one node decoded at a time) and keeps only the nodes whose ``rf_id`` is asked for, in a compact
form: memory is bounded by the nodes kept, not by the file. Unusable input is one ``TracekitError``.
"""

from __future__ import annotations

import codecs
import json
import re
from array import array
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Iterable, Iterator

from tracekit.errors import TracekitError
from tracekit.limits import iter_input
from tracekit.ops.tensors import DTYPES

BLOCK = 1 << 20                      # bytes read at a time
HEADER_LIMIT = 1 << 16               # the "nodes" key must start within this many characters
NODE_LIMIT = 64 << 20                # characters one node may take (a larger one is an error, not a read)
_NODES = re.compile(r'"nodes"\s*:\s*\[')
_TENSOR_TYPE = re.compile(r"Tensor\((.*)\)")


@dataclass(frozen=True, slots=True)
class ETTensor:
    """One tensor argument as the ET records it; ``offset`` in elements, as recorded."""

    storage: int
    offset: int
    numel: int
    itemsize: int
    device: str
    dtype: str | None = None         # short name (bf16, fp32, ...) from the node's types
    shape: tuple[int, ...] = ()
    distinct: int = -1               # elements at distinct addresses (an expanded view: fewer); -1: numel
    strides: tuple[int, ...] = ()    # as recorded (where they match the shape)

    @property
    def nbytes(self) -> int:
        return self.numel * self.itemsize

    @property
    def start(self) -> int:
        """First byte in the storage."""
        return self.offset * self.itemsize


@dataclass(frozen=True, slots=True)
class ETNode:
    """One op call: its arguments and results in schema order; a TensorList argument is a tuple of
    ``ETTensor``; a non-tensor (or undefined tensor) argument is None."""

    rf_id: int
    name: str
    schema: str                      # op_schema ("" for Triton kernels and record_function ranges)
    backend: str                     # kernel_backend ("triton" for Inductor kernels)
    kernel_file: str
    inputs: tuple
    outputs: tuple
    input_types: tuple[str, ...]
    node_id: int = -1
    within: tuple[int, ...] = ()     # rf_ids of the op calls this one runs inside, innermost first


@dataclass
class ExecutionTrace:
    """The nodes kept (by rf_id) and what the file held."""

    path: str
    schema: str
    nodes: dict[int, ETNode]
    nodes_seen: int
    compressed_bytes: int
    json_bytes: int


def _bad(path: Path, what: str) -> TracekitError:
    return TracekitError(f"{path}: {what}")


def _blocks(path: Path) -> Iterator[bytes]:
    """The file's bytes in blocks, gunzipped as a stream: tracekit.limits.iter_input (a regular file
    only, within TRACEKIT_MAX_INPUT_BYTES after decompression and TRACEKIT_MAX_GZIP_RATIO)."""
    return iter_input(path, "PyTorch execution trace", block=BLOCK)


def _chunks(path: Path) -> Iterator[str]:
    """The file's text in blocks (UTF-8, a character split across blocks kept whole)."""
    decoder = codecs.getincrementaldecoder("utf-8")("replace")
    for block in _blocks(path):
        yield decoder.decode(block)
    tail = decoder.decode(b"", final=True)
    if tail:
        yield tail


def iter_nodes(path: str | Path, header: dict | None = None) -> Iterator[dict]:
    """Each node of the ET's ``nodes`` list, decoded one at a time. ``header`` (when given) gets the
    top-level fields that precede the list (``schema``, ``pid``, ...) and ``json_bytes``."""
    p = Path(path)
    chunks = _chunks(p)
    buf, pos, total, done = "", 0, 0, False

    def more() -> bool:
        nonlocal buf, pos, total, done
        if done:
            return False
        block = next(chunks, None)
        if block is None:
            done = True
            return False
        total += len(block)
        buf = buf[pos:] + block
        pos = 0
        return True

    while True:                                      # the header, up to the nodes list
        m = _NODES.search(buf)
        if m:
            break
        if "traceEvents" in buf:
            raise _bad(p, "is a Kineto (Chrome) trace, not an execution trace: pass it as the trace and the "
                          "et.json[.gz] of the same run as --et")
        if len(buf) > HEADER_LIMIT or not more():
            if not buf.strip():
                raise _bad(p, "file is empty")
            raise _bad(p, 'no "nodes" list: not a PyTorch execution trace (torch.profiler.ExecutionTraceObserver)')
    if header is not None:
        for key, value in re.findall(r'"(schema|pid|time|start_ts)"\s*:\s*("[^"]*"|-?\d+)', buf[:m.start()]):
            header[key] = json.loads(value)
    pos = m.end()
    decode = json.JSONDecoder().raw_decode
    while True:
        while True:                                  # skip separators; need one non-space character
            while pos < len(buf) and buf[pos] in " \t\r\n,":
                pos += 1
            if pos < len(buf) or not more():
                break
        if pos >= len(buf):
            raise _bad(p, "truncated: the nodes list does not end (was the run killed while writing it?)")
        if buf[pos] == "]":
            break
        while True:
            try:
                node, end = decode(buf, pos)
                break
            except json.JSONDecodeError as exc:
                if len(buf) - pos > NODE_LIMIT or not more():
                    raise _bad(p, f"invalid JSON in the nodes list ({exc.msg} at character {total - len(buf) + exc.pos}); "
                                  "is the file truncated?") from None
        pos = end
        if not isinstance(node, dict):
            raise _bad(p, f"a node is not a JSON object (character {total - len(buf) + pos})")
        yield node
        if pos > BLOCK:                              # drop what was decoded
            buf, pos = buf[pos:], 0
    if header is not None:
        header["json_bytes"] = total


def _dtype(type_text) -> str | None:
    m = _TENSOR_TYPE.fullmatch(type_text) if isinstance(type_text, str) else None
    found = DTYPES.get(m.group(1)) if m else None
    return found[0] if found else None


def _tensor(value, type_text, shape, strides=None) -> ETTensor | None:
    """``[tensor_id, storage_id, offset, numel, itemsize, device]`` → ETTensor; None for anything else
    and for undefined tensors (storage 0, no elements)."""
    if (not isinstance(value, list) or len(value) < 5 or not all(isinstance(v, int) and not isinstance(v, bool)
                                                                for v in value[:5])):
        return None
    _, storage, offset, numel, itemsize = value[:5]
    if storage == 0 or itemsize <= 0:
        return None
    device = value[5] if len(value) > 5 and isinstance(value[5], str) else ""
    dims = tuple(d for d in shape if isinstance(d, int)) if isinstance(shape, list) else ()
    distinct = -1
    kept = tuple(strides) if isinstance(strides, list) and len(strides) == len(dims) and all(
        isinstance(st, int) for st in strides) else ()
    if 0 in kept:
        distinct = 1
        for d, st in zip(dims, kept):
            distinct *= d if st != 0 else 1
    return ETTensor(storage, offset, numel, itemsize, device, _dtype(type_text), dims, distinct, kept)


def _list_types(type_text) -> list[str]:
    """``GenericList[Tensor(float),Tensor(nullptr (uninitialized))]`` → its item types."""
    if not isinstance(type_text, str) or not type_text.startswith("GenericList[") or not type_text.endswith("]"):
        return []
    items, depth, cur = [], 0, []
    for ch in type_text[len("GenericList["):-1]:
        depth += (ch in "([") - (ch in ")]")
        if ch == "," and depth == 0:
            items.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    return items + ["".join(cur)]


def _args(part) -> tuple[tuple, tuple[str, ...]]:
    """A node's ``inputs`` or ``outputs`` as (values, types), schema 1.1 ({values, shapes, types}) or
    older (a list, with the shapes and types in separate node keys)."""
    if isinstance(part, dict):
        values, shapes, types = part.get("values") or [], part.get("shapes") or [], part.get("types") or []
        strides = part.get("strides") or []
    else:
        values, shapes, types, strides = part or [], [], [], []
    out = []
    for i, v in enumerate(values):
        t = types[i] if i < len(types) else ""
        s = shapes[i] if i < len(shapes) else []
        st = strides[i] if i < len(strides) else None
        if isinstance(v, list) and v and isinstance(v[0], list):        # a TensorList
            ts = _list_types(t)
            shapes_i = s if isinstance(s, list) else []
            strides_i = st if isinstance(st, list) else []
            items = tuple(x for j, e in enumerate(v)
                          if (x := _tensor(e, ts[j] if j < len(ts) else "",
                                           shapes_i[j] if j < len(shapes_i) else [],
                                           strides_i[j] if j < len(strides_i) else None)) is not None)
            out.append(items or None)
        elif isinstance(v, int) and not isinstance(v, bool) and t == "Int":
            out.append(v)         # an integer argument (an Inductor kernel's xnumel / r0_numel)
        else:
            out.append(_tensor(v, t, s, st))
    return tuple(out), tuple(str(t) for t in types)


def _attrs(node: dict) -> dict:
    attrs = node.get("attrs")
    if isinstance(attrs, list):
        return {a.get("name"): a.get("value") for a in attrs if isinstance(a, dict)}
    return {k: node.get(k) for k in ("rf_id", "op_schema", "kernel_backend", "kernel_file")}


def compact(node: dict) -> ETNode | None:
    """The parts of a node the dataflow needs; None when it has no integer rf_id."""
    attrs = _attrs(node)
    rf = attrs.get("rf_id")
    if not isinstance(rf, int) or isinstance(rf, bool):
        return None
    inputs, in_types = _args(node.get("inputs"))
    outputs, _ = _args(node.get("outputs"))
    nid = node.get("id")
    return ETNode(rf, str(node.get("name", "")), str(attrs.get("op_schema") or ""),
                  str(attrs.get("kernel_backend") or ""), str(attrs.get("kernel_file") or ""),
                  inputs, outputs, in_types, nid if isinstance(nid, int) else -1)


class _Tree:
    """Parent and rf_id of every node, by node id: in two integer arrays (16 bytes a node) while ids are
    dense (below 4× the nodes seen + 1M), in a dict past that, so that one id of 2^31 in a small file does
    not size an array (it took 8.8 GB). Nodes come children first: enclosing ops are resolved after the pass."""

    def __init__(self) -> None:
        self.parent, self.rf = array("q"), array("q")
        self.sparse: dict[int, tuple[int, int]] = {}
        self.count = 0

    def add(self, nid, parent, rf) -> None:
        if not _id(nid):
            return
        self.count += 1
        parent, rf = (parent if _id(parent) else -1), (rf if _id(rf) else -1)
        if nid >= len(self.parent) and nid > 4 * self.count + (1 << 20):
            self.sparse[nid] = (parent, rf)
            return
        if nid >= len(self.parent):
            grow = nid + 1 - len(self.parent)
            self.parent.extend([-1] * grow)
            self.rf.extend([-1] * grow)
        self.parent[nid], self.rf[nid] = parent, rf

    def _node(self, nid: int) -> tuple[int, int]:
        if 0 <= nid < len(self.parent):
            return self.parent[nid], self.rf[nid]
        return self.sparse.get(nid, (-1, -1))

    def within(self, nid: int) -> tuple[int, ...]:
        out, seen = [], set()
        while nid >= 0 and nid not in seen:
            seen.add(nid)
            nid = self._node(nid)[0]
            rf = self._node(nid)[1] if nid >= 0 else -1
            if rf >= 0:
                out.append(rf)
        return tuple(out)


def _id(value) -> bool:
    """A node id, parent id or rf_id an int64 array can hold (anything else is no id)."""
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value < (1 << 62)


def read_execution_trace(path: str | Path, rf_ids: Iterable[int] | None = None) -> ExecutionTrace:
    """The ET's nodes whose rf_id is in ``rf_ids`` (all nodes with an rf_id when None), by rf_id."""
    p = Path(path)
    if not p.exists():
        raise _bad(p, "no such execution trace file")
    wanted = set(rf_ids) if rf_ids is not None else None
    header: dict = {}
    kept: dict[int, ETNode] = {}
    tree = _Tree()
    seen = 0
    for node in iter_nodes(p, header):
        seen += 1
        attrs = node.get("attrs")
        rf = next((a.get("value") for a in attrs if isinstance(a, dict) and a.get("name") == "rf_id"), None) \
            if isinstance(attrs, list) else node.get("rf_id")
        tree.add(node.get("id"), node.get("ctrl_deps"), rf)
        if wanted is not None and rf not in wanted:      # cheap test before building anything
            continue
        found = compact(node)
        if found is not None:
            kept.setdefault(found.rf_id, found)
    kept = {rf: replace(n, within=tree.within(n.node_id)) for rf, n in kept.items()}
    schema = header.get("schema")
    if not isinstance(schema, str):
        raise _bad(p, "no schema field: not a PyTorch execution trace")
    return ExecutionTrace(str(p), schema, kept, seen, p.stat().st_size, header.get("json_bytes", 0))


def _unrecorded_list(kind, dims) -> bool:
    """A list argument Kineto records without its tensors: "TensorList" (Tensor[]), or an untyped empty
    entry ('' with dims []) as it writes Tensor?[] (the indices of index and index_put)."""
    return kind == "TensorList" or (kind == "" and dims == [])


def _list_entries(tensors, type_text: str) -> list | None:
    """A list argument's entries in order, None where the list holds an undefined tensor (the parsed
    tuple leaves those out; its type text names them); None when they cannot be lined up."""
    if not isinstance(tensors, tuple) or not tensors or not all(isinstance(t, ETTensor) and t.dtype for t in tensors):
        return None
    listed = _list_types(type_text)
    if not listed:
        return list(tensors)
    undefined = ["nullptr" in item for item in listed]
    if undefined.count(False) != len(tensors):
        return None
    kept = iter(tensors)
    return [None if u else next(kept) for u in undefined]


def fill_tensor_lists(df, et: ExecutionTrace) -> int:
    """Give list arguments the shapes and per-tensor dtypes the execution trace recorded for the same op
    call (Kineto records a Tensor[]'s type as "TensorList", no dtype, and torch 2.11 no shapes either:
    ``[]``; a Tensor?[] as '' and ``[]``); returns how many rows gained them. Fused optimizers,
    ``_foreach_*`` ops and index/index_put are costed from these. An undefined entry (a None index:
    the whole dim) is ``[]`` with type ''."""
    filled = 0
    all_strides = df["op_strides"] if "op_strides" in df else [None] * len(df)
    for idx, rf, op, dims, types, strides in zip(df.index, df["op_rf_id"], df["op"], df["op_dims"], df["op_types"],
                                                 all_strides):
        if rf == -1 or not isinstance(dims, list) or not isinstance(types, list) or not any(
                _unrecorded_list(k, d) for k, d in zip(types, dims)):
            continue
        node = et.nodes.get(rf)
        if node is None or node.name != op:
            continue
        new_dims, new_types, changed = list(dims), list(types), False
        new_strides = list(strides) if isinstance(strides, list) and len(strides) == len(dims) else None
        for i, kind in enumerate(types):
            if i >= len(node.inputs) or i >= len(dims) or not _unrecorded_list(kind, dims[i]):
                continue
            entries = _list_entries(node.inputs[i], node.input_types[i] if i < len(node.input_types) else "")
            if entries is not None:
                new_dims[i] = [list(t.shape) if t is not None else [] for t in entries]
                new_types[i] = [t.dtype if t is not None else "" for t in entries]
                if new_strides is not None:          # per entry: an expand()ed entry is read once per element
                    new_strides[i] = [list(t.strides) if t is not None else [] for t in entries]
                changed = True
        if changed:
            df.at[idx, "op_dims"], df.at[idx, "op_types"] = new_dims, new_types
            if new_strides is not None:
                df.at[idx, "op_strides"] = new_strides
            filled += 1
    return filled
