"""Exact reads and writes per kernel row, from the execution trace node of the row's launching op.

A row's launching op carries its Kineto ``Record function id`` (column ``op_rf_id``); the execution
trace (ET) node with that ``rf_id`` lists every argument and result with its storage id, offset,
element count and element size. Tensors are identified by storage and byte range, not by shape:

- **reads**: the tensor arguments, except those the op only writes (``out=`` arguments, the
  destination of ``copy_``/``fill_``/``index_copy_``...); a gather (embedding, index_select, index,
  gather) reads the rows it returns, not its whole table; an expanded (stride-0) view reads its
  distinct elements.
- **writes**: results that are new storage, and every argument the schema marks mutable
  (``Tensor(a!)``): in-place ops read and write it, ``out=`` and copies only write it. A result that
  shares an argument's storage without a mutable annotation is a view (no data moves). Indexed
  writes (``index_copy_``, ``index_put_``, ``scatter_``) write as many bytes as their source, at a
  place inside the destination the ET does not give (a *partial* write).
- **Inductor (Triton) kernels**: the ET records the kernel's pointer arguments in signature order
  and no outputs; the kernel source's signature gives each pointer's role (``in_ptr`` read,
  ``out_ptr`` written, ``in_out_ptr`` both; ``ws_ptr``, the split reduction's workspace of partial
  sums that a later kernel reduces, written). Without the source the writes are unknown (None).

``step_dataflow`` then follows storage versions through one step (launch order): intermediates,
external inputs, final outputs and the bytes of the one-kernel floor.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from tracekit.load.execution_trace import ETNode, ETTensor, ExecutionTrace, read_execution_trace
from tracekit.ops import Tensor
from tracekit.ops.inductor_source import pointer_reach

# Op facts the ET schema does not carry. (They belong in the op records of tracekit/ops; kept here
# until those records say which arguments a call reads partially or writes without reading.)
WRITE_ONLY_SELF = {"copy_", "fill_", "zero_", "normal_", "uniform_", "random_", "exponential_", "bernoulli_",
                   "geometric_", "log_normal_", "cauchy_", "index_copy_", "index_put_", "_index_put_impl_",
                   "index_fill_", "scatter_", "_foreach_copy_", "_foreach_zero_", "_copy_from",
                   "_copy_from_and_resize", "masked_scatter_"}
NO_DATA = {"empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided", "resize_", "resize_as_",
           "set_", "as_strided", "detach", "alias", "lift_fresh", "record_stream"}
GATHERS = {"embedding", "index_select", "index", "gather", "take", "_unsafe_index"}
PARTIAL_WRITES = {"index_copy_": "source", "index_add_": "source", "index_put_": "values",
                  "_index_put_impl_": "values", "scatter_": "src", "scatter_add_": "src", "scatter_reduce_": "src"}
READ_ONLY_MUTABLE = {("_fused_adam_", "grads"), ("_fused_adamw_", "grads"), ("_fused_sgd_", "grads")}

_SCHEMA = re.compile(r"^([\w:]+?)(?:\.(\w+))?\((.*)\)\s*->")


@dataclass(frozen=True, slots=True)
class Access:
    """One tensor a call reads or writes: ``nbytes`` touched (less than the tensor for gathers,
    indexed writes and expanded views); ``partial``: where inside the tensor is not known."""

    t: ETTensor
    nbytes: int
    partial: bool = False

    @property
    def region(self) -> tuple[int, int, int]:
        """(storage, first byte, end byte) of the tensor's extent (an expanded view: its distinct part)."""
        t = self.t
        return t.storage, t.start, t.start + (t.distinct if 0 <= t.distinct < t.numel else t.numel) * t.itemsize


@dataclass(frozen=True, slots=True)
class ExactIO:
    """What one op call reads and writes, by storage. ``fresh``: writes to newly allocated storage
    (results), as opposed to writes into an existing tensor (in place, ``out=``, Inductor buffers)."""

    rf_id: int
    reads: tuple[Access, ...]
    writes: tuple[Access, ...]
    fresh: tuple[bool, ...]
    within: tuple[int, ...] = ()     # rf_ids of the op calls this call runs inside (innermost first)


def _split_args(text: str) -> list[str]:
    out, depth, cur = [], 0, []
    for ch in text:
        if ch in "([":
            depth += 1
        elif ch in ")]":
            depth -= 1
        if ch == "," and depth == 0:
            out.append("".join(cur).strip())
            cur = []
        else:
            cur.append(ch)
    if "".join(cur).strip():
        out.append("".join(cur).strip())
    return out


