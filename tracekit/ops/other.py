"""Ops the table knows by name, category and fused-op name, without a cost model yet (no floor).

Views (``moves_data=False``) launch no kernel of their own and are left out of ``fused_ops``.
Communication ops are named here so classify knows them; their cost needs link bandwidth.
"""

from __future__ import annotations

from tracekit.ops.table import OpFamily, aten, register

VIEWS = aten("view", "_unsafe_view", "reshape", "t", "transpose", "permute", "unsqueeze", "squeeze", "expand",
             "slice", "select", "as_strided", "alias", "view_as", "narrow", "split", "unbind", "squeeze_copy",
             "unsqueeze_copy", "view_copy", "permute_copy", "expand_copy", "t_copy", "transpose_copy",
             "slice_copy", "lift_fresh", "detach", "_reshape_alias", "unfold", "split_with_sizes", "numpy_t",
             "view_as_real", "view_as_complex")

register(OpFamily("view", VIEWS, "elementwise", moves_data=False, fused=()))
register(OpFamily("padding", aten("constant_pad_nd", "reflection_pad2d", "replication_pad2d"), "elementwise"))
register(OpFamily("dropout_backward", aten("native_dropout_backward"), "elementwise"))
register(OpFamily("factory_like", aten("scalar_tensor", "new_zeros", "new_empty", "empty_like", "empty"),
                  "elementwise"))
register(OpFamily("weight_norm", aten("_weight_norm_interface"), "norm"))
register(OpFamily("communication", ("c10d::allreduce_", "c10d::allgather_", "c10d::reduce_scatter_",
                                    "c10d::broadcast_", "c10d::alltoall_", "record_param_comms",
                                    "nccl:all_reduce", "nccl:all_gather", "nccl:reduce_scatter", "nccl:broadcast"),
                  "communication"))
