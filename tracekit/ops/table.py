"""The op table: one ``OpFamily`` record per family of ops, read by every stage.

A record says, for the aten names it covers: which category a kernel launched by the op belongs
to (classify), the name its work takes in ``fused_ops`` (fusion, check, diff), which tensors a call
reads and writes, with the outputs' shapes and dtypes (cost's minimal bytes, fusion's dataflow), its
FLOPs, the unit that does them (tensor-core ``matrix`` peak or ``vector`` peak) and the dtype they
run in. Adding an op is one record (or one name added to a record) plus one test: docs/ops.md.

Minimal bytes = every tensor in ``reads`` read once + every tensor in ``writes`` written once, unless
the record says otherwise (a gather reads only the rows it gathers: its ``reads`` say so).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from tracekit.ops.tensors import FLOAT_DTYPES, OpCall, Tensor


@dataclass(frozen=True)
class IO:
    """The tensors one op call reads and writes (outputs with their shapes and dtypes); ``writes``
    None when the call's outputs cannot be told (an Inductor kernel without its source)."""

    reads: tuple[Tensor, ...]
    writes: tuple[Tensor, ...] | None


@dataclass(frozen=True)
class Cost:
    """What one op call costs: FLOPs, minimal bytes, the dtype and unit that set the peak rate."""

    flops: float
    bytes: float
    dtype: str | None        # dtype the work is done in (selects the peak rate)
    unit: str = "vector"     # "matrix" (tensor cores) or "vector"
    model: str = ""          # the formula that produced it (cost_note)


IOFn = Callable[[OpCall], IO]
FlopsFn = Callable[[OpCall, IO], float]


def _first_float(call: OpCall, io: IO) -> str | None:
    """The first floating dtype the call touches; without one, its first tensor's dtype."""
    tensors = (*io.reads, *(io.writes or ()))
    return next((t.dtype for t in tensors if t.dtype in FLOAT_DTYPES), tensors[0].dtype if tensors else None)


@dataclass(frozen=True)
class OpFamily:
    """One family of ops: the aten names it covers and everything every stage needs to know of them."""

    name: str                               # the family, e.g. "matmul"
    aten: tuple[str, ...]                   # op names as the profiler spells them ("aten::mm", ...)
    category: str                           # classify.CATEGORIES: the category of kernels it launches
    io: IOFn | None = None                  # reads and writes of one call; None: not modelled
    flops: FlopsFn | None = None            # FLOPs of one call (default 0)
    unit: str = "vector"                    # "matrix": tensor-core peak; "vector": vector peak
    dtype: Callable[[OpCall, IO], str | None] = _first_float   # dtype the FLOPs run in
    fused: tuple[str, ...] | Callable[[OpCall], list[str]] | None = None  # its fused_ops; None: plain name
    model: str | Callable[[OpCall], str] = ""   # the formula, for cost_note and docs
    moves_data: bool = True                 # False for views: no kernel work, left out of fused_ops

    def fused_ops(self, call: OpCall) -> list[str]:
        """The aten-style op names one call performs (``addmm`` → mm + add)."""
        if callable(self.fused):
            return list(self.fused(call))
        return list(self.fused) if self.fused else [plain_name(call.name)]

    def cost(self, call: OpCall) -> Cost | str:
        """FLOPs, minimal bytes, dtype and unit of one call, or why it has none."""
        if self.io is None:
            return f"no cost model for {call.name}"
        try:
            io = self.io(call)
            flops = float(self.flops(call, io)) if self.flops else 0.0
            dtype = self.dtype(call, io)
        except ValueError as exc:                    # the record's own "why not"
            return f"{call.name}: inputs not understood ({exc})" if str(exc) else \
                f"{call.name}: inputs not understood (ValueError)"
        except (IndexError, TypeError, ZeroDivisionError, KeyError, AttributeError) as exc:
            return f"{call.name}: inputs not understood ({type(exc).__name__})"
        nbytes = float(sum(t.nbytes for t in io.reads) + sum(t.numel * t.itemsize for t in io.writes or ()))
        model = self.model(call) if callable(self.model) else self.model
        return Cost(flops=flops, bytes=nbytes, dtype=dtype, unit=self.unit, model=model)

    def outputs(self, call: OpCall) -> IO | None:
        """Reads and writes of one call, or None when they cannot be told from what was recorded."""
        if self.io is None:
            return None
        try:
            return self.io(call)
        except (IndexError, TypeError, ValueError, ZeroDivisionError, KeyError, AttributeError):
            return None


FAMILIES: list[OpFamily] = []
_BY_OP: dict[str, OpFamily] = {}


def register(family: OpFamily) -> OpFamily:
    """Add a record to the table; an op name may belong to one family only."""
    for op in family.aten:
        if op in _BY_OP:
            raise ValueError(f"{op} is in both {_BY_OP[op].name} and {family.name}")
        _BY_OP[op] = family
    FAMILIES.append(family)
    return family


def lookup(op: str | None) -> OpFamily | None:
    """The record of an op name (overload suffixes such as ``aten::add.Tensor`` ignored, and the call-site
    number SGLang's profiler appends and FlashInfer's module uri: ``canonical_op``), or None."""
    if not isinstance(op, str):
        return None
    found = _BY_OP.get(op)
    if found is None and "." in op.rpartition("::")[2]:
        found = _BY_OP.get(op.rsplit(".", 1)[0])
    if found is None and canonical_op(op) != op:
        found = _BY_OP.get(canonical_op(op))
    return found


def canonical_op(op: str) -> str:
    """The name an op is registered under when the profiler's name carries a part that varies: the
    call-site number SGLang's profiler appends (``..._ragged_100``), the module uri FlashInfer puts in
    front (``flashinfer::batch_prefill_with_kv_cache_dtype_q_bf16_..._paged_run``)."""
    if op.startswith("sglang_profiler::") and op[-1:].isdigit():
        return op.rstrip("0123456789").rstrip("_")
    if op.startswith("flashinfer::") and op.endswith("_paged_run"):
        return "flashinfer::paged_run"
    return op


def plain_name(op: str) -> str:
    """``aten::add_`` → ``add``; ``fbgemm::permute_2D_sparse_data`` → ``permute_2d_sparse_data``."""
    base = op.split("::")[-1]
    if base.endswith("_") and not base.endswith("__"):
        base = base[:-1]
    return base.lower()


def aten(*names: str, inplace: bool = False) -> tuple[str, ...]:
    """``aten::`` names; with ``inplace``, each name's ``_`` variant too (``add`` → ``add_``)."""
    out = [f"aten::{n}" for n in names]
    if inplace:
        out += [f"aten::{n}_" for n in names if not n.endswith("_")]
    return tuple(dict.fromkeys(out))


def cost_of(call: OpCall) -> Cost | str:
    """Cost of one op call from its record, or the reason there is none."""
    family = lookup(call.name)
    if family is None:
        return f"no cost model for {call.name}"
    return family.cost(call)