def schema_args(schema: str) -> tuple[str, list[tuple[str, bool, bool]]]:
    """``aten::add_.Tensor(Tensor(a!) self, Tensor other, *, Scalar alpha=1) -> Tensor(a!)`` →
    ("Tensor", [("self", mutable, kw_only), ...]); ("", []) when there is no schema."""
    m = _SCHEMA.match(schema or "")
    if not m:
        return "", []
    args, kw = [], False
    for a in _split_args(m.group(3)):
        if a == "*":
            kw = True
            continue
        decl = a.split("=")[0].strip()
        name = decl.split()[-1] if decl.split() else ""
        args.append((name, "!)" in decl, kw))
    return m.group(2) or "", args


def _tensors(value) -> list[ETTensor]:
    """The tensors of one argument (a tensor or a TensorList) that hold data."""
    if isinstance(value, ETTensor):
        return [value] if value.nbytes else []
    if isinstance(value, tuple):
        return [t for t in value if isinstance(t, ETTensor) and t.nbytes]
    return []


def _whole(t: ETTensor) -> Access:
    """A read of the whole tensor: its distinct elements (an expanded view repeats some)."""
    return Access(t, t.distinct * t.itemsize if 0 <= t.distinct < t.numel else t.nbytes)


def aten_io(node: ETNode, on_device: bool) -> ExactIO:
    """Reads and writes of an aten (or other schema'd) op call."""
    base = node.name.split("::")[-1]
    overload, args = schema_args(node.schema)
    keep = (lambda t: t.device != "cpu") if on_device else (lambda t: True)
    if base in NO_DATA:
        return ExactIO(node.rf_id, (), (), (), node.within)
    mutable = {i for i, (_, mut, _) in enumerate(args) if mut}
    names = {name: i for i, (name, _, _) in enumerate(args)}
    write_only = {i for i in mutable if args[i][2] or overload.startswith("out") or "out" in args[i][0]
                  or (i == 0 and base in WRITE_ONLY_SELF)}
    read_only = {i for i in mutable if (base, args[i][0]) in READ_ONLY_MUTABLE}
    in_storage = {t.storage for v in node.inputs for t in _tensors(v)}
    out_tensors = [t for v in node.outputs for t in _tensors(v)]
    view = not mutable and bool(out_tensors) and all(t.storage in in_storage for t in out_tensors)
    if view:
        return ExactIO(node.rf_id, (), (), (), node.within)
    gathered = sum(t.nbytes for t in out_tensors[:1]) if base in GATHERS else None
    partial_src = PARTIAL_WRITES.get(base)
    src = node.inputs[names[partial_src]] if partial_src in names and names[partial_src] < len(node.inputs) else None
    src_bytes = sum(t.nbytes for t in _tensors(src)) if src is not None else None
    reads, writes, fresh = [], [], []
    first_tensor = True
    for i, value in enumerate(node.inputs):
        for t in _tensors(value):
            if not keep(t):
                continue
            if i in mutable and i not in read_only:
                if src_bytes is not None and i == 0:
                    if base == "index_add_":
                        reads.append(Access(t, min(t.nbytes, src_bytes), True))
                    writes.append(Access(t, min(t.nbytes, src_bytes), True))
                else:
                    if i not in write_only:
                        reads.append(_whole(t))
                    writes.append(Access(t, t.nbytes))
                fresh.append(False)
                continue
            if gathered is not None and first_tensor:
                reads.append(Access(t, min(t.nbytes, gathered), gathered < t.nbytes))
            else:
                reads.append(_whole(t))
            first_tensor = False
    mutated = {(t.storage, t.start) for i in mutable for t in _tensors(node.inputs[i] if i < len(node.inputs) else None)}
    for t in out_tensors:
        if not keep(t) or (t.storage, t.start) in mutated or t.storage in in_storage:
            continue                  # the mutated argument itself (counted above), or a view of an input
        writes.append(Access(t, t.nbytes))
        fresh.append(True)
    return ExactIO(node.rf_id, tuple(reads), tuple(writes), tuple(fresh), node.within)


_ACCESS = re.compile(r"tl\.(?:load|store)\((\w+) \+ \(((?:[^()]|\([^()]*\))*)\)")
_INDEX_VAR = re.compile(r"\btmp\d+\b")


def indirect_pointers(source: str | None, kernel: str) -> set[str]:
    """Pointers the kernel only loads or stores at computed addresses (``tl.load(in_ptr1 + (r0_0 +
    2048*tmp5))``, ``tl.store(out_ptr0 + (x0 + 128*tmp5 + 65536*x1), ...)``: a gather or scatter
    through a loaded index, as Inductor fuses embedding lookups and index_copy_): it touches some rows
    of the tensor, not all."""
    if not source:
        return set()
    start = source.find(f"def {kernel}(")
    if start < 0:
        return set()
    end = source.find("\n@", start)
    body = source[start:end if end > 0 else len(source)]
    direct, indirect = set(), set()
    for ptr, offset in _ACCESS.findall(body):
        (indirect if _INDEX_VAR.search(offset) else direct).add(ptr)
    return indirect - direct


