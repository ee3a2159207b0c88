"""The op table: one record per op family, read by classify, cost, fusion, dataflow and the gates.

``lookup("aten::addmm")`` gives the record (category, fused ops, reads/writes with output shapes,
FLOPs, unit, dtype); ``cost_of(call)`` its cost. Importing this package registers every record.
docs/ops.md says how to add an op.
"""

from tracekit.ops import (  # noqa: F401  (each module registers its records)
    attention, conv, indexing, matmul, memory, mlx, other, pointwise, reduce, serving, serving_gemm, vllm)
from tracekit.ops.table import FAMILIES, IO, Cost, OpFamily, cost_of, lookup, plain_name  # noqa: F401
from tracekit.ops.tensors import DTYPES, OpCall, Tensor, broadcast  # noqa: F401
