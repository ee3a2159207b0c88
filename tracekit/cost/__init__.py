"""Cost models: per-op FLOP and byte counts, device specs and roofline floors.

Importing the package registers every op model (one module per family of ops)."""

from tracekit.cost import ops_attention, ops_conv, ops_matmul, ops_pointwise, ops_reduce  # noqa: F401