def _is_pointer(role: str) -> bool:
    """A pointer argument of an Inductor kernel: ``in_ptr0``, ``out_ptr1``, ``in_out_ptr0``, ``ws_ptr0``,
    and a GEMM template's ``arg_A``/``arg_B``."""
    return "ptr" in role or role.startswith("arg_")


def triton_io(node: ETNode, roles: list[str] | None, indirect: set[str] | None = None,
              reach: dict[str, int | None] | None = None) -> ExactIO | None:
    """An Inductor kernel's pointer arguments by role; None without the roles (writes unknown). A
    pointer the kernel only reads touches at most ``reach[role]`` elements (``ops.inductor_source``:
    a slice reads the rows its indexing reaches, a gather one element per point of the iteration
    space); ``indirect`` (older callers): pointers loaded through a loaded index, which read at most
    one element per point (the product of the ``*numel`` arguments)."""
    if not roles:
        return None
    pointers = [r for r in roles if _is_pointer(r)]
    tensors = [v for v in node.inputs if isinstance(v, ETTensor)]
    if len(pointers) != len(tensors):
        return None
    points = 1
    for role, value in zip(roles, node.inputs):
        if role.endswith("numel") and isinstance(value, int) and not isinstance(value, bool) and value > 0:
            points *= value
    reach = dict(reach or {})
    for role in indirect or ():
        reach.setdefault(role, points)
    reads, writes, fresh = [], [], []
    for role, t in zip(pointers, tensors):
        if not t.nbytes:
            continue
        n = reach.get(role)
        some = n is not None and n * t.itemsize < t.nbytes
        written = role.startswith(("in_out_ptr", "out_ptr", "ws_ptr"))
        if role.startswith("in_out_ptr") or not written:
            reads.append(Access(t, n * t.itemsize, True) if some and not written else _whole(t))
        if written:
            writes.append(Access(t, points * t.itemsize, True) if indirect and role in indirect and
                          role.startswith("out_ptr") and points * t.itemsize < t.nbytes else Access(t, t.nbytes))
            fresh.append(False)
    return ExactIO(node.rf_id, tuple(reads), tuple(writes), tuple(fresh), node.within)


def is_triton(node: ETNode) -> bool:
    return node.backend == "triton" or (not node.schema and node.name.startswith("triton_"))


def node_io(node: ETNode, on_device: bool, roles: list[str] | None = None,
            indirect: set[str] | None = None, reach: dict | None = None) -> ExactIO | None:
    """The call's exact reads and writes; None when they cannot be told (an Inductor kernel without
    its source)."""
    return triton_io(node, roles, indirect, reach) if is_triton(node) else aten_io(node, on_device)


def join_execution_trace(df, path, sources=None, et: ExecutionTrace | None = None) -> dict:
    """Fill ``et_io`` on every row whose launching op is in the ET at ``path`` (``et``: already read);
    join counts."""
    if et is None:
        et = read_execution_trace(path, {int(r) for r in df["op_rf_id"] if r != -1})
    ios, cache = [], {}
    for rf, kind, name, kfile in zip(df["op_rf_id"], df["kind"], df["op"], df["kernel_file"]):
        key = (rf, kind != "cpu_op", name)
        if key not in cache:
            node = et.nodes.get(rf) if rf != -1 else None
            if node is not None and node.name != name:
                node = None                # record-function ids restart per profiler session: not this call
            roles, indirect, reach = None, None, None
            if node is not None and is_triton(node) and sources is not None:
                where = node.kernel_file or (kfile if isinstance(kfile, str) else None)
                roles = sources.roles(node.name, where)
                source = sources.source(node.name, where)
                indirect = indirect_pointers(source, node.name)
                numels = {r: v for r, v in zip(roles or (), node.inputs) if r.endswith("numel") and isinstance(v, int)}
                reach = pointer_reach(source, node.name, numels)
            cache[key] = node_io(node, key[1], roles, indirect, reach) if node is not None else None
        ios.append(cache[key])
    df["et_io"] = ios
    joined = sum(1 for x in ios if x is not None)
    return {"path": str(path), "schema": et.schema, "nodes": et.nodes_seen, "rows": len(df), "rows_joined": joined,
            "compressed_bytes": et.compressed_bytes, "json_bytes": et.json_bytes}


# ---- one step: storage versions in launch order ----------------------------------------------

