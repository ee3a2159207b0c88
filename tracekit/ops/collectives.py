"""Collectives (c10d, NCCL, RCCL, gloo): which collective a kernel or op performs, and the bytes it moves.

A collective's name comes from PyTorch's own record (``Collective name`` of ``record_param_comms`` and,
from PyTorch 2.1, of the NCCL kernel), else from the kernel name (``ncclKernel_AllReduce_RING_LL_Sum_float``,
``ncclDevKernel_AllGather_RING_LL``; ``ncclDevKernel_Generic`` names none), else from the c10d op
(``c10d::allreduce_``, ``nccl:all_reduce``).

Bus bytes follow NCCL-tests' bus-bandwidth convention (NVIDIA/nccl-tests doc/PERFORMANCE.md and the
``*GetBw`` functions in src/, revision a0b82b2): the bytes each rank must move over its link for a
collective of S bytes among n ranks, whatever the algorithm (ring, tree) as long as it is built of
point-to-point transfers: all_reduce 2(n-1)/n·S; reduce_scatter, all_gather, all_to_all, gather and
scatter (n-1)/n·S, with S the whole buffer (all ranks' parts); broadcast, reduce and send/recv S.
An all-reduce done in the NVLink switch (PyTorch's symmetric-memory ``multimem_all_reduce_``, NVLS) is
not built of point-to-point transfers: the switch reduces, and each rank sends its S and receives the
reduced S, so S per direction is its floor, whatever n.
Bus bytes over the link bandwidth of one direction is the collective's floor (cost.roofline).
"""

from __future__ import annotations

import re

from tracekit.ops.tensors import DTYPES

BUS_FACTOR = {
    "all_reduce": lambda n: 2 * (n - 1) / n,
    "reduce_scatter": lambda n: (n - 1) / n, "all_gather": lambda n: (n - 1) / n,
    "all_to_all": lambda n: (n - 1) / n, "gather": lambda n: (n - 1) / n, "scatter": lambda n: (n - 1) / n,
    "broadcast": lambda n: 1.0, "reduce": lambda n: 1.0, "send_recv": lambda n: 1.0,
    "all_reduce_multimem": lambda n: 1.0,
}
GROUP_FREE = ("broadcast", "reduce", "send_recv", "all_reduce_multimem")   # bus bytes need no group size
COLLECTIVES = (*BUS_FACTOR, "barrier")

# spellings after lowercasing and dropping '_' (and a leading c10d::/nccl:/gloo: and trailing '_')
_SPELLINGS = [(re.compile(p), c) for p, c in (
    (r"^multimemallreduce", "all_reduce_multimem"), (r"^allreduce", "all_reduce"), (r"^allgather", "all_gather"), (r"^reducescatter", "reduce_scatter"),
    (r"^alltoall", "all_to_all"), (r"^broadcast", "broadcast"), (r"^barrier", "barrier"),
    (r"^(sendrecv|send|recv|p2p)", "send_recv"), (r"^reduce", "reduce"), (r"^gather", "gather"),
    (r"^scatter", "scatter"))]
_KERNEL = re.compile(r"^(?:nccl|rccl)(?:dev)?kernel_([a-z]+)", re.IGNORECASE)

# record_param_comms 'dtype' spellings (c10::ScalarType names) -> (dtype, bytes per element)
SCALAR_NAMES = {"float": ("fp32", 4), "double": ("fp64", 8), "half": ("fp16", 2), "bfloat16": ("bf16", 2),
                "long": ("int64", 8), "int": ("int32", 4), "short": ("int16", 2), "char": ("int8", 1),
                "byte": ("uint8", 1), "bool": ("bool", 1), "float8_e4m3fn": ("fp8", 1), "float8_e5m2": ("fp8", 1),
                "float8_e4m3fnuz": ("fp8", 1), "float8_e5m2fnuz": ("fp8", 1), "uint32": ("uint32", 4),
                "uint64": ("uint64", 8), "uint16": ("uint16", 2)}


def collective_of(text: str | None) -> str | None:
    """The collective a name spells: a PyTorch ``Collective name`` (``allreduce``, ``_allgather_base``,
    ``reduce_scatter_tensor_coalesced``), a c10d op (``c10d::allreduce_``, ``nccl:all_reduce``) or an
    NCCL/RCCL kernel name (``ncclDevKernel_ReduceScatter_RING_LL``); None when it names none."""
    if not isinstance(text, str) or not text:
        return None
    kernel = _KERNEL.match(text)
    if kernel:
        word = kernel.group(1).lower()
    else:
        word = text.rsplit("::", 1)[-1].rsplit(":", 1)[-1].lower().replace("_", "")
    return next((c for rx, c in _SPELLINGS if rx.match(word)), None)


def element(dtype: str | None) -> tuple[str, int] | None:
    """(dtype, item size) of a record_param_comms ``dtype`` (``Float``, ``BFloat16``) or a Kineto
    ``Input type`` (``float``, ``c10::Half``); None when unknown."""
    if not isinstance(dtype, str):
        return None
    return SCALAR_NAMES.get(dtype.lower()) or DTYPES.get(dtype)


def message_bytes(collective: str, in_nelems, out_nelems, itemsize: int, group_size: int | None) -> float | None:
    """S, the whole buffer of the collective in bytes: the gathered output of an all_gather, the whole
    input of a reduce_scatter, else the input (PyTorch records each rank's part for the other side)."""
    def count(x):
        return x if isinstance(x, int) and not isinstance(x, bool) and x >= 0 else None
    n_in, n_out = count(in_nelems), count(out_nelems)
    if collective == "all_gather":
        elems = n_out if n_out else (n_in * group_size if n_in is not None and group_size else None)
    elif collective == "reduce_scatter":
        elems = n_in if n_in else (n_out * group_size if n_out is not None and group_size else None)
    else:
        elems = n_in if n_in is not None else n_out
    return None if elems is None else float(elems * itemsize)


def bus_bytes(collective: str | None, size: float | None, group_size: int | None) -> float | None:
    """Bytes each rank moves over its link (NCCL-tests' bus-bandwidth factor × S); None when the
    collective, its size or (for a factor that depends on it) the group size is unknown."""
    factor = BUS_FACTOR.get(collective or "")
    if collective in GROUP_FREE and not group_size:
        group_size = 2                      # any group of two or more: the factor does not depend on it
    if factor is None or size is None or not group_size or group_size < 1:
        return None
    return factor(group_size) * size