@dataclass
class Version:
    """One written tensor version: its producer (node index), readers, bytes written; ``state``: an
    in-place/out= write into storage that held data from before the step (a cache, a parameter)."""

    access: Access
    producer: int
    fresh: bool
    readers: list[int] = field(default_factory=list)
    live: bool = True
    state: bool = False


@dataclass
class External:
    """A storage range read from outside the step (key: storage, first byte, end byte), once.
    ``whole``: some reader read all of it; else gathers read ``partial`` bytes of it. ``covered``:
    bytes of it written earlier in the step (exact writes) and ``deduct`` (version -> bytes) the
    partial writes inside it: those bytes are the step's own, not outside data."""

    access: Access
    readers: list[int] = field(default_factory=list)
    whole: bool = False
    partial: int = 0
    covered: int = 0
    deduct: dict = field(default_factory=dict)

    @property
    def nbytes(self) -> int:
        _, lo, hi = self.access.region
        if not self.whole:
            return min(self.partial, hi - lo)
        return max(0, hi - lo - self.covered - sum(self.deduct.values()))


def _minus(ranges: list[tuple[int, int]], lo: int, hi: int) -> list[tuple[int, int]]:
    """The byte ranges ``ranges`` less [lo, hi)."""
    return [r for l, h in ranges for r in ((l, min(h, lo)), (max(l, hi), h)) if r[0] < r[1]]


def step_dataflow(ios: list[ExactIO | None]) -> tuple[list[Version], list[External]]:
    """Follow one step's op calls (launch order; ``ios[i]`` of node i): which reads are of tensors
    written earlier in the step (intermediates), which come from outside (external inputs, each
    storage range once), and which versions are still live at the end. A read binds each byte to its
    newest writer (a partial write, place unknown, binds it and leaves its bytes to older ones too)."""
    versions: list[Version] = []
    live: dict[int, list[int]] = {}            # storage -> live versions there
    external: dict[tuple, External] = {}
    for i, io in enumerate(ios):
        if io is None:
            continue
        for a in io.reads:
            s, lo, hi = a.region
            unbound = [(lo, hi)]                 # bytes of the read no newer exact write holds
            partial_hits = {}
            for v in reversed(live.get(s, ())):  # newest first: each byte binds to its newest writer
                if not unbound:
                    break
                ver = versions[v]
                _, vlo, vhi = ver.access.region
                if not any(vlo < h and l < vhi for l, h in unbound):
                    continue
                if not ver.readers or ver.readers[-1] != i:      # i rises: the last reader is the only test
                    ver.readers.append(i)
                if ver.access.partial:
                    partial_hits[v] = ver.access.nbytes         # wrote somewhere inside: older ones stay bound
                else:
                    unbound = _minus(unbound, vlo, vhi)
            covered = hi - lo - sum(h - l for l, h in unbound)
            if not unbound:
                continue
            ext = external.setdefault((s, lo, hi), External(a))
            if not ext.readers or ext.readers[-1] != i:
                ext.readers.append(i)
            if a.partial:
                ext.partial += min(a.nbytes, hi - lo - covered)
            elif not ext.whole:
                ext.whole, ext.covered, ext.deduct = True, covered, partial_hits
        for a, fresh in zip(io.writes, io.fresh):
            s, lo, hi = a.region
            here = live.setdefault(s, [])
            if not a.partial:
                for v in here:
                    _, vlo, vhi = versions[v].access.region
                    if lo <= vlo and vhi <= hi:
                        versions[v].live = False          # wholly overwritten
                here[:] = [v for v in here if versions[v].live]
            here.append(len(versions))
            versions.append(Version(a, i, fresh))
    by_rf = {io.rf_id: i for i, io in enumerate(ios) if io is not None}
    for ver in versions:              # a temporary an op made inside another op call feeds that call's kernels
        if not ver.readers:
            outer = next((by_rf[rf] for rf in ios[ver.producer].within if by_rf.get(rf, -1) > ver.producer), None)
            if outer is not None:
                ver.readers.append(outer)
    read_outside = {ext.access.t.storage for ext in external.values()}
    for ver in versions:
        ver.state = not ver.fresh and ver.access.t.storage in read_outside
    return versions, list(external.values())


def as_tensor(a: Access) -> Tensor:
    """The access as an ``ops.Tensor`` (shape as recorded; a partial access as a flat run of its bytes)."""
    t = a.t
    dtype = t.dtype or f"{t.itemsize}B"
    if a.nbytes != t.nbytes:
        return Tensor((a.nbytes // t.itemsize,), dtype, t.itemsize)
    shape = t.shape if t.shape and _prod(t.shape) == t.numel else (t.numel,)
    return Tensor(shape, dtype, t.itemsize)


def _prod(shape) -> int:
    n = 1
    for d in shape:
        n *= d
    return n
